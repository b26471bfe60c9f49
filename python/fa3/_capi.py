"""ctypes bindings of libFA3CAPI.so (our C API plus MLIR's own C API).

Only what the package uses is declared. MLIR's C handles are structs holding
one pointer; they are passed and returned by value.

Also the checks of the numbers and strings that the package hands to C
(here and in fa3.runtime): ctypes would silently wrap an integer that does not
fit (2**64 + 128 -> 128), round a double to f32 infinity and cut a string at a
NUL byte. Errors read "<where>: <what> (<range>)".
"""
import ctypes
import math
import operator
import os
from pathlib import Path
from typing import List, Optional, Tuple

INT64 = (-2**63, 2**63 - 1)
UINT64 = (0, 2**64 - 1)
_F32_MAX = 3.4028234663852886e38


def _bound(n: int) -> str:
    """2^63-1 rather than 9223372036854775807"""
    for k in range(16, 65):
        for text, v in ((f"2^{k}", 2**k), (f"2^{k}-1", 2**k - 1), (f"-2^{k}", -2**k)):
            if n == v:
                return text
    return str(n)


def check_int(where: str, name: str, value, lo: int, hi: int, error=ValueError) -> int:
    """value as an int in [lo, hi], else `error` (a ValueError) naming it and the
    range; TypeError for what is not an int (ctypes would truncate a float)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: {name} must be an integer, got {type(value).__name__}") \
            from None
    if not lo <= v <= hi:
        raise error(f"{where}: {name} = {v} is out of range ({_bound(lo)} to {_bound(hi)})")
    return v


def check_f32(where: str, name: str, value) -> float:
    """value as a finite float that an f32 holds (ctypes.c_float would make
    3e38 * 10 infinity)."""
    v = float(value)
    if not (math.isfinite(v) and abs(v) <= _F32_MAX):
        raise ValueError(f"{where}: {name} = {v!r} is out of range (finite, |x| <= 3.4e38: f32)")
    return v


def check_str(where: str, name: str, value: Optional[str]) -> Optional[bytes]:
    """value as a C string (None stays NULL): a NUL byte would end it early."""
    if value is None:
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{where}: {name} must be a string, got {type(value).__name__}")
    b = os.fsencode(value)
    if b"\0" in b:
        raise ValueError(f"{where}: {name} {value!r} contains a NUL byte (C strings end there)")
    return b


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


class LibraryNotFoundError(OSError):
    """A library of this package is not installed or built. An OSError, as
    ctypes' own load failures are."""


def library_candidates(name: str) -> List[Path]:
    """Where the package looks for one of its libraries (`name`, e.g.
    libFA3CAPI.so), in order: inside the installed package (fa3/_lib, where
    `pip install .` puts it), $FA3_BUILD_DIR/lib, then the build tree of the
    checkout this package lies in (<repo>/build/lib)."""
    here = Path(__file__).resolve().parent
    cands = [here / "_lib" / name]
    build = os.environ.get("FA3_BUILD_DIR")
    if build:
        cands.append(Path(build) / "lib" / name)
    cands.append(here.parents[1] / "build" / "lib" / name)
    return cands


def _library_path() -> Path:
    """libFA3CAPI.so: $FA3_LIBRARY, else the first of library_candidates()."""
    env = os.environ.get("FA3_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise LibraryNotFoundError(f"libFA3CAPI.so not found: FA3_LIBRARY={env} does not "
                                       "exist")
        return Path(env)
    cands = library_candidates("libFA3CAPI.so")
    for c in cands:
        if c.exists():
            return c
    raise LibraryNotFoundError(
        "libFA3CAPI.so (the FA3 compiler library) not found (looked at "
        + ", ".join(map(str, cands)) + "). This install has no compiler (a runtime-only "
        "install, FA3_RUNTIME_ONLY=ON, only runs precompiled kernels: kernel_dir= or "
        "$FA3_KERNEL_DIR). Install the full package (pip install . without "
        "FA3_RUNTIME_ONLY), build the project (README), or set FA3_LIBRARY to its path")


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
    fn("fa3ModuleCreateParse", MlirModule, MlirContext, MlirStringRef, c_char_p)
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
    """The loaded library (loaded once, on first use). Raises
    LibraryNotFoundError (an OSError) when there is none."""
    global _lib
    if _lib is None:
        _lib = _declare(ctypes.CDLL(str(_library_path())))
    return _lib


def compiler_available() -> Tuple[bool, str]:
    """(True, the library's path) when libFA3CAPI.so loads, else (False, why);
    for callers that can do without the compiler (fa3.torch_api's JIT)."""
    try:
        return True, lib()._name
    except OSError as e:
        return False, str(e)
