"""Launch facts of compiled kernels (<kernel>.facts next to <kernel>.cubin).

Pure Python (no GPU, no torch, no libfa3rt), so kernel directories can be listed
and matched anywhere. The C runtime (runtime/fa3rt.c) parses the same format
again when it loads a kernel. Both follow the grammar of docs/runtime.md and
accept exactly the same files with the same values
(python/tests/test_facts_fuzz.py checks that).

Format: first line ``fa3-kernel-facts <version>``, then one ``key value`` per
line; ``#`` starts a comment; unknown keys are ignored. An optional ``cubin``
key names the cubin file in the facts file's directory; by default it is the
facts file's name with ``.cubin``.
"""
from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

FACTS_VERSION = 4  # fa3rt.h, FA3RT_FACTS_VERSION: 2 deterministic, 4 decoding kernels


def _abi_text() -> str:
    """The one definition of the kernel ABI (fa3rt_abi.def: installed beside
    this module, or runtime/include/ in a checkout)."""
    here = Path(__file__).resolve().parent
    for path in (here / "fa3rt_abi.def",
                 here.parents[1] / "runtime" / "include" / "fa3rt_abi.def"):
        if path.is_file():
            return path.read_text()
    raise ImportError("fa3: the kernel ABI definition fa3rt_abi.def is missing "
                      f"(looked beside {here} and in the checkout's runtime/include)")


_ABI = _abi_text()
# the kernel's parameter names in launch order, blank-separated: the forward
# kernel's, and the backward kernel's (facts `backward 1`)
KERNEL_PARAMS = " ".join(re.findall(r"^FA3RT_KERNEL_PARAM\((\w+),", _ABI, re.M))
BWD_KERNEL_PARAMS = " ".join(re.findall(r"^FA3RT_BWD_KERNEL_PARAM\((\w+),", _ABI, re.M))
# the backward's helper kernels in its cubin, <kernel>_pre and <kernel>_post
# (launched by fa3rt_bwd around it), and their block size
BWD_PRE_PARAMS = " ".join(re.findall(r"^FA3RT_BWD_PRE_PARAM\((\w+),", _ABI, re.M))
BWD_POST_PARAMS = " ".join(re.findall(r"^FA3RT_BWD_POST_PARAM\((\w+),", _ABI, re.M))
BWD_AUX_THREADS = int(re.search(r"^#define FA3RT_BWD_AUX_THREADS (\d+)$", _ABI, re.M).group(1))
# dQaccum's tiles of that many query rows (its size: bwd_dq_accum_words)
BWD_DQ_ROWS = int(re.search(r"^#define FA3RT_BWD_DQ_ROWS (\d+)$", _ABI, re.M).group(1))


