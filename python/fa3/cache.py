"""JIT compilation with an on-disk cache: a variant is compiled on first use,
in process through the C API (fa3.compile.compile_kernel), and kept in a cache
directory for the next process.

    from fa3 import cache
    kf = cache.get_kernel("bf16", 128, softcap=30.0)   # compiled or found
    kf.cubin_path, kf.facts_path                       # inside cache.cache_dir()

fa3.torch_api.select_kernel (and so flash_attn_func) falls back to this when no
precompiled kernel matches and libFA3CAPI.so is there.

Where: $FA3_CACHE_DIR, else $XDG_CACHE_HOME/fa3, else ~/.cache/fa3 (read at
each lookup that misses memory). An entry is a directory
``<dtype>-d<head dim>-<key>/`` holding the kernel's .ptx, .cubin and .facts and
``entry.json`` (key, variant, compiler version, each file's size and sha256),
written last.

Key: the first 32 hex digits of the sha256 of (cache format, variant fields --
dtype, head_dim, head_dim_v, causal, window, softcap -- every compile option,
defaults filled in, and the compiler version). The C API has no version query
(include/fa3-c/*.h), so the compiler version is made of what decides the
output: the package version (fa3.__version__), the sha256 of the bytes of the
loaded libFA3CAPI.so, the MLIR/LLVM shared libraries it loaded (path, size,
mtime) and the ptxas that assembles the cubins (path, size, mtime). A rebuilt
compiler, another LLVM or another ptxas gives new keys; stale entries stay on
disk until the directory is removed.

Concurrency: an entry appears whole, by os.rename of a complete temporary
directory made inside the cache directory (same file system: atomic). A
process that misses takes fcntl.flock on ``<entry>.lock`` and looks again
before it compiles, so processes that miss together compile once: the others
wait on the lock and then find the entry. An entry that does not validate
(a file missing, of another size or hash, facts that do not parse or do not
match the variant, a cubin missing) is moved aside and rebuilt under the lock.
Temporary and discarded directories of crashed processes are removed after
an hour, when something compiles.

Lookups: a dict in memory first (keyed by the arguments; no file-system
access, no environment read), then the entry directory (validated once per
process and variant), then the compile.
"""
from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import facts as _facts

CACHE_FORMAT = 1
ENTRY_FILE = "entry.json"
STALE_SECONDS = 3600

_Options = Tuple[Tuple[str, object], ...]


def _option_defaults() -> Dict[str, object]:
    """compile_kernel's keyword options that change the kernel, with their
    defaults (out_dir, name, scale, toolkit and ptxas_timeout do not: the
    scale is a launch argument, the toolkit's ptxas is in the compiler
    version)."""
    from .compile import compile_kernel
    skip = {"out_dir", "head_dim", "head_dim_v", "dtype", "causal", "window", "softcap",
            "scale", "name",
            "toolkit", "ptxas_timeout"}
    return {n: p.default for n, p in inspect.signature(compile_kernel).parameters.items()
            if n not in skip}


_OPTION_DEFAULTS: Optional[Dict[str, object]] = None


@dataclass(frozen=True)
class Variant:
    """What a cached kernel computes and how it was compiled; the window is
    normalized (fa3.facts.normalize_window: -1 unbounded, causal is right 0)."""
    dtype: str
    head_dim: int
    head_dim_v: int
    window_left: int
    window_right: int
    softcap: float
    options: _Options    # every compile option, sorted by name

    @property
    def causal(self) -> bool:
        return self.window_right == 0

    def fields(self) -> dict:
        return {"dtype": self.dtype, "head_dim": self.head_dim, "head_dim_v": self.head_dim_v,
                "causal": self.causal, "window": [self.window_left, self.window_right],
                "softcap": self.softcap, "options": dict(self.options)}


def make_variant(dtype: str, head_dim: int, head_dim_v: Optional[int] = None,
                 causal: bool = False, window=(-1, -1), softcap: float = 0.0,
                 **options) -> Variant:
    """The normalized variant; `options` are compile_kernel's (block_n,
    stages, persistent, emit_cubin, ...). TypeError for an unknown option."""
    global _OPTION_DEFAULTS
    if _OPTION_DEFAULTS is None:
        _OPTION_DEFAULTS = _option_defaults()
    unknown = sorted(set(options) - set(_OPTION_DEFAULTS))
    if unknown:
        raise TypeError(f"fa3.cache: unknown compile option(s) {', '.join(unknown)} "
                        f"(known: {', '.join(sorted(_OPTION_DEFAULTS))})")
    if window is None:
        window = (-1, -1)
    if len(window) != 2:
        raise ValueError(f"fa3.cache: window must be (left, right), got {window!r}")
    left, right = _facts.normalize_window(bool(causal), *window)
    opts = dict(_OPTION_DEFAULTS)
    opts.update(options)
    return Variant(str(dtype), int(head_dim), int(head_dim if head_dim_v is None else head_dim_v),
                   left, right, float(softcap or 0.0) + 0.0, tuple(sorted(opts.items())))


