# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FA3-MLIR"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".c", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fa3_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%mlir_lib_dir", config.mlir_lib_dir))
config.substitutions.append(("%fa3_src_root", config.fa3_src_root))
config.substitutions.append(
    ("%mlir_c_runner_utils",
     os.path.join(config.mlir_lib_dir, "libmlir_c_runner_utils.so")))
config.substitutions.append(
    ("%mlir_runner_utils",
     os.path.join(config.mlir_lib_dir, "libmlir_runner_utils.so")))

# CUDA_HOME / CUDA_PATH: the toolkit whose ptxas fa3-compile uses (scripts/
# cuda-env.sh exports CUDA_HOME for the one scripts/setup.sh installs).
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP",
                                     "CUDA_HOME", "CUDA_PATH"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fa3_tools_dir, append_path=True)

tool_dirs = [config.fa3_tools_dir, config.llvm_tools_dir]
tools = ["fa3-opt", "fa3-compile", "fa3-capi-test", "mlir-runner", "mlir-opt"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

if config.ptxas and os.path.exists(config.ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))

# cuobjdump (SASS checks): $FA3_CUOBJDUMP, else beside ptxas, else on PATH.
# (%python comes with lit's default substitutions.)
import shutil

cuobjdump = os.environ.get("FA3_CUOBJDUMP") or ""
if not cuobjdump and config.ptxas:
    beside = os.path.join(os.path.dirname(config.ptxas), "cuobjdump")
    cuobjdump = beside if os.path.exists(beside) else ""
cuobjdump = cuobjdump or shutil.which("cuobjdump") or ""
if cuobjdump and os.path.exists(cuobjdump) and "ptxas" in config.available_features:
    config.available_features.add("cuobjdump")
    config.substitutions.append(("%cuobjdump", cuobjdump))
