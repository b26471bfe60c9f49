"""ctypes bindings of libFA3CAPI.so (our C API plus MLIR's own C API).

Only what the package uses is declared. MLIR's C handles are structs holding
one pointer; they are passed and returned by value.
"""
import ctypes
import os
from pathlib import Path


class _Handle(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p)]

    def is_null(self):
        return not self.ptr


class MlirContext(_Handle):
    pass


class MlirModule(_Handle):
    pass


class MlirOperation(_Handle):
    pass


class MlirExecutionEngine(_Handle):
    pass


class MlirStringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("length", ctypes.c_size_t)]

    @classmethod
    def of(cls, text: bytes):
        return cls(text, len(text))


class MlirLogicalResult(ctypes.Structure):
    _fields_ = [("value", ctypes.c_int8)]

    def ok(self):
        return self.value != 0


def _library_path() -> Path:
    """libFA3CAPI.so: $FA3_LIBRARY, else the build tree next to this package."""
    env = os.environ.get("FA3_LIBRARY")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for build in (os.environ.get("FA3_BUILD_DIR"), here.parents[1] / "build"):
        if build and (Path(build) / "lib" / "libFA3CAPI.so").exists():
            return Path(build) / "lib" / "libFA3CAPI.so"
    raise OSError("libFA3CAPI.so not found: build the project (see README) or "
                  "set FA3_LIBRARY to its path")


def _declare(lib):
    def fn(name, restype, *argtypes):
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    c_char_p, c_bool, c_int, c_void_p = (ctypes.c_char_p, ctypes.c_bool,
                                         ctypes.c_int, ctypes.c_void_p)
    fn("fa3ContextCreate", MlirContext)
    fn("mlirContextDestroy", None, MlirContext)
    fn("fa3DiagnosticLogAttach", c_void_p, MlirContext)
    fn("fa3DiagnosticLogText", c_char_p, c_void_p)
    fn("fa3DiagnosticLogClear", None, c_void_p)
    fn("fa3DiagnosticLogDestroy", None, c_void_p)
    fn("mlirModuleCreateParse", MlirModule, MlirContext, MlirStringRef)
    fn("mlirModuleDestroy", None, MlirModule)
    fn("mlirModuleGetOperation", MlirOperation, MlirModule)
    fn("mlirOperationVerify", c_bool, MlirOperation)
    fn("fa3OperationToString", c_void_p, MlirOperation, c_bool)
    fn("fa3StringDestroy", None, c_void_p)
    fn("fa3RunPassPipeline", MlirLogicalResult, MlirOperation, c_char_p)
    fn("mlirExecutionEngineCreate", MlirExecutionEngine, MlirModule, c_int,
       c_int, ctypes.POINTER(MlirStringRef), c_bool, c_bool)
    fn("mlirExecutionEngineInitialize", None, MlirExecutionEngine)
    fn("mlirExecutionEngineDestroy", None, MlirExecutionEngine)
    fn("mlirExecutionEngineInvokePacked", MlirLogicalResult,
       MlirExecutionEngine, MlirStringRef, ctypes.POINTER(c_void_p))
    return lib


_lib = None


def lib():
    """The loaded library (loaded once, on first use)."""
    global _lib
    if _lib is None:
        _lib = _declare(ctypes.CDLL(str(_library_path())))
    return _lib
