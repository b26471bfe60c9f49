"""Facts-file fuzzer: the C parser (runtime/fa3rt.c, through ctypes) and the
Python parser (fa3.facts) must accept exactly the same files, with the same
value in every field (the grammar: docs/runtime.md, "Facts file").

Crafted files (each rule's edges) and seeded random mutations of a valid
file; FA3_FACTS_FUZZ_CASES=N runs N mutations instead of the default, and
FA3_FACTS_FUZZ_SEED another seed, for a longer run by hand.
"""
import math
import os
import random

import pytest

from fa3 import facts as F

SEED = int(os.environ.get("FA3_FACTS_FUZZ_SEED", "17"))
CASES = int(os.environ.get("FA3_FACTS_FUZZ_CASES", "600"))

BASE = b"""fa3-kernel-facts 1
# written by fa3-compile
kernel fa3_fwd_d128_bf16_causal_kernel
dtype bf16
head_dim 128
head_dim_v 128
block_m 128
block_n 128
threads 384
dynamic_smem 196696
grid persistent
o_store tma
lazy_rescale 1
stages 2
cluster_m 1
causal 1
window_left -1
window_right 0
softcap 0
scale 0.088388347648318447
params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages
cubin fa3_fwd_d128_bf16_causal_kernel.cubin
"""

# a decoding kernel's (facts `split_kv 1`, `pack_gqa 1`: grid tiles,
# cluster_m 1, varlen 0, backward 0)
DEC_BASE = b"""fa3-kernel-facts 1
kernel fa3_fwd_d128_bf16_decode_kernel
dtype bf16
head_dim 128
head_dim_v 128
block_m 64
block_n 128
threads 256
dynamic_smem 90000
grid tiles
cluster_m 1
causal 0
window_left -1
window_right -1
softcap 0
scale 0.088388347648318447
params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages
varlen 0
split_kv 1
pack_gqa 1
"""

# a backward kernel's (facts `backward 1`: its own params; grid tiles,
# cluster_m 1, varlen 0)
BWD_BASE = b"""fa3-kernel-facts 1
kernel fa3_bwd_d64_f16_kernel
dtype f16
head_dim 64
head_dim_v 64
block_m 64
block_n 128
threads 384
dynamic_smem 150000
grid tiles
cluster_m 1
causal 0
window_left -1
window_right -1
softcap 0
scale 0.125
params mapQ mapK mapV mapdO dQaccum dK dV LSE delta B Sq Skv Hq Hkv dkvStrideB dkvStrideS dkvStrideH scaleLog2
varlen 0
backward 1
"""

# a deterministic backward kernel's (facts `deterministic 1`: needs backward 1)
DET_BASE = BWD_BASE.replace(b"fa3_bwd_d64_f16_kernel", b"fa3_bwd_d64_f16_det_kernel") + \
    b"deterministic 1\n"

# an FP8 kernel's (facts `dtype e4m3`: forward only, fixed lengths, head
# dims 128 and 256 alike, block_m and block_n 128, cluster_m 1)
FP8_BASE = (BASE.replace(b"dtype bf16", b"dtype e4m3")
            .replace(b"fa3_fwd_d128_bf16_causal", b"fa3_fwd_d128_e4m3_causal")
            .replace(b"grid persistent", b"grid tiles"))
FP8_PARAMS = (" qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH qDescaleStrideM"
              " kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK"
              " pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages")

FIELDS = ("version", "kernel", "dtype", "head_dim", "head_dim_v", "block_m", "block_n",
          "threads", "dynamic_smem", "causal", "window_left", "window_right", "softcap",
          "scale", "persistent", "cluster_m", "cubin", "varlen", "backward", "split_kv",
          "pack_gqa", "deterministic", "min_seqlen_q", "paged_kv", "paged_copy", "copy_rows")

