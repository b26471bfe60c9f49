"""Launch facts of compiled kernels (<kernel>.facts next to <kernel>.cubin).

Pure Python (no GPU, no torch, no libfa3rt), so kernel directories can be listed
and matched anywhere. The C runtime (runtime/fa3rt.c) parses the same format
again when it loads a kernel; both accept exactly the same files
(python/tests/test_runtime.py checks that).

Format: first line ``fa3-kernel-facts <version>``, then one ``key value`` per
line; ``#`` starts a comment; unknown keys are ignored. An optional ``cubin``
key names the cubin file (relative to the facts file); by default it is the
facts file's name with ``.cubin``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

FACTS_VERSION = 1
KERNEL_PARAMS = ("tmQ tmK tmV tmO O LSE tileCounter B Sq Skv Hq Hkv "
                 "oStrideB oStrideS oStrideH scaleLog2")
_REQUIRED = ("kernel", "dtype", "head_dim", "head_dim_v", "block_m", "block_n",
             "threads", "dynamic_smem", "causal", "window_left", "window_right",
             "softcap", "scale", "params", "grid")
_INT_RANGES = {"head_dim": (8, 256), "head_dim_v": (8, 256), "block_m": (1, 256),
               "block_n": (1, 256), "threads": (1, 1024), "dynamic_smem": (0, 1 << 20),
               "causal": (0, 1), "window_left": (-1, 2**31 - 1),
               "window_right": (-1, 2**31 - 1)}
# optional integer keys: (lo, hi, value when absent)
_OPTIONAL_INTS = {"cluster_m": (1, 2, 1)}


class FactsError(ValueError):
    """A facts file is malformed, incomplete or of an unsupported version."""


@dataclass(frozen=True)
class KernelFacts:
    kernel: str
    dtype: str              # "bf16" | "f16"
    head_dim: int
    head_dim_v: int
    block_m: int
    block_n: int
    threads: int
    dynamic_smem: int
    causal: bool
    window_left: int        # -1 = unbounded
    window_right: int       # -1 = unbounded; 0 for causal
    softcap: float          # 0 = off
    scale: float            # default softmax scale
    persistent: bool = False  # grid "persistent": CTAs loop over tiles
    cluster_m: int = 1      # CTAs per cluster (optional key; 2: K/V multicast)
    version: int = 1
    facts_path: Optional[str] = None
    cubin_path: Optional[str] = None
    extra: Dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def describe(self) -> str:
        w = f"window=({self.window_left},{self.window_right})"
        return (f"{self.kernel}: dtype={self.dtype} head_dim={self.head_dim}"
                + (f" head_dim_v={self.head_dim_v}" if self.head_dim_v != self.head_dim else "")
                + f" causal={int(self.causal)} {w} softcap={self.softcap:g}"
                + f" tile={self.block_m}x{self.block_n}")


def parse_facts(text: str, path: Optional[str] = None) -> KernelFacts:
    where = f"{path}: " if path else ""
    vals: Dict[str, str] = {}
    extra: Dict[str, str] = {}
    version = None
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.split("#", 1)[0].strip(" \t\r")
        if not line:
            continue
        key, _, val = line.replace("\t", " ").partition(" ")
        val = val.strip()
        if version is None:
            if key != "fa3-kernel-facts":
                raise FactsError(f"{where}not a facts file: the first line must be "
                                 f"'fa3-kernel-facts <version>', found '{key}'")
            try:
                version = int(val)
            except ValueError:
                raise FactsError(f"{where}line {lineno}: bad version '{val}'") from None
            if version < 1:
                raise FactsError(f"{where}line {lineno}: bad version '{val}'")
            if version > FACTS_VERSION:
                raise FactsError(f"{where}facts version {version} is newer than this "
                                 f"package supports ({FACTS_VERSION})")
            continue
        if key not in _REQUIRED and key not in _OPTIONAL_INTS:
            extra[key] = val
            continue
        if key in vals:
            raise FactsError(f"{where}line {lineno}: duplicate key '{key}'")
        if not val:
            raise FactsError(f"{where}line {lineno}: key '{key}' has no value")
        vals[key] = val
    if version is None:
        raise FactsError(f"{where}not a facts file: no 'fa3-kernel-facts <version>' line")
    missing = [k for k in _REQUIRED if k not in vals]
    if missing:
        raise FactsError(f"{where}facts of kernel '{vals.get('kernel', '?')}' lack required "
                         f"key(s): {', '.join(missing)}")
    ints = {}
    ranges = dict(_INT_RANGES)
    for k, (lo, hi, absent) in _OPTIONAL_INTS.items():
        vals.setdefault(k, str(absent))
        ranges[k] = (lo, hi)
    for k, (lo, hi) in ranges.items():
        try:
            v = None if "_" in vals[k] else int(vals[k], 10)
        except ValueError:
            v = None
        if v is None or not lo <= v <= hi or (k.startswith("head_dim") and v % 8):
            raise FactsError(f"{where}bad value '{vals[k]}' for key '{k}'")
        ints[k] = v
    floats = {}
    for k in ("softcap", "scale"):
        try:
            v = float("nan") if "_" in vals[k] else float(vals[k])
        except ValueError:
            v = float("nan")
        if not math.isfinite(v) or v < 0 or (k == "scale" and v == 0):
            raise FactsError(f"{where}bad value '{vals[k]}' for key '{k}'")
        floats[k] = v
    if vals["dtype"] not in ("bf16", "f16"):
        raise FactsError(f"{where}dtype '{vals['dtype']}' is not supported (bf16 or f16)")
    if " ".join(vals["params"].split()) != KERNEL_PARAMS:
        raise FactsError(f"{where}kernel parameter list '{vals['params']}' is not the ABI "
                         f"this package launches ('{KERNEL_PARAMS}')")
    if vals["grid"] not in ("tiles", "persistent"):
        raise FactsError(f"{where}grid '{vals['grid']}' is not one this package launches "
                         f"(tiles or persistent)")
    if " " in vals["kernel"]:
        raise FactsError(f"{where}bad value '{vals['kernel']}' for key 'kernel'")
    if ints["causal"] and ints["window_right"] != 0:
        raise FactsError(f"{where}facts of kernel '{vals['kernel']}': causal 1 needs "
                         f"window_right 0, got {ints['window_right']}")
    cubin = None
    if path is not None:
        p = Path(path)
        cubin = str(p.parent / extra["cubin"]) if "cubin" in extra else str(p.with_suffix(".cubin"))
    return KernelFacts(kernel=vals["kernel"], dtype=vals["dtype"], head_dim=ints["head_dim"],
                       head_dim_v=ints["head_dim_v"], block_m=ints["block_m"],
                       block_n=ints["block_n"], threads=ints["threads"],
                       dynamic_smem=ints["dynamic_smem"], causal=bool(ints["causal"]),
                       window_left=ints["window_left"], window_right=ints["window_right"],
                       softcap=floats["softcap"], scale=floats["scale"], version=version,
                       facts_path=path, cubin_path=cubin, extra=extra,
                       persistent=vals["grid"] == "persistent",
                       cluster_m=ints["cluster_m"])


def load_facts(path) -> KernelFacts:
    path = str(path)
    with open(path, encoding="utf-8") as f:
        return parse_facts(f.read(), path)


def scan_kernel_dir(kernel_dir) -> Tuple[List[KernelFacts], List[str]]:
    """All kernels of a directory (sorted by file name), and one message per
    .facts file that was skipped (malformed, or its cubin missing)."""
    d = Path(kernel_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"kernel directory '{kernel_dir}' does not exist")
    found, skipped = [], []
    for p in sorted(d.glob("*.facts")):
        try:
            kf = load_facts(p)
        except (FactsError, OSError, UnicodeDecodeError) as e:
            skipped.append(f"{p.name}: {e}")
            continue
        if not os.path.isfile(kf.cubin_path):
            skipped.append(f"{p.name}: cubin '{kf.cubin_path}' is missing")
            continue
        found.append(kf)
    return found, skipped


def normalize_window(causal: bool, window_left: int, window_right: int) -> Tuple[int, int]:
    """(left, right) of the visible band, -1 = unbounded; causal is right = 0
    (the op's semantics; FlashAttention's convention)."""
    left = -1 if window_left is None or window_left < 0 else int(window_left)
    right = -1 if window_right is None or window_right < 0 else int(window_right)
    if causal:
        right = 0
    return left, right


def matches(kf: KernelFacts, dtype: str, head_dim: int, head_dim_v: int, causal: bool,
            window: Tuple[int, int], softcap: float) -> bool:
    want = normalize_window(causal, *window)
    have = normalize_window(kf.causal, kf.window_left, kf.window_right)
    sc = float(softcap or 0.0)
    return (kf.dtype == dtype and kf.head_dim == head_dim and kf.head_dim_v == head_dim_v
            and want == have
            and abs(kf.softcap - sc) <= 1e-6 * max(1.0, abs(sc)))


def select_kernel(kernels: List[KernelFacts], dtype: str, head_dim: int, head_dim_v: int,
                  causal: bool, window: Tuple[int, int], softcap: float,
                  kernel_dir: str = "?", skipped: Optional[List[str]] = None) -> KernelFacts:
    """The first (by file name) kernel that computes the requested variant, or a
    LookupError that lists what the directory holds."""
    for kf in kernels:
        if matches(kf, dtype, head_dim, head_dim_v, causal, window, softcap):
            return kf
    l, r = normalize_window(causal, *window)
    want = (f"dtype={dtype} head_dim={head_dim}"
            + (f" head_dim_v={head_dim_v}" if head_dim_v != head_dim else "")
            + f" causal={int(causal)} window=({l},{r}) softcap={float(softcap or 0):g}")
    lines = [f"no compiled FA3 kernel in '{kernel_dir}' matches {want}."]
    if kernels:
        lines.append("Available:")
        lines += [f"  {k.describe()}" for k in kernels]
    else:
        lines.append("The directory holds no usable kernel (<name>.facts + <name>.cubin).")
    if skipped:
        lines.append("Skipped:")
        lines += [f"  {s}" for s in skipped]
    lines.append("Compile the variant with fa3-opt (see README) into that directory.")
    raise LookupError("\n".join(lines))
