"""Whether the compiler can assemble cubins here: a ptxas where it looks
($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, then PATH), found independently of
the compiler's own lookup (which test_compile checks against this)."""
import os
import shutil
from pathlib import Path


def have_ptxas() -> bool:
    dirs = (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")
    return any(Path(d, "bin", "ptxas").exists() for d in dirs if d) or \
        bool(shutil.which("ptxas"))