# values that probe the number, name and file rules
VALUES = [
    "0", "1", "2", "3", "-1", "-2", "-0", "7", "8", "16", "64", "100", "128", "192", "255",
    "256", "257", "264", "383", "1023", "1024", "1025", "1048576", "1048577", "2147483647",
    "2147483648", "-2147483648", "4294967296", "99999999999999999999", "00128", "+5", "0x10",
    "1_0", "12x", "1.0", "1e2", "128 128", "\t128", "-", "",
    "0.0", "-0.0", "0.5", ".5", "5.", "1e4", "1E4", "1e+4", "1e-4", "10000", "1e30", "1E+30",
    "1.000000000000001e30", "999999999999999999999999999999", "1e31", "1e300", "1e309",
    "1e-300", "1e-320", "1e-400", "4.9e-324", "2.4e-324", "1.7976931348623157e308", "nan",
    "NaN", "inf", "-inf", "Infinity", "0x1p-3", "1e", "1e+", "--1", "0.088388347648318447",
    "\u0661\u0662\u0668".encode().decode("latin-1"),  # Arabic-Indic 128 (Python int() takes it)
    "bf16", "f16", "f32", "BF16", "e4m3", "E4M3", "e5m2", "tiles", "persistent", "Tiles",
    "k", "_k", "9k", "k-1", "k.v", "K" * 255, "K" * 256, "k$", "x.cubin", "/etc/passwd", "..",
    ".", "...", "a/b", "a b", "-x", "~", "mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv",
]
BYTES = [b"\0", b"\t", b"\r", b"\n", b"\x0b", b"\x0c", b"\x1c", b"\x7f", b"\x80", b"\xa0",
         b"\xc3\xa9", b"\xff", b" ", b"#", b"-", b"+", b".", b"e", b"0", b"9", b"x", b"_", b"/"]


def c_parse(rt, data: bytes):
    """The C parser's fields, or None if it refused."""
    try:
        f = rt.parse_facts_c(data)
    except rt.Fa3RuntimeError as e:
        assert e.status == 2, str(e)  # FA3RT_ERR_FACTS, never anything else
        return None
    d = {k: getattr(f, k) for k in FIELDS}
    d["kernel"], d["cubin"] = f.kernel.decode("ascii"), f.cubin.decode("ascii")
    d["dtype"] = {1: "bf16", 2: "f16", 3: "e4m3"}[f.dtype]
    for k in ("causal", "persistent", "varlen", "backward", "split_kv", "pack_gqa",
              "deterministic", "paged_kv", "paged_copy"):
        d[k] = bool(d[k])
    return d


def py_parse(data):
    try:
        k = F.parse_facts(data)
    except F.FactsError:
        return None
    return {name: getattr(k, name) for name in FIELDS}


def same(a, b):
    """Equal fields, floats bit for bit (the sign of zero too)."""
    if (a is None) != (b is None):
        return False
    return a is None or all(
        a[k] == b[k] and (not isinstance(a[k], float) or
                          math.copysign(1, a[k]) == math.copysign(1, b[k])) for k in FIELDS)


def with_line(key: str, line, data=BASE) -> bytes:
    """BASE with the line of `key` replaced (None: dropped)."""
    out = []
    for ln in data.split(b"\n"):
        if ln.split(b" ", 1)[0] == key.encode():
            if line is not None:
                out.append(line if isinstance(line, bytes) else line.encode("latin-1"))
        else:
            out.append(ln)
    return b"\n".join(out)


