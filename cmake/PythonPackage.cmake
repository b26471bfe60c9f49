# The Python wheel's layout, for `pip install .` (pyproject.toml,
# scikit-build-core). This file is read twice:
#
# 1. Before project(), as an initial cache (`cmake -C`, pyproject's
#    cmake.args): the compilers of the scripts/setup.sh build -- clang-22
#    and lld where they are installed and $CC/$CXX are unset -- so that a pip
#    build compiles like the dev build (and ccache can share its objects).
# 2. After every target is defined (the top-level CMakeLists includes it when
#    SKBUILD is set): install rules of the component fa3_python, the only
#    one the wheel installs (pyproject: install.components), into the
#    package folder fa3/ of the wheel's platlib:
#      fa3/_lib/libFA3CAPI.so   the compiler (C API), RUNPATH: LLVM's libdir
#      fa3/_lib/libfa3rt.so     the runtime (CUDA driver API)
#      fa3/_bin/fa3-opt, fa3/_bin/fa3-compile   the tools (RUNPATH
#                               $ORIGIN/../_lib and LLVM's libdir); the
#                               console scripts fa3-opt and fa3-compile
#                               (fa3/_tools.py) run them from PATH
#    and the target fa3-python that builds just these (pyproject:
#    build.targets). With FA3_RUNTIME_ONLY=ON only libfa3rt exists.
#    The other install components (compiler, runtime: `cmake --install`)
#    stay out of the wheel.

if(NOT CMAKE_PROJECT_NAME)   # 1: initial cache, before project()
  if(NOT DEFINED ENV{CC} AND NOT DEFINED ENV{CXX} AND NOT CMAKE_C_COMPILER)
    find_program(FA3_PY_CLANG clang-22)
    find_program(FA3_PY_CLANGXX clang++-22)
    if(FA3_PY_CLANG AND FA3_PY_CLANGXX)
      set(CMAKE_C_COMPILER "${FA3_PY_CLANG}" CACHE FILEPATH "C compiler (pip build)")
      set(CMAKE_CXX_COMPILER "${FA3_PY_CLANGXX}" CACHE FILEPATH "C++ compiler (pip build)")
      find_program(FA3_PY_LLD NAMES ld.lld-22 ld.lld)
      if(FA3_PY_LLD)
        set(LLVM_ENABLE_LLD ON CACHE BOOL "link with lld (pip build)")
      endif()
    endif()
  endif()
  return()
endif()

# 2: install rules of the wheel
set(FA3_PY_TARGETS)
if(TARGET FA3CAPI)
  install(TARGETS FA3CAPI LIBRARY DESTINATION fa3/_lib COMPONENT fa3_python)
  list(APPEND FA3_PY_TARGETS FA3CAPI)
endif()
if(TARGET fa3-compile)
  # the installed tree's layout, not bin/ + lib/: only the wheel is installed
  # when SKBUILD is set
  set_target_properties(fa3-compile PROPERTIES
    INSTALL_RPATH "\$ORIGIN/../_lib;${LLVM_LIBRARY_DIR}")
  install(TARGETS fa3-compile RUNTIME DESTINATION fa3/_bin COMPONENT fa3_python)
  list(APPEND FA3_PY_TARGETS fa3-compile)
endif()
if(TARGET fa3-opt)
  install(TARGETS fa3-opt RUNTIME DESTINATION fa3/_bin COMPONENT fa3_python)
  list(APPEND FA3_PY_TARGETS fa3-opt)
endif()
# The kernel ABI, read by fa3.facts (every install has it).
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/fa3rt_abi.def
        DESTINATION fa3 COMPONENT fa3_python)
if(TARGET fa3rt)
  install(TARGETS fa3rt LIBRARY DESTINATION fa3/_lib COMPONENT fa3_python)
  list(APPEND FA3_PY_TARGETS fa3rt)
elseif(FA3_RUNTIME_ONLY)
  message(FATAL_ERROR "FA3_RUNTIME_ONLY: libfa3rt cannot be built here: it needs the CUDA "
    "driver header cuda.h and library libcuda (a CUDA toolkit, or its link stub), found "
    "through CUDA_HOME, CUDA_PATH or /usr/local/cuda (runtime/CMakeLists.txt)")
else()
  message(WARNING "The wheel has no libfa3rt (no cuda.h/libcuda here): it compiles kernels "
    "but cannot launch them; set CUDA_HOME to a CUDA toolkit to include the runtime")
endif()
add_custom_target(fa3-python)
add_dependencies(fa3-python ${FA3_PY_TARGETS})
message(STATUS "Python wheel: fa3/_lib, fa3/_bin from ${FA3_PY_TARGETS}")
