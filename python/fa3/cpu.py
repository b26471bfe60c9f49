"""Run lowered IR on the CPU with MLIR's execution engine, on NumPy arrays.

Functions to call must carry `llvm.emit_c_interface`; memref arguments are
passed as MLIR memref descriptors over the arrays' own memory (no copies), so
outputs are written in place.
"""
import ctypes

import numpy as np

from . import _capi
from .ir import Fa3Error, Module


def _descriptor(array: np.ndarray):
    """A ranked memref descriptor struct viewing `array` (strides in elements)."""
    rank = array.ndim
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
              ("offset", ctypes.c_longlong)]
    if rank:
        fields += [("sizes", ctypes.c_longlong * rank),
                   ("strides", ctypes.c_longlong * rank)]
    desc_type = type("MemRefDescriptor%d" % rank, (ctypes.Structure,),
                     {"_fields_": fields})
    desc = desc_type()
    desc.allocated = desc.aligned = array.ctypes.data
    desc.offset = 0
    for i in range(rank):
        desc.sizes[i] = array.shape[i]
        desc.strides[i] = array.strides[i] // array.itemsize
    return desc


class CpuProgram:
    """A module lowered to the LLVM dialect, JIT-compiled."""

    def __init__(self, module: Module, opt_level: int = 2):
        self.module = module
        lib = module._lib
        self._lib = lib
        module.context._take_diagnostics()
        self._engine = lib.mlirExecutionEngineCreate(module._mod, opt_level, 0,
                                                     None, False, False)
        if self._engine.is_null():
            raise Fa3Error("could not JIT the module (is it fully lowered to "
                           "the LLVM dialect?)\n" +
                           module.context._take_diagnostics())
        lib.mlirExecutionEngineInitialize(self._engine)

    def call(self, name: str, *arrays: np.ndarray):
        """Calls `name` (a func with llvm.emit_c_interface) on memref arrays."""
        for a in arrays:
            if not isinstance(a, np.ndarray):
                raise TypeError("arguments must be NumPy arrays")
        descs = [_descriptor(a) for a in arrays]
        ptrs = [ctypes.pointer(d) for d in descs]
        packed = (ctypes.c_void_p * len(ptrs))(
            *[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in ptrs])
        sym = name.encode()  # the C API calls _mlir_ciface_<name>
        res = self._lib.mlirExecutionEngineInvokePacked(
            self._engine, _capi.MlirStringRef.of(sym), packed)
        if not res.ok():
            raise Fa3Error("no function '%s' with llvm.emit_c_interface in the "
                           "module" % name)

    def close(self):
        if self._engine is not None and not self._engine.is_null():
            self._lib.mlirExecutionEngineDestroy(self._engine)
            self._engine = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