def crafted():
    """One file per rule edge of the grammar."""
    for base in (BASE, BWD_BASE, DET_BASE, DEC_BASE, FP8_BASE):
        keys = [ln.split(b" ", 1)[0].decode() for ln in base.splitlines()
                if ln and not ln.startswith(b"#")]
        for key in keys:
            yield with_line(key, None, base)                    # missing
            yield with_line(key, key, base)                     # empty value
            yield with_line(key, key + " ", base)
            line = next(ln for ln in base.splitlines() if ln.split(b" ", 1)[0] == key.encode())
            yield base + line + b"\n"                           # duplicate (+ header)
            for v in VALUES:
                if key != "params":
                    yield with_line(key, f"{key} {v}", base)
    # each kind's parameter list with the other's `backward`, in either order
    yield BASE + b"backward 1\n"
    yield BASE + b"backward 0\n"
    yield with_line("backward", None, BWD_BASE)
    yield with_line("backward", "backward 0", BWD_BASE)
    yield b"fa3-kernel-facts 1\nbackward 1\n" + with_line("backward", None, BWD_BASE)[19:]
    yield with_line("params", "params " + F.KERNEL_PARAMS, BWD_BASE)
    yield with_line("params", "params " + F.BWD_KERNEL_PARAMS + " x", BWD_BASE)
    yield with_line("grid", "grid persistent", BWD_BASE)
    yield with_line("cluster_m", "cluster_m 2", BWD_BASE)
    yield with_line("varlen", "varlen 1", BWD_BASE)
    # deterministic is the backward's only, in either order
    for base in (BASE, DEC_BASE, FP8_BASE):
        yield base + b"deterministic 1\n"
        yield base + b"deterministic 0\n"
    yield with_line("backward", "backward 0", DET_BASE)
    yield with_line("backward", None, DET_BASE)
    yield b"fa3-kernel-facts 1\ndeterministic 1\n" + BWD_BASE[19:]
    yield with_line("grid", "grid persistent", DET_BASE)
    yield DET_BASE.replace(b"dtype f16", b"dtype e4m3")
    # what a decoding kernel is not, with either key
    for key in ("split_kv", "pack_gqa"):
        dec = with_line("split_kv" if key == "pack_gqa" else "pack_gqa", None, DEC_BASE)
        yield dec
        yield with_line("grid", "grid persistent", dec)
        yield with_line("cluster_m", "cluster_m 2", dec)
        yield with_line("varlen", "varlen 1", dec)
        yield BWD_BASE + f"{key} 1\n".encode()
        yield BWD_BASE + f"{key} 0\n".encode()
    yield with_line("params", "params " + F.BWD_KERNEL_PARAMS, DEC_BASE) + b"backward 1\n"
    yield with_line("split_kv", "split_kv 0", with_line("pack_gqa", "pack_gqa 0", DEC_BASE))
    # what an FP8 kernel is not (the compiler builds none of these)
    for extra in (b"varlen 1\n", b"varlen 0\n", b"split_kv 1\n", b"pack_gqa 1\n",
                  b"split_kv 0\npack_gqa 0\n"):
        yield with_line("grid", "grid tiles", FP8_BASE) + extra
    # an FP8 kernel's tile, grid and clusters (128 rows by 128 to 224 keys,
    # no cluster)
    for bm, bn in ((128, 128), (64, 128), (128, 64), (192, 128), (128, 160), (128, 176),
                   (128, 192), (128, 224), (128, 256), (192, 160), (256, 128), (64, 64)):
        yield with_line("block_n", f"block_n {bn}",
                        with_line("block_m", f"block_m {bm}", FP8_BASE))
    for grid in (b"grid persistent", b"grid tiles"):
        for cm in (None, b"cluster_m 1", b"cluster_m 2", b"cluster_m 4"):
            yield with_line("cluster_m", cm, with_line("grid", grid, FP8_BASE))
    yield with_line("block_n", "block_n 64", with_line("grid", "grid persistent", FP8_BASE))
    yield with_line("block_n", "block_n 64", with_line("head_dim_v", "head_dim_v 256", FP8_BASE))
    yield DEC_BASE.replace(b"dtype bf16", b"dtype e4m3")
    yield BWD_BASE.replace(b"dtype f16", b"dtype e4m3")
    yield BWD_BASE.replace(b"dtype f16", b"dtype e4m3").replace(b"head_dim 64", b"head_dim 128")
    for d, dv in ((64, 64), (192, 192), (256, 256), (128, 256), (256, 128), (192, 128),
                  (96, 96), (64, 128)):
        yield with_line("head_dim_v", f"head_dim_v {dv}",
                        with_line("head_dim", f"head_dim {d}", FP8_BASE))
    yield b""
    yield b"\n\n# only a comment\n"
    yield b"  # comment first\n\n" + BASE
    yield BASE.replace(b"\n", b"\r\n")                       # CRLF
    yield BASE.replace(b"\n", b"\r")                         # CR only: one long line
    yield BASE.replace(b"\n", b"\r\r\n")
    yield BASE.replace(b" ", b"\t")
    yield BASE.replace(b" ", b" \t  ")
    yield BASE.replace(b"\n", b" \t\n")
    yield BASE.replace(b"\n", b"#\n")
    yield BASE.rstrip(b"\n")                                 # no final newline
    yield BASE + b"future_key\n" + b"future_key 1 2 3\n" + b"future_key x\n"
    yield BASE + b"Kernel x\n"                               # keys are case-sensitive
    yield BASE + b"fa3-kernel-facts 1\n"
    yield BASE.replace(b"fa3-kernel-facts 1", b"fa3-kernel-facts\t1")
    yield BASE.replace(b"fa3-kernel-facts 1", b"fa3-kernel-facts 1 1")
    yield BASE.replace(b"fa3-kernel-facts 1", b"fa3-kernel-facts   1   # v1")
    yield BASE.replace(b"fa3-kernel-facts 1\n", b"")
    yield BASE.replace(b"fa3-kernel-facts 1\n", b"") + b"fa3-kernel-facts 1\n"
    yield BASE.replace(b"# written", b"# caf\xc3\xa9 written")   # UTF-8 in a comment
    yield BASE.replace(b"# written", b"# \xff written")          # not UTF-8
    yield BASE.replace(b"dtype bf16", b"dtype bf16\0")
    yield BASE + b"\0"
    for n in (1021, 1022, 1023, 1024):                       # line limit, with and without CR
        yield BASE + b"x " + b"y" * (n - 2) + b"\n"
        yield BASE + b"x " + b"y" * (n - 3) + b"\r\n"
    pad = F.MAX_BYTES - len(BASE)
    yield BASE + (b"#" + b" " * 99 + b"\n") * (pad // 101) + b"#" * (pad % 101)  # 65536 bytes
    yield BASE + (b"#" + b" " * 99 + b"\n") * (pad // 101) + b"#" * (pad % 101 + 1)
    yield with_line("params", "params  mapQ\tmapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv "
                    "oStrideB oStrideS oStrideH   scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK "
                    "maxSeqlenQ\tnumSplits oAccum  lseAccum")
    # the whole list, blanks and tabs between the names: accepted
    yield with_line("params", "params  " + "\t \t".join(F.KERNEL_PARAMS.split(" ")) + " ")
    yield with_line("params", "params  mapQ\ttmK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv "
                    "oStrideB oStrideS oStrideH   scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK "
                    "maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize")
    yield with_line("params", "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv "
                    "oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ "
                    "numSplits oAccum lseAccum pageTable pageTableStride pageSize" + FP8_PARAMS
                    + " extra")
    yield with_line("params", "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv "
                    "oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK "
                    "maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize"
                    + FP8_PARAMS + "\x0b")
    # the ABI before FP8 (0.6's): refused by its names
    yield with_line("params", "params " + F.KERNEL_PARAMS.replace(FP8_PARAMS, ""))
    # the ABI before split-KV (0.5's): refused by its names
    yield with_line("params", "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv "
                    "oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK "
                    "maxSeqlenQ")
    yield with_line("causal", "causal 0")                   # window_right 0 without causal
    yield with_line("window_right", "window_right 5")       # causal needs 0
    yield with_line("window_right", "window_right 5", with_line("causal", "causal 0"))


def mutate(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(12)
        i = rng.randrange(len(lines))
        if op == 0:      # another value
            key = lines[i].split(b" ", 1)[0]
            lines[i] = key + b" " + rng.choice(VALUES).encode("latin-1")
        elif op == 1:
            del lines[i]
        elif op == 2:
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
        elif op == 3:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op in (4, 5, 6):  # insert, replace or delete a byte
            ln = lines[i]
            p = rng.randrange(len(ln) + 1)
            b = rng.choice(BYTES)
            lines[i] = ln[:p] + (b if op != 6 else b"") + ln[p + (op != 4):]
        elif op == 7:
            lines = [ln + b"\r" for ln in lines]
        elif op == 8:    # unknown key, or a known one with a random value
            key = rng.choice([b"future", b"o_store", b"kernel", b"scale", b"cluster_m", b"cubin",
                              b"backward", b"varlen", b"split_kv", b"pack_gqa",
                              b"deterministic"])
            lines.insert(i, key + b" " + rng.choice(VALUES).encode("latin-1"))
        elif op == 9:
            text = b"\n".join(lines)
            lines = text[:rng.randrange(len(text) + 1)].split(b"\n")
        elif op == 10:   # other blanks between key and value
            lines[i] = lines[i].replace(b" ", rng.choice([b"\t", b"  ", b" \t", b"\t\t "]), 1)
        elif op == 11:   # a comment or a blank line
            lines.insert(i, rng.choice([b"", b"   ", b"\t", b"# x", b"#", b" # y \t"]))
        if not lines:
            lines = [b""]
    return b"\n".join(lines)


def check(rt, data: bytes, failures: list):
    c, p = c_parse(rt, data), py_parse(data)
    if not same(c, p):
        failures.append((data, c, p))
    try:  # the str form of a text file says the same
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return c is not None
    if not same(py_parse(text), p):
        failures.append((data, "str", py_parse(text)))
    return c is not None


def report(failures):
    return "\n".join(f"{d!r}\n  C:  {c}\n  Py: {p}" for d, c, p in failures[:5])


def test_crafted_files_parse_alike(rt):
    assert same(c_parse(rt, BASE), py_parse(BASE)) and py_parse(BASE) is not None
    assert same(c_parse(rt, BWD_BASE), py_parse(BWD_BASE)) and py_parse(BWD_BASE)["backward"]
    assert same(c_parse(rt, DET_BASE), py_parse(DET_BASE)) and py_parse(DET_BASE)["deterministic"]
    assert not py_parse(BWD_BASE)["deterministic"]
    assert c_parse(rt, BASE + b"deterministic 1\n") is None
    assert py_parse(BASE + b"deterministic 1\n") is None
    assert same(c_parse(rt, DEC_BASE), py_parse(DEC_BASE)) and py_parse(DEC_BASE)["split_kv"]
    assert same(c_parse(rt, FP8_BASE), py_parse(FP8_BASE))
    assert py_parse(FP8_BASE)["dtype"] == "e4m3"
    persistent = with_line("grid", "grid persistent", FP8_BASE)
    assert same(c_parse(rt, persistent), py_parse(persistent))
    assert py_parse(persistent)["persistent"]
    wide = with_line("block_n", "block_n 224", FP8_BASE)
    assert same(c_parse(rt, wide), py_parse(wide)) and py_parse(wide)["block_n"] == 224
    for refused in (with_line("block_n", "block_n 176", FP8_BASE),
                    with_line("block_m", "block_m 192", FP8_BASE),
                    with_line("cluster_m", "cluster_m 2", FP8_BASE),
                    with_line("head_dim_v", "head_dim_v 256", FP8_BASE)):
        assert c_parse(rt, refused) is None and py_parse(refused) is None
    failures, n, accepted = [], 0, 0
    for data in crafted():
        n += 1
        accepted += check(rt, data, failures)
    assert not failures, f"{len(failures)} of {n} files parse differently:\n" + report(failures)
    assert n > 1000 and 50 < accepted < n - 500, (n, accepted)


def test_mutated_files_parse_alike(rt):
    rng = random.Random(SEED)
    failures, accepted = [], 0
    for i in range(CASES):
        base = (BASE, DET_BASE, BWD_BASE, BASE, DEC_BASE, FP8_BASE)[i % 6]
        accepted += check(rt, mutate(rng, base), failures)
    assert not failures, (f"{len(failures)} of {CASES} mutations (seed {SEED}) parse "
                          f"differently:\n" + report(failures))
    assert 0.1 * CASES < accepted < 0.9 * CASES, accepted  # both paths exercised
