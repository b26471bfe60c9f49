# Sourced by the setup and test scripts: finds ptxas the way the compiler
# does ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, then PATH) and, if there is
# none, takes the one scripts/setup.sh installed from NVIDIA's pip wheels
# into build/cuda (exporting CUDA_HOME so that the compiler finds it too).
# Sets FA3_PTXAS (empty: none), and FA3_CUOBJDUMP where only build/cuda has
# cuobjdump.
FA3_PTXAS=""
for fa3_dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
  if [ -n "$fa3_dir" ] && [ -x "$fa3_dir/bin/ptxas" ]; then
    FA3_PTXAS="$fa3_dir/bin/ptxas"
    break
  fi
done
if [ -z "$FA3_PTXAS" ] && command -v ptxas >/dev/null; then
  FA3_PTXAS=$(command -v ptxas)
fi
if [ -z "$FA3_PTXAS" ] && [ -x build/cuda/nvidia/cu13/bin/ptxas ]; then
  export CUDA_HOME="$PWD/build/cuda/nvidia/cu13"
  FA3_PTXAS="$CUDA_HOME/bin/ptxas"
fi
# cuobjdump (the SASS checks: test/Integration/hopper-sass.test) the way
# test/lit.cfg.py looks for it ($FA3_CUOBJDUMP, beside ptxas, PATH), else
# the one scripts/setup.sh installed into build/cuda (nvdisasm beside it).
if [ -z "${FA3_CUOBJDUMP:-}" ] && ! { [ -n "$FA3_PTXAS" ] && [ -x "$(dirname "$FA3_PTXAS")/cuobjdump" ]; } \
    && ! command -v cuobjdump >/dev/null && [ -x build/cuda/nvidia/cu13/bin/cuobjdump ]; then
  export FA3_CUOBJDUMP="$PWD/build/cuda/nvidia/cu13/bin/cuobjdump"
fi
unset fa3_dir