def bwd_dq_accum_words(B: int, Hq: int, Sq: int, D: int, deterministic: bool = False) -> int:
    """Floats of the backward's dq_accum workspace: B * Hq * ceil(Sq /
    BWD_DQ_ROWS) * BWD_DQ_ROWS * D (fa3rt_abi.def: the kernel's tile order),
    and for a deterministic kernel (facts `deterministic 1`) one u32 turn
    counter per tile after them, B * Hq * ceil(Sq / BWD_DQ_ROWS) rounded up
    to a multiple of 4 (fa3rt_bwd_launch.dq_accum_words)."""
    tiles = B * Hq * -(-Sq // BWD_DQ_ROWS)
    return tiles * BWD_DQ_ROWS * D + (-(-tiles // 4) * 4 if deterministic else 0)
# the split-KV kernels' merge in their cubin, <kernel>_combine (launched by
# fa3rt_fwd after a launch of more than one split), and its block size
FWD_COMBINE_PARAMS = " ".join(re.findall(r"^FA3RT_FWD_COMBINE_PARAM\((\w+),", _ABI, re.M))
FWD_COMBINE_THREADS = int(re.search(r"^#define FA3RT_FWD_COMBINE_THREADS (\d+)$", _ABI,
                                    re.M).group(1))
# their cache append, <kernel>_append (launched by fa3rt_fwd before a
# launch that appends new keys and values), and its block size
FWD_APPEND_PARAMS = " ".join(re.findall(r"^FA3RT_FWD_APPEND_PARAM\((\w+),", _ABI, re.M))
FWD_APPEND_THREADS = int(re.search(r"^#define FA3RT_FWD_APPEND_THREADS (\d+)$", _ABI,
                                   re.M).group(1))
# the facts' dtypes (fa3rt_dtype): e4m3 is the FP8 kernels' q, k and v
# (torch.float8_e4m3fn), whose o is bf16
DTYPES = ("bf16", "f16", "e4m3")
MAX_BYTES = 65536           # FA3RT_FACTS_MAX_BYTES
MAX_LINE = 1023             # FA3RT_FACTS_MAX_LINE (bytes without the newline)
SCALE_MAX = 1e30            # FA3RT_SCALE_MAX
_HEADER = "fa3-kernel-facts"
_INT = re.compile(r"-?[0-9]+", re.ASCII)
_REAL = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", re.ASCII)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}", re.ASCII)
_FILE = re.compile(r"[!-.0-~]{1,255}", re.ASCII)    # printable, no blank, no '/'
_LINE = re.compile(r"[\t -~]*", re.ASCII)           # printable ASCII and tab

def _facts_keys(text: str) -> dict:
    """key: (type, required, range text, check) from the FA3RT_FACTS_KEY lines
    of the ABI definition, the table fa3rt.c's kKeys is built from: INT is
    lo..hi and a multiple of step; REAL is finite, 0 <= v <= max, and v > 0
    when lo is 1."""
    symbols = {"DBL_MAX": sys.float_info.max, "FA3RT_SCALE_MAX": SCALE_MAX}
    keys = {}
    for m in re.finditer(r'^FA3RT_FACTS_KEY\((\w+), \w+, (\w+), ([01]), (-?\d+), (-?\d+), '
                         r'(\d+), (\w+), "([^"]*)"\)', text, re.M):
        key, kind, req, lo, hi, step, top, rng = m.groups()
        lo, hi, step = int(lo), int(hi), int(step)
        top = symbols[top] if top in symbols else float(top)
        if kind == "INT":
            check = (lambda lo, hi, step: lambda v: lo <= v <= hi and v % step == 0)(lo, hi, step)
        elif kind == "REAL":
            check = (lambda pos, top: lambda v: math.isfinite(v) and
                     (v > 0 if pos else v >= 0) and v <= top)(lo == 1, top)
        else:
            check = None
        keys[key] = (kind.lower(), req == "1", rng, check)
    if not keys:
        raise ImportError("fa3: no FA3RT_FACTS_KEY lines in the ABI definition")
    return keys


_KEYS = _facts_keys(_ABI)
_DEFAULTS = {"cluster_m": 1, "cubin": "", "varlen": 0, "backward": 0, "split_kv": 0,
             "pack_gqa": 0, "deterministic": 0, "min_seqlen_q": 0, "paged_kv": 0,
             "paged_copy": 0, "copy_rows": 0}


class FactsError(ValueError):
    """A facts file is malformed, incomplete or of an unsupported version."""


@dataclass(frozen=True)
class KernelFacts:
    kernel: str
    dtype: str              # "bf16" | "f16" | "e4m3" (q, k, v fp8 e4m3, o bf16)
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
    cubin: str = ""         # the optional `cubin` key ("" = absent)
    varlen: bool = False    # optional key: a packed variable-length batch's kernel
    backward: bool = False  # optional key: the backward kernel (dQ, dK, dV)
    split_kv: bool = False  # optional key: kv blocks split over CTAs, merged by _combine
    pack_gqa: bool = False  # optional key: the q heads of a kv head share a tile
    deterministic: bool = False  # optional key: a backward whose dq is bitwise reproducible
    min_seqlen_q: int = 0   # optional key: chosen for calls with Sq >= this (0: any)
    paged_kv: bool = False  # optional key: a varlen kernel that takes a page table
    paged_copy: bool = False  # optional key: its producer warp copies small pages (decoding)
    copy_rows: int = 0      # optional key: with paged_copy, the most rows of a page it copies (0: 16)

    @property
    def decode(self) -> bool:
        """A decoding kernel (Fa3AttentionSpec.decode: split_kv and pack_gqa),
        what flash_attn_with_kvcache launches."""
        return self.split_kv or self.pack_gqa

    def describe(self) -> str:
        w = f"window=({self.window_left},{self.window_right})"
        return (f"{self.kernel}: dtype={self.dtype} head_dim={self.head_dim}"
                + (f" head_dim_v={self.head_dim_v}" if self.head_dim_v != self.head_dim else "")
                + f" causal={int(self.causal)} {w} softcap={self.softcap:g}"
                + f" tile={self.block_m}x{self.block_n}"
                + (" varlen" if self.varlen else "")
                + (" backward" if self.backward else "")
                + (" deterministic" if self.deterministic else "")
                + (" split_kv" if self.split_kv else "")
                + (" pack_gqa" if self.pack_gqa else "")
                + (f" min_seqlen_q={self.min_seqlen_q}" if self.min_seqlen_q else "")
                + (" paged_kv" if self.paged_kv else "")
                + (" paged_copy" if self.paged_copy else "")
                + (f" copy_rows={self.copy_rows}" if self.copy_rows else ""))


def _value(key: str, val: str, lineno: int):
    """The value of a known key, checked (syntax and range)."""
    kind, _, rng, ok = _KEYS[key]
    at = f"line {lineno}: {key}"
    if kind in ("int", "real"):
        pattern, what = (_INT, "an integer") if kind == "int" else (_REAL, "a decimal number")
        if not pattern.fullmatch(val):
            raise FactsError(f"{at}: '{val}' is not {what} ({rng})")
        v = int(val) if kind == "int" else float(val) + 0.0  # -0.0 + 0.0 is 0.0
        if not ok(v):
            raise FactsError(f"{at}: {val} is out of range ({rng})")
        return v
    if ((kind == "name" and not _IDENT.fullmatch(val))
            or (kind == "file" and (not _FILE.fullmatch(val) or val in (".", "..")))):
        raise FactsError(f"{at}: '{val}' is not {rng}")
    if kind == "dtype" and val not in DTYPES:
        raise FactsError(f"line {lineno}: dtype '{val}' is not supported ({rng})")
    if kind == "grid" and val not in ("tiles", "persistent"):
        raise FactsError(f"line {lineno}: grid '{val}' is not one this package launches "
                         f"(tiles or persistent)")
    if kind == "params":
        # which ABI's list: checked against `backward` once the text is read
        names = val.split()
        if names == KERNEL_PARAMS.split():
            return (lineno, "forward")
        if names == BWD_KERNEL_PARAMS.split():
            return (lineno, "backward")
        raise FactsError(f"line {lineno}: kernel parameter list '{val}' is not the ABI "
                         f"this package launches ('{KERNEL_PARAMS}'; with backward 1: "
                         f"'{BWD_KERNEL_PARAMS}')")
    return val


def _parse(data: bytes) -> Tuple[int, dict, dict]:
    """(version, known keys' values, unknown keys) of facts bytes, by the
    grammar of docs/runtime.md."""
    if len(data) > MAX_BYTES:
        raise FactsError(f"facts text: {len(data)} bytes is too long (at most {MAX_BYTES})")
    vals: dict = {}
    extra: Dict[str, str] = {}
    version = None
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the text's final newline ends the last line
    for lineno, raw in enumerate(lines, 1):
        if len(raw) > MAX_LINE:
            raise FactsError(f"line {lineno}: {len(raw)} bytes is too long (at most {MAX_LINE})")
        if raw.endswith(b"\r"):
            raw = raw[:-1]  # CRLF
        line = raw.decode("latin-1")
        bad = _LINE.match(line).end()
        if bad < len(line):
            raise FactsError(f"line {lineno}: byte 0x{raw[bad]:02x} at column {bad + 1} is not "
                             f"printable ASCII or a tab")
        line = line.split("#", 1)[0].strip(" \t")
        if not line:
            continue
        key, val = re.match(r"([^ \t]*)[ \t]*(.*)", line).groups()
        if version is None:
            if key != _HEADER:
                raise FactsError("not a facts file: the first line must be "
                                 f"'fa3-kernel-facts <version>', found '{key}'")
            if not _INT.fullmatch(val):
                raise FactsError(f"line {lineno}: version: '{val}' is not an integer")
            version = int(val)
            if version > FACTS_VERSION:
                raise FactsError(f"line {lineno}: version {val} is newer than this package "
                                 f"supports ({FACTS_VERSION})")
            if version < 1:
                raise FactsError(f"line {lineno}: version: {val} is out of range "
                                 f"(1 to {FACTS_VERSION})")
            continue
        if key == _HEADER or key in vals:
            raise FactsError(f"line {lineno}: duplicate key '{key}'")
        if key not in _KEYS:
            extra[key] = val  # unknown key: forward compatible
            continue
        if not val:
            raise FactsError(f"line {lineno}: key '{key}' has no value")
        vals[key] = _value(key, val, lineno)
    if version is None:
        raise FactsError("not a facts file: no 'fa3-kernel-facts <version>' line")
    missing = [k for k, (_, required, _, _) in _KEYS.items() if required and k not in vals]
    if missing:
        raise FactsError(f"facts of kernel '{vals.get('kernel', '?')}' lack required "
                         f"key(s): {', '.join(missing)}")
    params_line, params_kind = vals["params"]
    backward = vals.get("backward", 0)
    if params_kind != ("backward" if backward else "forward"):
        raise FactsError(f"line {params_line}: params is the {params_kind} kernel's parameter "
                         f"list but the facts say backward {backward}, whose list is "
                         f"'{BWD_KERNEL_PARAMS if backward else KERNEL_PARAMS}'")
    if vals["causal"] and vals["window_right"] != 0:
        raise FactsError(f"facts of kernel '{vals['kernel']}': causal 1 needs "
                         f"window_right 0, got {vals['window_right']}")
    if vals.get("varlen") and vals.get("cluster_m", 1) != 1:
        raise FactsError(f"facts of kernel '{vals['kernel']}': varlen 1 needs cluster_m 1 "
                         f"(no clusters)")
    if backward and (vals.get("varlen") or vals.get("cluster_m", 1) != 1
                     or vals["grid"] != "tiles"):
        need = ("varlen 0" if vals.get("varlen") else "cluster_m 1"
                if vals.get("cluster_m", 1) != 1 else "grid tiles")
        raise FactsError(f"facts of kernel '{vals['kernel']}': backward 1 needs {need} (the "
                         f"backward kernel takes fixed-length batches, one CTA per kv block, "
                         f"head and batch)")
    # the forward kernels sum nothing across CTAs: only the backward's dq
    # has an order to fix (fa3rt.c refuses the same)
    if vals.get("deterministic") and not backward:
        raise FactsError(f"facts of kernel '{vals['kernel']}': deterministic 1 needs backward 1 "
                         f"(the deterministic variant is the backward kernel's: its dq summed "
                         f"in a fixed order)")
    if (vals.get("split_kv") or vals.get("pack_gqa")) and (
            backward or vals.get("varlen") or vals.get("cluster_m", 1) != 1
            or vals["grid"] != "tiles"):
        need = ("backward 0" if backward else "varlen 0" if vals.get("varlen") else
                "cluster_m 1" if vals.get("cluster_m", 1) != 1 else "grid tiles")
        raise FactsError(f"facts of kernel '{vals['kernel']}': "
                         f"{'split_kv' if vals.get('split_kv') else 'pack_gqa'} 1 needs {need} "
                         f"(a decoding kernel runs one CTA per tile and split over "
                         f"fixed-length batches)")
    # (with varlen 1 split_kv and pack_gqa are refused above)
    if vals.get("paged_kv") and (not vals.get("varlen") or vals["grid"] != "tiles"):
        need = "varlen 1" if not vals.get("varlen") else "grid tiles"
        raise FactsError(f"facts of kernel '{vals['kernel']}': paged_kv 1 needs {need} (a "
                         f"packed batch's kernel that reads its page table one CTA per tile)")
    if vals.get("paged_copy") and not vals.get("split_kv") and not vals.get("paged_kv"):
        raise FactsError(f"facts of kernel '{vals['kernel']}': paged_copy 1 needs split_kv 1 or "
                         f"paged_kv 1 (the paged kernels' producer warps copy small pages)")
    if vals.get("copy_rows") and not vals.get("paged_copy"):
        raise FactsError(f"facts of kernel '{vals['kernel']}': copy_rows {vals['copy_rows']} "
                         f"needs paged_copy 1 (the most rows of a page its producer warps copy)")
    if vals["dtype"] == "e4m3":
        # FP8: the compiler builds the fixed-length forward and the
        # decoding kernel (split_kv, pack_gqa; head dim 64 or 128) (fa3rt.c
        # refuses the same)
        kind = next((k for k in ("backward", "varlen") if vals.get(k)), None)
        if kind:
            what = {"backward": "backward", "varlen": "varlen kernel"}[kind]
            raise FactsError(f"facts of kernel '{vals['kernel']}': dtype e4m3 needs {kind} 0 "
                             f"(the compiler builds no FP8 {what} yet)")
        if vals.get("split_kv") and vals["head_dim"] > 128:
            raise FactsError(f"facts of kernel '{vals['kernel']}': dtype e4m3 with split_kv 1 "
                             f"needs head_dim 64 or 128, got {vals['head_dim']} (the compiler "
                             f"builds FP8 decoding kernels of those head dims only)")
        if vals["head_dim"] not in (64, 128, 256) or vals["head_dim_v"] not in (64, 128, 256):
            raise FactsError(f"facts of kernel '{vals['kernel']}': dtype e4m3 needs head_dim "
                             f"and head_dim_v 64, 128 or 256, got {vals['head_dim']} and "
                             f"{vals['head_dim_v']} (the compiler builds FP8 kernels of those "
                             f"head dims only)")
        if vals["head_dim"] != vals["head_dim_v"]:
            raise FactsError(f"facts of kernel '{vals['kernel']}': dtype e4m3 needs head_dim_v "
                             f"equal to head_dim, got {vals['head_dim']} and "
                             f"{vals['head_dim_v']} (the compiler builds FP8 kernels of equal "
                             f"head dims only)")
        # the descales are per 128-row block of q rows and per kv block
        # (k): tiles of 128 rows by 128, 160, 192 or 224 keys, or 192 rows
        # (head dim 64) by 128 or 160, more than 128 keys at head dim 64 or
        # 128 only, no clusters (fa3rt.c refuses the same; k's descales
        # per 128 keys need 128: the runtime's plan)
        bm, bn = vals["block_m"], vals["block_n"]
        keys_ok = (bn % 32 == 0 and 128 <= bn <= (160 if bm == 192 else 224)
                   and (bn == 128 or vals["head_dim"] <= 128))
        tile_ok = keys_ok and (bm == 128 or (bm == 192 and vals["head_dim"] == 64)
                               or (bm == 64 and vals.get("pack_gqa")))
        if not tile_ok:
            need = (f"block_m 128 with block_n 128, 160, 192 or 224 (above 128 at head dim 64 "
                    f"or 128), or block_m 192 (head dim 64) with block_n 128 or 160, got {bm} "
                    f"and {bn}")
        elif vals.get("cluster_m", 1) != 1:
            need = f"cluster_m 1, got {vals['cluster_m']}"
        else:
            need = None
        if need:
            raise FactsError(f"facts of kernel '{vals['kernel']}': dtype e4m3 needs {need} (the "
                             f"kernel reads q's descale per 128-row block and k's per 128 "
                             f"keys, and the compiler builds e4m3 kernels only with those "
                             f"tiles and no cluster; another tile would read descales out of "
                             f"bounds)")
    return version, {**_DEFAULTS, **vals}, extra


def parse_facts(text: Union[str, bytes], path: Optional[str] = None) -> KernelFacts:
    """Parses facts text (bytes as in the file, or str: ASCII only) by the
    grammar of docs/runtime.md; raises FactsError."""
    where = f"{path}: " if path else ""
    if isinstance(text, str):
        bad = next((i for i, ch in enumerate(text) if ord(ch) > 0x7f), None)
        if bad is not None:
            line = text.count("\n", 0, bad) + 1
            col = bad - (text.rfind("\n", 0, bad) + 1) + 1
            raise FactsError(f"{where}line {line}: character U+{ord(text[bad]):04X} at column "
                             f"{col} is not printable ASCII or a tab")
        text = text.encode("ascii")
    try:
        version, v, extra = _parse(bytes(text))
    except FactsError as e:
        raise FactsError(f"{where}{e}") from None
    cubin = None
    if path is not None:
        p = Path(path)
        cubin = str(p.parent / v["cubin"]) if v["cubin"] else str(p.with_suffix(".cubin"))
    return KernelFacts(kernel=v["kernel"], dtype=v["dtype"], head_dim=v["head_dim"],
                       head_dim_v=v["head_dim_v"], block_m=v["block_m"],
                       block_n=v["block_n"], threads=v["threads"],
                       dynamic_smem=v["dynamic_smem"], causal=bool(v["causal"]),
                       window_left=v["window_left"], window_right=v["window_right"],
                       softcap=v["softcap"], scale=v["scale"], version=version,
                       facts_path=path, cubin_path=cubin, extra=extra,
                       persistent=v["grid"] == "persistent", cluster_m=v["cluster_m"],
                       cubin=v["cubin"], varlen=bool(v["varlen"]),
                       backward=bool(v["backward"]), split_kv=bool(v["split_kv"]),
                       pack_gqa=bool(v["pack_gqa"]), deterministic=bool(v["deterministic"]),
                       min_seqlen_q=v["min_seqlen_q"], paged_kv=bool(v["paged_kv"]),
                       paged_copy=bool(v["paged_copy"]), copy_rows=v["copy_rows"])


def load_facts(path) -> KernelFacts:
    path = str(path)
    with open(path, "rb") as f:  # bytes: no newline translation, no decoding
        data = f.read(MAX_BYTES + 1)  # bounded, like the C runtime (a FIFO, /dev/zero)
    return parse_facts(data, path)


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
        except (FactsError, OSError) as e:
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
            window: Tuple[int, int], softcap: float, varlen: bool = False,
            backward: bool = False, decode: bool = False,
            deterministic: bool = False, paged: bool = False) -> bool:
    """Whether kf computes the variant. Each kind of kernel (varlen,
    backward, deterministic backward, decode: split_kv or pack_gqa, a paged
    varlen kernel: paged_kv) serves its own requests only."""
    want = normalize_window(causal, *window)
    have = normalize_window(kf.causal, kf.window_left, kf.window_right)
    sc = float(softcap or 0.0)
    return (kf.dtype == dtype and kf.head_dim == head_dim and kf.head_dim_v == head_dim_v
            and want == have and kf.varlen == bool(varlen)
            and kf.backward == bool(backward) and kf.decode == bool(decode)
            and kf.deterministic == bool(deterministic) and kf.paged_kv == bool(paged)
            and abs(kf.softcap - sc) <= 1e-6 * max(1.0, abs(sc)))


def select_kernel(kernels: List[KernelFacts], dtype: str, head_dim: int, head_dim_v: int,
                  causal: bool, window: Tuple[int, int], softcap: float,
                  kernel_dir: str = "?", skipped: Optional[List[str]] = None,
                  varlen: bool = False, backward: bool = False,
                  decode: bool = False, deterministic: bool = False,
                  seqlen_q: int = 0, k_block_descales: bool = False,
                  paged: bool = False) -> KernelFacts:
    """The kernel for the requested variant and a call with `seqlen_q` query
    rows (by_length's pick among select_kernels', `k_block_descales` as
    there), or a LookupError that lists what the directory holds."""
    return by_length(select_kernels(kernels, dtype, head_dim, head_dim_v, causal, window,
                                    softcap, kernel_dir, skipped, varlen, backward, decode,
                                    deterministic, paged), seqlen_q, k_block_descales)


#: rows a q or k descale block covers (fa3rt_abi.def, FP8 kernels)
DESCALE_ROWS = 128


def by_length(candidates: List[KernelFacts], seqlen_q: int,
              k_block_descales: bool = False) -> KernelFacts:
    """Of kernels that compute one variant (select_kernels' order), the one
    for a call with `seqlen_q` query rows: the first with the largest
    min_seqlen_q <= seqlen_q, or where every one asks for more (a directory
    holding only long-sequence kernels), the first with the smallest; each
    computes every length, min_seqlen_q only says which is faster.
    `k_block_descales`: an FP8 call's k descales are per 128 keys; kernels
    whose kv tiles straddle those blocks (block_n not a multiple of 128:
    S is scaled column by column) are passed over where another computes
    the variant (FP8 head dim 128's 192-key long kernel ran at 0.93-0.99x
    the 128-key one there, 1.01-1.07x with per-head descales:
    bench/NOTES.md, Log, "FP8 head dim 128 on the branches")."""
    if k_block_descales:
        whole = [k for k in candidates if k.block_n % DESCALE_ROWS == 0]
        candidates = whole or candidates
    fits = [k for k in candidates if k.min_seqlen_q <= seqlen_q]
    if fits:
        return max(fits, key=lambda k: k.min_seqlen_q)   # max keeps the first of equals
    return min(candidates, key=lambda k: k.min_seqlen_q)


def select_kernels(kernels: List[KernelFacts], dtype: str, head_dim: int, head_dim_v: int,
                   causal: bool, window: Tuple[int, int], softcap: float,
                   kernel_dir: str = "?", skipped: Optional[List[str]] = None,
                   varlen: bool = False, backward: bool = False,
                   decode: bool = False, deterministic: bool = False,
                   paged: bool = False) -> List[KernelFacts]:
    """Every kernel (by file name) that computes the requested variant, or a
    LookupError that lists what the directory holds. `backward`: the
    variant's backward kernel (facts backward 1), with `deterministic` its
    deterministic one (facts deterministic 1; a plain request takes a plain
    kernel); `decode`: its decoding kernel (facts split_kv 1 / pack_gqa 1);
    `paged` (with `varlen`): its paged varlen kernel (facts paged_kv 1).
    Several where the compiler configured the variant for different
    lengths (facts min_seqlen_q): by_length picks."""
    found = [kf for kf in kernels
             if matches(kf, dtype, head_dim, head_dim_v, causal, window, softcap, varlen,
                        backward, decode, deterministic, paged)]
    if found:
        return found
    l, r = normalize_window(causal, *window)
    want = (f"dtype={dtype} head_dim={head_dim}"
            + (f" head_dim_v={head_dim_v}" if head_dim_v != head_dim else "")
            + f" causal={int(causal)} window=({l},{r}) softcap={float(softcap or 0):g}"
            + (" varlen" if varlen else "") + (" backward" if backward else "")
            + (" deterministic" if deterministic else "") + (" decode" if decode else "")
            + (" paged_kv" if paged else ""))
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