def variant_key(variant: Variant, version: str) -> str:
    """The cache key of `variant` compiled by compiler `version`."""
    payload = json.dumps({"format": CACHE_FORMAT, "variant": variant.fields(),
                          "compiler": version}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def cache_dir() -> Path:
    """$FA3_CACHE_DIR, else $XDG_CACHE_HOME/fa3, else ~/.cache/fa3."""
    d = os.environ.get("FA3_CACHE_DIR")
    if d:
        return Path(d).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fa3"


# --- the compiler version ----------------------------------------------------

_version: Optional[str] = None
_version_lock = threading.Lock()


def _sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_id(path) -> str:
    st = os.stat(path)
    return f"size {st.st_size} mtime_ns {st.st_mtime_ns}"


def _loaded_libraries(prefixes=("libMLIR", "libLLVM")) -> List[str]:
    """Paths of the shared libraries this process mapped whose names start
    with `prefixes` (Linux: /proc/self/maps); [] where that cannot be read."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if path.startswith("/") and os.path.basename(path).startswith(prefixes):
                    found.add(path)
    except OSError:
        return []
    return sorted(found)


def compiler_version() -> str:
    """The identity of the compiler that JIT compiles would use (module
    docstring); computed once per process. Loads libFA3CAPI.so: raises
    fa3._capi.LibraryNotFoundError (an OSError) without it."""
    global _version
    with _version_lock:
        if _version is None:
            from . import __version__, _capi
            from .compile import find_ptxas
            lib = _capi.lib()
            parts = [f"fa3 {__version__}", f"libFA3CAPI.so sha256 {_sha256_file(lib._name)}"]
            for so in _loaded_libraries():
                parts.append(f"{os.path.basename(so)} {so} {_file_id(so)}")
            ptxas = find_ptxas()
            parts.append(f"ptxas {ptxas} {_file_id(ptxas)}" if ptxas else "ptxas none")
            _version = "; ".join(parts)
        return _version


# --- entries -------------------------------------------------------------------

def entry_name(variant: Variant, key: str) -> str:
    dv = "" if variant.head_dim_v == variant.head_dim else f"v{variant.head_dim_v}"
    options = dict(variant.options)
    kind = ("-bwd-det" if options.get("deterministic") else "-bwd") if options.get("backward") \
        else "-dec" if options.get("decode") else "-paged" if options.get("paged") else ""
    return f"{variant.dtype}-d{variant.head_dim}{dv}{kind}-{key}"


def _compile(out_dir: Path, variant: Variant):
    """Compiles `variant` into out_dir (fa3.compile.compile_kernel); tests
    replace this to count compiles."""
    from .compile import compile_kernel
    return compile_kernel(out_dir, head_dim=variant.head_dim,
                          head_dim_v=variant.head_dim_v, dtype=variant.dtype,
                          causal=variant.causal,
                          window=(variant.window_left, variant.window_right),
                          softcap=variant.softcap, **dict(variant.options))


def _matches(kf: _facts.KernelFacts, v: Variant) -> bool:
    options = dict(v.options)
    return _facts.matches(kf, v.dtype, v.head_dim, v.head_dim_v, v.causal,
                          (v.window_left, v.window_right), v.softcap,
                          bool(options.get("varlen", False)),
                          bool(options.get("backward", False)),
                          bool(options.get("decode", False)),
                          bool(options.get("deterministic", False)),
                          bool(options.get("paged", False)))


def _read_entry(d: Path, key: str, v: Variant) -> Optional[_facts.KernelFacts]:
    """The kernel of entry directory `d`, or None when it is missing or does
    not validate (module docstring)."""
    try:
        m = json.loads((d / ENTRY_FILE).read_bytes())
        if m.get("format") != CACHE_FORMAT or m.get("key") != key:
            return None
        files = m["files"]
        for name, (size, digest) in files.items():
            if os.path.basename(name) != name or name in (".", ".."):
                return None
            data = (d / name).read_bytes()
            if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                return None
        if m["facts"] not in files:
            return None
        kf = _facts.load_facts(d / m["facts"])
        if not _matches(kf, v):
            return None
        if dict(v.options).get("emit_cubin", True) and \
                os.path.basename(kf.cubin_path) not in files:
            return None
        return kf
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_entry(d: Path, key: str, v: Variant, version: str) -> None:
    """entry.json for the files compiled into `d` (written last)."""
    files, facts_name = {}, None
    for p in sorted(d.iterdir()):
        data = p.read_bytes()
        files[p.name] = [len(data), hashlib.sha256(data).hexdigest()]
        if p.suffix == ".facts":
            try:
                if _matches(_facts.load_facts(p), v):
                    facts_name = facts_name or p.name
            except (OSError, ValueError):
                pass
    if facts_name is None:
        raise LookupError(f"fa3 JIT: the compiler wrote no kernel that computes "
                          f"{v.fields()} (files: {sorted(files)})")
    text = json.dumps({"format": CACHE_FORMAT, "key": key, "variant": v.fields(),
                       "compiler": version, "facts": facts_name, "files": files,
                       "created": time.time(), "pid": os.getpid()}, indent=1, sort_keys=True)
    tmp = d / (ENTRY_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, d / ENTRY_FILE)


def _discard(path: Path) -> None:
    """Moves an invalid entry aside (atomic) and removes it."""
    trash = path.parent / f".trash-{path.name}-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink()


def _sweep(root: Path) -> None:
    """Removes temporary and discarded directories older than STALE_SECONDS
    (left by processes that died while compiling)."""
    now = time.time()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for n in names:
        if n.startswith((".tmp-", ".trash-")):
            p = root / n
            try:
                if now - p.stat().st_mtime > STALE_SECONDS:
                    shutil.rmtree(p, ignore_errors=True)
            except OSError:
                pass


def _build(root: Path, v: Variant) -> _facts.KernelFacts:
    """The entry of `v` under `root`: found, or compiled under the key's lock."""
    version = compiler_version()
    key = variant_key(v, version)
    final = root / entry_name(v, key)
    kf = _read_entry(final, key, v)
    if kf is not None:
        return kf
    root.mkdir(parents=True, exist_ok=True)
    with open(root / (final.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            kf = _read_entry(final, key, v)   # another process may have built it
            if kf is not None:
                return kf
            if os.path.lexists(final):
                _discard(final)
            _sweep(root)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
            try:
                _compile(tmp, v)
                _write_entry(tmp, key, v, version)
                os.chmod(tmp, 0o755)
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            kf = _read_entry(final, key, v)
            if kf is None:
                raise LookupError(f"fa3 JIT: the new cache entry {final} does not validate")
            return kf
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# --- lookups ---------------------------------------------------------------------

_mem: Dict[Tuple[str, Variant], _facts.KernelFacts] = {}
_fast: Dict[tuple, _facts.KernelFacts] = {}    # get_kernel's arguments -> _mem's value
_failed: Dict[Tuple[str, Variant], str] = {}
_key_locks: Dict[Tuple[str, Variant], threading.Lock] = {}
_locks_lock = threading.Lock()


def get_kernel(dtype: str, head_dim: int, head_dim_v: Optional[int] = None,
               causal: bool = False, window=(-1, -1), softcap: float = 0.0, *,
               directory=None, **options) -> _facts.KernelFacts:
    """The kernel of a variant from the cache, compiled into it on a miss.
    `options` are compile_kernel's (default: the compiler's choices);
    `directory` overrides cache_dir().
    Raises fa3._capi.LibraryNotFoundError (an OSError) without libFA3CAPI.so,
    fa3.ir.Fa3Error with the compiler's diagnostics for a variant it does not
    support (remembered for the process: not compiled again). A call with
    the same arguments as one before is a dict lookup ($FA3_CACHE_DIR is read
    when the arguments are new)."""
    try:   # a call seen before: one dict lookup
        fast = (dtype, head_dim, head_dim_v, causal, tuple(window or ()), softcap, directory,
                tuple(sorted(options.items())))
        kf = _fast.get(fast)
    except TypeError:   # unhashable arguments: the long way
        fast, kf = None, None
    if kf is not None:
        return kf
    v = make_variant(dtype, head_dim, head_dim_v, causal, window, softcap, **options)
    root = Path(directory) if directory is not None else cache_dir()
    mk = (str(root), v)
    kf = _mem.get(mk)
    if kf is not None:
        if fast is not None:
            _fast[fast] = kf
        return kf
    with _locks_lock:
        klock = _key_locks.setdefault(mk, threading.Lock())
    with klock:   # threads of one process compile once too
        kf = _mem.get(mk)
        if kf is not None:
            return kf
        if mk in _failed:
            from .ir import Fa3Error
            raise Fa3Error(_failed[mk])
        try:
            kf = _build(root, v)
        except Exception as e:
            from .ir import Fa3Error
            if isinstance(e, Fa3Error):
                _failed[mk] = str(e)
            raise
        _mem[mk] = kf
        if fast is not None:
            _fast[fast] = kf
        return kf


def clear_memory() -> None:
    """Forgets this process's lookups (the disk cache stays); needed after
    changing $FA3_CACHE_DIR in a process that looked kernels up already."""
    _fast.clear()
    _mem.clear()
    _failed.clear()


def entry_dir(kf: _facts.KernelFacts) -> Path:
    """The cache entry directory a kernel from get_kernel lies in."""
    return Path(kf.facts_path).parent
