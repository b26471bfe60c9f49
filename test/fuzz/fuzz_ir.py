#!/usr/bin/env python3
"""IR fuzzer for fa3-opt: mutates the repository's IR files (and generates
attention ops of its own) and runs each case through one of our passes or
pipelines (the --attn-*, --convert-attn-* and --hopper-* entries of
`fa3-opt --help`),
with valid, boundary and malformed pass-option values, sometimes anchored
under func.func or gpu.module through --pass-pipeline. attn-hopper-pipeline
always gets format=isa or none (or a malformed value), so no ptxas runs.

A case fails when fa3-opt
  - dies by a signal, or prints "LLVM ERROR", "Assertion", "Stack dump",
    "PLEASE submit a bug report" or a sanitizer report       (crash),
  - runs past the per-case timeout                              (hang),
  - exits 0 while printing "error:"                             (error-exit-0).
Each failing case is saved to the output directory (input, command, log and a
one-line reproduction, NAME.cmd); failures are grouped by signature, and
--minimize shrinks the first case of each (input lines, then pass options).
Crashes of MLIR 22 itself (KNOWN_UPSTREAM) are listed but not counted. The
run ends with

  fuzz: N cases, K failures (crash C, hang H, error-exit-0 E)

and exits 1 when K > 0. Runs are reproducible: case i of seed S depends only
on S, i, the corpus (the IR files under test/ and examples/) and the pass
list that `fa3-opt --help` prints, not on --jobs or on the other cases.

Usage (Python 3 standard library only):
  python3 test/fuzz/fuzz_ir.py --opt build/bin/fa3-opt --seed 1 --cases 200 \\
      --jobs 2 --timeout 10 --out /tmp/fuzz-out [--minimize]
  python3 test/fuzz/fuzz_ir.py ... --only 17      # re-run one case
  python3 test/fuzz/fuzz_ir.py ... --show 17      # print one case, run nothing
  bash scripts/fuzz.sh [SEED] [CASES]              # a longer run by hand
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import random
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CRASH_MARKERS = ("LLVM ERROR", "Assertion", "Stack dump",
                 "PLEASE submit a bug report", "ERROR: AddressSanitizer",
                 "ERROR: LeakSanitizer", "runtime error:",
                 "terminate called", "Segmentation fault")
ERROR_RE = re.compile(r"(^|[\s:])error:", re.M)

# Bugs of MLIR 22 itself (mlir-opt has them too), which no change here can
# fix: reported on a line of their own, not counted as failures unless
# --count-upstream is given.
KNOWN_UPSTREAM = [
    (re.compile(r"parseDenseArrayAttr"),
     "array<index: ...> segfaults in MLIR 22's parser (Parser::parseDenseArrayAttr "
     "asks an IndexType for its float width; mlir-opt crashes the same way)"),
]

# ----------------------------------------------------------------------------
# Corpus
# ----------------------------------------------------------------------------


def load_corpus(root):
    """The IR snippets of the repository: every .mlir under test/ and
    examples/ split on `// -----`, and the split-file parts (#--- x.mlir) of
    .test files. Sorted, so that a seed means the same cases everywhere."""
    files = []
    for top in ("test", "examples"):
        for d, subdirs, names in os.walk(os.path.join(root, top)):
            subdirs.sort()
            if os.path.relpath(d, root).startswith(os.path.join("test", "fuzz")):
                continue
            for n in sorted(names):
                if n.endswith(".mlir") or n.endswith(".test"):
                    files.append(os.path.join(d, n))
    snippets = []
    for path in sorted(files):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        rel = os.path.relpath(path, root)
        if path.endswith(".test"):
            parts = re.split(r"^#--- (\S+)\n", text, flags=re.M)
            for name, body in zip(parts[1::2], parts[2::2]):
                if name.endswith(".mlir") and body.strip():
                    snippets.append((f"{rel}:{name}", body))
            continue
        for j, part in enumerate(re.split(r"^// -----\s*$", text, flags=re.M)):
            # Drop comments: lit and FileCheck lines, and expected-* lines
            # (MLIR 22's fa3-opt checks those even without
            # --verify-diagnostics, printing "error:" with exit status 0).
            body = "\n".join(re.sub(r"\s*//.*$", "", l) for l in part.splitlines()
                             if not re.match(r"\s*//", l))
            if re.search(r"\b(func\.func|module|gpu\.module|attn\.)", body):
                snippets.append((f"{rel}#{j}", body.strip("\n") + "\n"))
    return snippets


# ----------------------------------------------------------------------------
# Generated attention ops (well-formed up to the hostile values we pick)
# ----------------------------------------------------------------------------

ELEM_TYPES = ["bf16", "f16", "f32", "f8E4M3FN", "f8E5M2", "f64", "i32", "i8",
              "index", "i1", "complex<f32>", "f4E2M1FN"]
HOSTILE_INTS = ["0", "-1", "1", "2", "7", "99999999999999999999",
                str(2**31), str(2**31 - 1), str(2**32), str(2**63 - 1),
                str(-2**63), str(2**63), "-2", "140737488355328"]
HOSTILE_FLOATS = ["0.0", "-0.0", "-1.0", "1.0", "3.0e38", "3.4028235e38",
                  "1.0e-45", "1.0e-300", "1.0e300", "0x7FC00000", "0x7F800000",
                  "0xFF800000", "0x7FFFFFFF", "0.125", "30.0", "1.0e30"]


def gen_attention(rng, wild):
    """A function with one (or two) attn.flash_attention ops: well-formed,
    or (wild) with some hostile shapes, types or attributes."""

    def pick(valid, hostile, p=0.15):
        return rng.choice(hostile if wild and rng.random() < p else valid)

    tensor = rng.random() < 0.4
    kind = "tensor" if tensor else "memref"
    hkv = pick(["1", "2", "4"], ["?", "0", "3", "2147483648"])
    hq = pick([hkv, str(2 * int(hkv)) if hkv.isdigit() else hkv], ["?", "5", "0"])
    b = pick(["1", "2", "?"], ["0", "9223372036854775807", "4294967296"])
    sq = pick(["?", "128", "100", "1", "1024", "64"], ["0", "2147483648", "3"])
    skv = pick(["?", "128", "300", "1", "4096", sq], ["0", "2147483648", "7"])
    d = pick(["64", "128", "256", "64", "128", "32", "8"], ["0", "96", "512", "?", "2147483648", "1"])
    dv = d if rng.random() < 0.9 else pick(["64", "32"], ["?", "0"])
    et = pick(["bf16", "f16", "f32", "bf16", "f16"], ELEM_TYPES, 0.3)
    ot = et if rng.random() < 0.9 else pick(["f32", "bf16"], ELEM_TYPES, 0.5)
    if et.startswith("f8") and not wild:
        ot = "bf16"
    lt = pick(["f32"], ELEM_TYPES, 0.3)

    def ty(shape, e, layout=""):
        return f"{kind}<{'x'.join(shape)}x{e}{layout}>"

    layout = ""
    if not tensor and rng.random() < 0.15:
        layout = pick([", strided<[?, ?, ?, 1]>", ", strided<[?, ?, ?, 1], offset: ?>"],
                      [", strided<[?, ?, ?, 2]>", ", strided<[1, 1, 1, 1]>",
                       ", affine_map<(a, b, c, d) -> (a, c, b, d)>", ", 3",
                       ", #gpu.address_space<workgroup>", ", strided<[0, 0, 0, 0]>"], 0.5)
    qt = ty([b, hq, sq, d], et, layout)
    kt = ty([b, hkv, skv, d], et, layout if rng.random() < 0.5 else "")
    vt = ty([b, hkv, skv, dv], et)
    o_t = ty([b, hq, sq, dv], ot)
    lse = rng.random() < 0.6
    lse_t = ty([b, hq, sq], lt)
    attrs = []
    ints = ["-1", "0", "128", "256", "1", "64"]
    if rng.random() < 0.4:
        attrs.append(f"scale({pick(['0.088', '0.125', '1.0', '0.5'], HOSTILE_FLOATS, 0.6)})")
    causal = rng.random() < 0.4
    if causal:
        attrs.append("causal")
    if rng.random() < 0.4:
        l, r = pick(ints, HOSTILE_INTS, 0.5), pick(ints, HOSTILE_INTS, 0.5)
        if causal and not wild:
            r = "0"
        attrs.append(f"window({l}, {r})")
    if rng.random() < 0.3:
        attrs.append(f"softcap({pick(['30.0', '50.0', '0.0'], HOSTILE_FLOATS, 0.6)})")
    rng.shuffle(attrs)
    a = " ".join(attrs)
    args = f"%q: {qt}, %k: {kt}, %v: {vt}, %o: {o_t}" + (f", %l: {lse_t}" if lse else "")
    outs = f"%o, %l : {o_t}, {lse_t}" if lse else f"%o : {o_t}"
    name = pick(["f", "attention", "x1", "attn_fwd"],
                ["_", "a$b", "\"a b\"", "\"q.k\"", "\"x() {}\"", "f" * 300, "\"\""], 0.3)
    ins = f"ins(%q, %k, %v : {qt}, {kt}, {vt})"
    if tensor:
        res = f"{o_t}, {lse_t}" if lse else o_t
        lhs = "%r:2 = " if lse else "%r = "
        ret = f"return %r#0, %r#1 : {o_t}, {lse_t}" if lse else f"return %r : {o_t}"
        body = f"  {lhs}attn.flash_attention {ins} outs({outs}) {a} -> {res}\n  {ret}\n"
        rtype = f" -> ({res})"
        if rng.random() < 0.15 and not lse:
            # two chained ops: the second reads the first one's result as q
            body = (f"  %r0 = attn.flash_attention {ins} outs({outs}) {a} -> {res}\n"
                    f"  %r = attn.flash_attention ins(%r0, %k, %v : {o_t}, {kt}, {vt}) "
                    f"outs({outs}) -> {res}\n  {ret}\n")
    else:
        body = f"  attn.flash_attention {ins} outs({outs}) {a}\n  return\n"
        rtype = ""
        if rng.random() < 0.15:
            body = body.replace("  return\n", f"  attn.flash_attention {ins} outs({outs})\n  return\n")
    text = f"func.func @{name}({args}){rtype} {{\n{body}}}\n"
    if rng.random() < 0.1:
        text = f"module {{\n{text}}}\n"
    if rng.random() < 0.05:
        text = "gpu.module @g {\n  gpu.func @k() kernel {\n    gpu.return\n  }\n}\n" + text
    if rng.random() < 0.05:
        text = text.replace("func.func @", "func.func private @", 1)
    return text


# ----------------------------------------------------------------------------
# Mutations
# ----------------------------------------------------------------------------

INT_RE = re.compile(r"(?<![\w.%#@$])-?\d+(?![\w.])")
TYPE_RE = re.compile(r"\b(f32|bf16|f16|f64|f8E4M3FN|f8E5M2|i32|i64|i8|i1|index)\b")
SHAPE_RE = re.compile(r"\b(memref|tensor)<([^<>]*?)x(f32|bf16|f16|f64|f8E4M3FN|i32|i8|i1|index)")
ATTR_RE = re.compile(r"\s(scale\([^()]*\)|causal|window\([^()]*\)|softcap\([^()]*\)|masked)")
ATTR_DICT_RE = re.compile(r"(block_m|block_n|scale_log2|softcap|window)\s*=\s*([^,}]+)")


def hostile_attr(rng):
    return rng.choice([
        f"scale({rng.choice(HOSTILE_FLOATS)})", "causal",
        f"window({rng.choice(HOSTILE_INTS)}, {rng.choice(HOSTILE_INTS)})",
        f"window({rng.choice(['-1', '0', '64'])}, {rng.choice(['-1', '0', '64'])})",
        f"softcap({rng.choice(HOSTILE_FLOATS)})", "causal causal", "window(1)",
        "scale(1)", "softcap(abc)", "window(, )", "scale()", "{foo = 1 : i64}",
        "{block_m = 0 : i64}",
    ])


def m_delete_line(rng, t):
    lines = t.splitlines(True)
    if lines:
        del lines[rng.randrange(len(lines))]
    return "".join(lines)


def m_duplicate_line(rng, t):
    lines = t.splitlines(True)
    if lines:
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "".join(lines)


def m_swap_lines(rng, t):
    lines = t.splitlines(True)
    if len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def m_int(rng, t):
    ms = list(INT_RE.finditer(t))
    if not ms:
        return t
    m = rng.choice(ms)
    return t[:m.start()] + rng.choice(HOSTILE_INTS) + t[m.end():]


def m_type(rng, t):
    ms = list(TYPE_RE.finditer(t))
    if not ms:
        return t
    m = rng.choice(ms)
    new = rng.choice(ELEM_TYPES)
    if rng.random() < 0.5:  # every occurrence of that type
        return TYPE_RE.sub(lambda x: new if x.group(1) == m.group(1) else x.group(0), t)
    return t[:m.start()] + new + t[m.end():]


def m_shape(rng, t):
    ms = list(SHAPE_RE.finditer(t))
    if not ms:
        return t
    m = rng.choice(ms)
    dims = m.group(2).split("x")
    op = rng.random()
    if op < 0.5 and dims:
        dims[rng.randrange(len(dims))] = rng.choice(["?", "0", "1", "3", "1000000",
                                                     str(2**31), str(2**62), "65"])
    elif op < 0.7 and dims:
        del dims[rng.randrange(len(dims))]
    elif op < 0.9:
        dims.insert(rng.randrange(len(dims) + 1), rng.choice(["1", "2", "?"]))
    else:
        dims = [rng.choice(["?", "1", "64"]) for _ in range(rng.choice([0, 1, 5, 8]))]
    new = f"{m.group(1)}<{'x'.join(dims)}{'x' if dims else ''}{m.group(3)}"
    return t[:m.start()] + new + t[m.end():]


def m_drop_attr(rng, t):
    ms = list(ATTR_RE.finditer(t))
    if not ms:
        return t
    m = rng.choice(ms)
    return t[:m.start()] + t[m.end():]


def m_insert_attr(rng, t):
    """After the outs(...) of an attn.flash_attention, or into an attr-dict."""
    spots = []
    for m in re.finditer(r"attn\.flash_attention", t):
        o = t.find("outs(", m.end())
        if o < 0:
            continue
        depth, i = 0, o + 4
        while i < len(t):
            depth += {"(": 1, ")": -1}.get(t[i], 0)
            if depth == 0:
                spots.append(i + 1)
                break
            i += 1
    if spots:
        at = rng.choice(spots)
        return t[:at] + " " + hostile_attr(rng) + t[at:]
    ms = list(ATTR_DICT_RE.finditer(t))
    if ms:
        m = rng.choice(ms)
        val = rng.choice(HOSTILE_INTS + HOSTILE_FLOATS) + rng.choice([" : i64", " : f32", ""])
        if m.group(1) == "window":
            val = f"array<i64: {rng.choice(HOSTILE_INTS)}, {rng.choice(HOSTILE_INTS)}>"
        return t[:m.start(2)] + val + t[m.end(2):]
    return t


def m_attr_value(rng, t):
    """Rewrites the value inside scale(...), window(...) or softcap(...)."""
    ms = list(re.finditer(r"\b(scale|window|softcap)\(([^()]*)\)", t))
    if not ms:
        return m_insert_attr(rng, t)
    m = rng.choice(ms)
    if m.group(1) == "window":
        v = f"{rng.choice(HOSTILE_INTS)}, {rng.choice(HOSTILE_INTS)}"
    else:
        v = rng.choice(HOSTILE_FLOATS)
    return t[:m.start(2)] + v + t[m.end(2):]


def m_truncate(rng, t):
    return t[:rng.randrange(len(t) + 1)] if t else t


def nest(depth, inner):
    """`depth` scf.execute_region ops, one inside the other (generic form)."""
    open_ = '"scf.execute_region"() ({\n'
    close = '  "scf.yield"() : () -> ()\n}) : () -> ()\n'
    return open_ * depth + inner + close * depth


def m_nest(rng, t):
    depth = rng.choice([2, 10, 100, 500, 1000, 1000, 1500, 2500, 5000])
    inner = ""
    i = t.find("attn.flash_attention")
    lines = t.splitlines(True)
    # Put the nest inside the first function body (after its first line
    # ending in '{'), else wrap the whole text in a module nest.
    for k, l in enumerate(lines):
        if l.rstrip().endswith("{") and "func" in l:
            lines.insert(k + 1, nest(depth, inner))
            return "".join(lines)
    if i < 0:
        return "func.func @deep() {\n" + nest(depth, inner) + "  return\n}\n" + t
    return "builtin.module {\n" * min(depth, 200) + t + "}\n" * min(depth, 200)


def m_bytes(rng, t):
    b = bytearray(t.encode("utf-8", "replace"))
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        pos = rng.randrange(len(b) + 1)
        op = rng.random()
        junk = bytes(rng.randrange(256) for _ in range(rng.choice([1, 1, 3, 8])))
        if op < 0.4:
            b[pos:pos] = junk
        elif op < 0.7 and pos < len(b):
            b[pos:pos + len(junk)] = junk
        elif op < 0.85:
            b[pos:pos] = rng.choice([b"{", b"}", b"(", b")", b"<", b">", b"\"",
                                     b"\x00", b"%", b"^bb0:", b"#", b"!", b"\\"])
        else:
            del b[pos:pos + rng.randrange(1, 16)]
    return b.decode("latin-1")


def m_splice(rng, t, corpus):
    other = rng.choice(corpus)[1].splitlines(True)
    lines = t.splitlines(True)
    if not other:
        return t
    a = rng.randrange(len(other))
    chunk = other[a:a + rng.choice([1, 1, 2, 5])]
    at = rng.randrange(len(lines) + 1)
    return "".join(lines[:at] + chunk + lines[at:])


MUTATIONS = [(m_delete_line, 2), (m_duplicate_line, 1), (m_swap_lines, 1),
             (m_int, 8), (m_type, 5), (m_shape, 5), (m_drop_attr, 4),
             (m_insert_attr, 6), (m_attr_value, 8), (m_truncate, 1),
             (m_nest, 1), (m_bytes, 2), (m_splice, 1)]


def mutate(rng, text, corpus, count=None):
    fns = [f for f, w in MUTATIONS for _ in range(w)]
    if count is None:
        count = rng.choice([0, 1, 1, 1, 1, 1, 2, 2, 3])
    for _ in range(count):
        f = rng.choice(fns)
        text = f(rng, text, corpus) if f is m_splice else f(rng, text)
    return text


# ----------------------------------------------------------------------------
# Passes and their options (from fa3-opt --help)
# ----------------------------------------------------------------------------

OURS = re.compile(r"^(attn-|convert-attn-|hopper-)")


def our_passes(opt):
    """{pass: [(option, kind)]} of our passes and pipelines as fa3-opt --help
    lists them; kind is long, int, uint, number, string, bool or value."""
    out = subprocess.run([opt, "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    passes, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^ {6}--([\w-]+)\s", line)
        if m:
            cur = m.group(1) if OURS.match(m.group(1)) else None
            if cur:
                passes[cur] = []
            continue
        m = re.match(r"^ {8}--([\w-]+)(=<(\w+)>)?\s", line)
        if m and cur:
            passes[cur].append((m.group(1), m.group(3) or "bool"))
        elif not line.startswith(" " * 8):
            cur = None if not line.startswith("    =") else cur
    return dict(sorted(passes.items()))


HOSTILE_STRINGS = ["", " ", "}", "{", "'", "\"", "x y", "'a b'", "{a}", ",",
                   "a,b", "=", "auto}", "on off", "\\", "\u00e9", "-1", "0"]


BOUNDARY_INTS = ["-1", "1", "3", "5", "8", "9", "17", "100", "320", "1000", "65536",
                 str(2**31 - 1), str(2**31), str(2**32), str(2**40), "140737488355328",
                 str(2**56), str(2**62), str(2**63 - 1), str(-2**63), str(-2**31),
                 str(2**63), "99999999999999999999"]


def option_value(rng, name, kind, hostile):
    """A value for a pass option: a valid one, or with probability `hostile`
    a boundary or malformed one."""
    bad = rng.random() < hostile
    odd = rng.random() < 0.35  # of the bad ones: malformed rather than boundary
    if kind in ("long", "int", "uint"):
        valid = {"block-m": ["0", "64", "128", "192"],
                 "block-n": ["0", "16", "64", "128", "160", "176", "224", "256"],
                 "stages": ["0", "2", "3", "4"],
                 "q-buffers": ["0", "1", "2"]}.get(name, ["0", "1", "2"])
        if not bad:
            return rng.choice(valid)
        if not odd:
            return rng.choice(BOUNDARY_INTS)
        return rng.choice(HOSTILE_STRINGS + ["abc", "1.5", "0x10", "12x", "2 3"])
    if kind == "number":
        if not bad:
            return rng.choice(["0", "8", "15", "4.5", "1"])
        if not odd:
            return rng.choice(["-1", "15.0001", "16", "1e308", "-0", "1e-320", "nan",
                               "inf", "-inf", "1e400"])
        return rng.choice(HOSTILE_STRINGS + ["abc", "1,5"])
    if kind == "bool":
        if not bad:
            return rng.choice(["true", "false", None, "1", "0"])
        return rng.choice(HOSTILE_STRINGS + ["maybe", "2", "-1"])
    # strings: per option
    valid = {"persistent": ["auto", "on", "off"], "lazy-rescale": ["auto", "on", "off"],
             "kv-multicast": ["auto", "on", "off"],
             "chip": ["sm_90a", "sm_90a", "sm_90", "sm_80", "sm_100a"],
             "features": ["+ptx81", "+ptx83", "+ptx80", "+ptx60"],
             "format": ["isa", "none"], "toolkit": ["/nonexistent"]}.get(name, ["x"])
    if not bad:
        return rng.choice(valid)
    v = rng.choice(HOSTILE_STRINGS + ["bogus", "sm_90a x", "sm_90a}", "a\"b", "'",
                                      "sm_" + "9" * 40, "/tmp/a b", "AUTO", "on "])
    if name == "format" and v.strip() in ("bin", "fatbin"):
        v = "isa"
    return v


def pipeline_for(rng, passes, hostile, focus):
    """One pass (sometimes two) with random options. Cases about options
    favour the passes that have many, and most of them make exactly one
    option hostile (so that it is the one that reaches the compiler)."""
    names = list(passes)
    if focus == "options":
        chain = rng.choices(names, [1 + len(passes[p]) for p in names])
        if chain[0] in ("convert-attn-to-hopper", "attn-lower-tiles-to-loops") \
                and "attn-tile" in passes and rng.random() < 0.7:
            chain.insert(0, "attn-tile")  # they take the tiled form
            if chain[1] == "convert-attn-to-hopper" and "attn-hopper-config" in passes:
                chain.insert(0, "attn-hopper-config")  # and its configuration
    else:
        chain = [rng.choice(names)]
    if rng.random() < 0.2:
        seq = [["attn-hopper-config", "attn-tile", "convert-attn-to-hopper"],
               ["attn-hopper-config", "attn-tile", "convert-attn-to-hopper",
                "hopper-overlap", "hopper-pingpong"],
               ["attn-hopper-config", "attn-tile", "convert-attn-to-hopper",
                "hopper-warp-specialize", "hopper-async-copy"],
               ["attn-hopper-config", "attn-tile", "convert-attn-to-hopper",
                "hopper-warp-specialize", "hopper-async-copy",
                "hopper-producer-warp-transpose", "convert-hopper-to-nvvm"],
               ["attn-tile", "convert-attn-to-hopper"],
               ["attn-hopper-config", "attn-tile", "attn-lower-tiles-to-loops"],
               ["attn-tile", "attn-lower-tiles-to-loops"],
               ["attn-tile", "attn-tile"], ["attn-lower-to-loops", "attn-tile"],
               ["attn-cpu-reference-pipeline", "attn-tile"],
               ["attn-tile", "attn-hopper-pipeline"]]
        chain = [p for p in rng.choice(seq) if p in passes] or chain
    select = rng.choice([0.2, 0.4, 0.7])
    picked = [(p, name, kind) for p in chain for name, kind in passes[p]
              if (p.endswith("hopper-pipeline") and name == "format")
              or rng.random() < select]
    one_bad = None
    if focus == "options" and picked and rng.random() < 0.7:
        one_bad = rng.randrange(len(picked))
    opts = {p: [] for p in chain}
    for j, (p, name, kind) in enumerate(picked):
        h = hostile if one_bad is None else float(j == one_bad)
        v = option_value(rng, name, kind, h)
        if name == "format" and p.endswith("hopper-pipeline") and j != one_bad \
                and rng.random() < 0.8:
            v = rng.choice(["isa", "none"])
        if v is None:
            opts[p].append(name)
            continue
        style = rng.random()
        if style < 0.7 or v == "":
            opts[p].append(f"{name}={v}")
        elif style < 0.85:
            opts[p].append(f"{name}='{v}'")
        else:
            opts[p].append(f"{name}={{{v}}}")
    out = []
    for p in chain:
        if p.endswith("hopper-pipeline") and not any(o.startswith("format=") for o in opts[p]):
            opts[p].append("format=" + rng.choice(["isa", "none"]))
        rng.shuffle(opts[p])
        out.append((p, opts[p]))
    return out


def command_for(rng, passes, hostile, focus="both"):
    """How one case runs: {"chain": [(pass, [option, ...])], "anchor": None
    (--pass flags) or a --pass-pipeline anchor, "extra": [flags]}."""
    chain = pipeline_for(rng, passes, hostile, focus)
    cmd = {"chain": chain, "anchor": None, "extra": []}
    if rng.random() >= 0.7:
        cmd["anchor"] = rng.choice(["builtin.module({})", "builtin.module({})",
                                    "builtin.module(func.func({}))",
                                    "builtin.module(gpu.module({}))", "any({})",
                                    "func.func({})", "builtin.module(any({}))"])
    return cmd


def render(cmd):
    """The fa3-opt arguments (after the input file) of a command."""
    chain = cmd["chain"]
    if cmd["anchor"] is None:
        args = [f"--{p}" + (("=" + " ".join(o)) if o else "") for p, o in chain]
    else:
        text = ",".join(p + ("{" + " ".join(o) + "}" if o else "") for p, o in chain)
        args = ["--pass-pipeline=" + cmd["anchor"].format(text)]
    return args + cmd["extra"]


def make_case(seed, index, corpus, passes):
    rng = random.Random(f"fa3-fuzz:{seed}:{index}")
    # What the case is about: a hostile input with sane options, sane input
    # with hostile options, or both.
    focus = rng.choice(["input", "input", "options", "both"])
    if focus == "options":
        if rng.random() < 0.6:
            origin, text = "generated", gen_attention(rng, wild=False)
        else:
            origin, text = rng.choice(corpus)
    elif rng.random() < 0.35:
        origin = "generated"
        text = gen_attention(rng, wild=focus == "both" or rng.random() < 0.5)
        if rng.random() < 0.25:
            text = mutate(rng, text, corpus, 1)
    else:
        origin, text = rng.choice(corpus)
        text = mutate(rng, text, corpus, None if focus == "both" else rng.choice([1, 1, 2]))
    cmd = command_for(rng, passes, {"input": 0.05, "options": 0.5, "both": 0.3}[focus],
                      focus)
    if rng.random() < 0.1:
        cmd["extra"].append(rng.choice(["--mlir-print-op-generic", "--verify-each=0",
                                "--mlir-print-debuginfo", "--split-input-file"]))
    return {"index": index, "origin": origin, "text": text, "cmd": cmd, "args": render(cmd)}


# ----------------------------------------------------------------------------
# Running and classifying
# ----------------------------------------------------------------------------

_STATE = {}


def _limit_memory(mb):
    def f():
        os.setsid()
        if mb:
            try:
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))
            except (ImportError, ValueError, OSError):
                pass
    return f


def run_one(opt, text, args, timeout, mem_mb, workdir):
    """Runs fa3-opt on `text`; (returncode or None on timeout, output)."""
    path = os.path.join(workdir, "input.mlir")
    with open(path, "w", encoding="latin-1", errors="replace") as f:
        f.write(text)
    p = subprocess.Popen([opt, path, "-o", os.devnull] + args, cwd=workdir,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT,
                         preexec_fn=_limit_memory(mem_mb))
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            p.kill()
        out, _ = p.communicate()
        rc = None
    return rc, out.decode("utf-8", "replace")


def passes_of(args):
    """The pass names in a command, without their options."""
    text = " ".join(args)
    text = re.sub(r"\{[^{}]*\}", "", re.sub(r"\{[^{}]*\}", "", text))
    names = re.findall(r"(?:--|[(,])((?:attn|convert-attn)[\w-]*)", text)
    return ",".join(dict.fromkeys(names)) or "?"


def classify(rc, out, args=()):
    """None (pass), or (kind, signature)."""
    if rc is None:
        return "hang", "timeout in " + passes_of(args)
    marker = next((m for m in CRASH_MARKERS if m in out), None)
    if rc < 0 or rc > 128 or marker:
        return "crash", crash_signature(rc, out)
    if rc == 0 and ERROR_RE.search(out):
        line = next(l for l in out.splitlines() if ERROR_RE.search(l))
        return "error-exit-0", normalise(line.split("error:", 1)[1])
    return None


def normalise(s):
    """A message without locations, numbers or control characters."""
    s = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", s)
    s = re.sub(r"loc\([^)]*\)", "loc", s)
    s = re.sub(r"[\w./-]+\.mlir:\d+:\d+", "FILE", s)
    s = re.sub(r"0x[0-9a-fA-F]+", "0x_", s)
    s = re.sub(r"(?<![\w])-?\d+(\.\d+)?([eE][-+]?\d+)?", "N", s)
    return " ".join(s.split())[:200]


SKIP_FRAMES = ("llvm::sys::", "SignalHandler", "__restore_rt", "libc.so", "raise",
               "abort", "PrintStackTrace", "RunSignalHandlers", "llvm::report_fatal_error",
               "__assert", "__pthread_kill", "gsignal", "libpthread", "CrashRecoveryContext",
               "__sanitizer", "__asan", "__ubsan", "__interceptor",
               "llvm::llvm_unreachable_internal",
               "__cxa_throw", "__gnu_cxx", "std::terminate", "libstdc++", "_Unwind",
               "std::__throw")


def crash_signature(rc, out):
    asan = None
    for l in out.splitlines():
        if "LLVM ERROR" in l:
            return normalise(l[l.index("LLVM ERROR"):])
        if "Assertion" in l and "failed" in l:
            m = re.search(r"Assertion `(.*)' failed", l)
            return "Assertion " + (m.group(1)[:120] if m else normalise(l))
        if "runtime error:" in l:
            return "UBSan " + normalise(l.split("runtime error:", 1)[1])
        if "ERROR: AddressSanitizer" in l:
            # with the top frames, as for a signal: they tell one bug from
            # another (and a known upstream one, KNOWN_UPSTREAM, from ours)
            asan = "ASan " + normalise(l.split("AddressSanitizer:", 1)[1].split(" on ")[0])
            break
        if "terminate called" in l:
            return normalise(l)
    frames, addrs = [], []
    for l in out.splitlines():
        m = re.match(r"\s*#\d+\s+(0x[0-9a-f]+)\s+(?:in\s+)?(.*)", l)
        if not m:
            continue
        addrs.append(m.group(1))
        f = m.group(2)
        where = re.search(r"\(([^()]*/)?([^/()]+)\+(0x[0-9a-f]+)\)\s*$", f)
        f = re.sub(r"\s*\(/[^)]*\)\s*$", "", f)
        f = re.sub(r"\s+/\S+:\d+(:\d+)?$", "", f)
        f = re.sub(r"\(.*", "", f).strip()  # drop argument lists
        if not f and where and not frames and len(addrs) > 4:
            f = f"{where.group(2)}+{where.group(3)}"  # unsymbolised: module+offset
        if not f or any(s in f for s in SKIP_FRAMES):
            continue
        if len(frames) < 3:
            frames.append(f)
    if asan:
        return asan + (" in " + " < ".join(frames) if frames else "")
    sig = f"signal {-rc}" if rc is not None and rc < 0 else f"exit {rc}"
    # What LLVM says it was doing ("1. MLIR Parser: ...", "1. Running pass ...").
    ctx = [m.group(1) for m in re.finditer(r"^\d+\.\s+(?!Program arguments)(.*)$", out, re.M)]
    if ctx:
        sig += " during " + normalise(ctx[-1])
    if len(addrs) >= 40 and len(set(addrs)) < len(addrs) // 4:
        sig += " (deep recursion: stack overflow)"
    elif frames:
        sig += " in " + " < ".join(frames)
    return sig


def _init_worker(opt, timeout, mem_mb):
    _STATE.update(opt=opt, timeout=timeout, mem_mb=mem_mb,
                  workdir=tempfile.mkdtemp(prefix="fa3-fuzz-"))


def _run_case(case):
    t0 = time.monotonic()
    rc, out = run_one(_STATE["opt"], case["text"], case["args"], _STATE["timeout"],
                      _STATE["mem_mb"], _STATE["workdir"])
    verdict = classify(rc, out, case["args"])
    return case["index"], verdict, rc, (out[-20000:] if verdict else ""), time.monotonic() - t0


def repro_line(opt, path, args):
    return " ".join(shlex.quote(a) for a in [opt, path, "-o", "/dev/null"] + args)


def minimize(opt, case, verdict, timeout, mem_mb, budget_s):
    """Shrinks a failing case within budget_s: line-based delta debugging of
    the input (the fewest lines with the same verdict), then drops the pass
    options (and extra flags) that the verdict does not need. Returns
    (text, args)."""
    workdir = tempfile.mkdtemp(prefix="fa3-fuzz-min-")
    deadline = time.monotonic() + budget_s
    t = min(timeout, 10)
    cmd = json.loads(json.dumps(case["cmd"]))  # a copy

    def same(text, c):
        if time.monotonic() > deadline:
            return False
        args = render(c)
        rc, out = run_one(opt, text, args, t, mem_mb, workdir)
        return classify(rc, out, args) == verdict

    lines = case["text"].splitlines(True)
    n = 2
    while len(lines) >= 2 and time.monotonic() < deadline:
        chunk = max(1, len(lines) // n)
        removed = False
        for start in range(0, len(lines), chunk):
            cand = lines[:start] + lines[start + chunk:]
            if cand and same("".join(cand), cmd):
                lines, removed = cand, True
                n = max(n - 1, 2)
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(lines), n * 2)
    text = "".join(lines)
    for p in range(len(cmd["chain"])):
        opts = cmd["chain"][p][1]
        i = 0
        while i < len(opts):
            if opts[i].startswith("format="):  # keep ptxas out of it
                i += 1
                continue
            trial = json.loads(json.dumps(cmd))
            del trial["chain"][p][1][i]
            if same(text, trial):
                cmd, opts = trial, trial["chain"][p][1]
            else:
                i += 1
    for flag in list(cmd["extra"]):
        trial = json.loads(json.dumps(cmd))
        trial["extra"].remove(flag)
        if same(text, trial):
            cmd = trial
    shutil.rmtree(workdir, ignore_errors=True)
    return text, render(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--opt", default=os.path.join(ROOT, "build", "bin", "fa3-opt"),
                    help="fa3-opt to run (default: build/bin/fa3-opt)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per case")
    ap.add_argument("--mem-mb", type=int, default=None,
                    help="address-space limit per case in MiB (default 4096; 0: none; "
                         "none by default for sanitizer builds)")
    ap.add_argument("--out", default=None, help="directory for failing cases")
    ap.add_argument("--root", default=ROOT, help="repository root (corpus)")
    ap.add_argument("--only", type=int, action="append", help="run only this case index")
    ap.add_argument("--show", type=int, help="print case N (input and command) and exit")
    ap.add_argument("--minimize", action="store_true",
                    help="shrink the first input of each failure signature")
    ap.add_argument("--minimize-budget", type=float, default=60.0, help="seconds per signature")
    ap.add_argument("--quiet", action="store_true", help="only the summary and failures")
    ap.add_argument("--count-upstream", action="store_true",
                    help="count known MLIR 22 bugs (KNOWN_UPSTREAM) as failures")
    a = ap.parse_args()

    opt = os.path.abspath(a.opt) if os.sep in a.opt else (shutil.which(a.opt) or a.opt)
    if not os.access(opt, os.X_OK):
        sys.exit(f"fuzz: cannot run {opt}")
    if a.mem_mb is None:
        with open(opt, "rb") as f:
            binary = f.read()
        instrumented = b"__asan_init" in binary or b"__ubsan_handle" in binary
        a.mem_mb = 0 if instrumented or "ASAN_OPTIONS" in os.environ else 4096
    corpus = load_corpus(a.root)
    passes = our_passes(opt)
    if not corpus or not passes:
        sys.exit(f"fuzz: empty corpus ({len(corpus)} snippets) or no passes ({len(passes)})")
    indices = a.only or list(range(a.start, a.start + a.cases))
    if a.show is not None:
        c = make_case(a.seed, a.show, corpus, passes)
        print(f"// case {a.show} of seed {a.seed} (from {c['origin']})")
        print("// fa3-opt INPUT -o /dev/null " + " ".join(shlex.quote(x) for x in c["args"]))
        sys.stdout.write(c["text"])
        return 0
    if not a.quiet:
        shown = (", ".join(map(str, indices)) if a.only
                 else f"{indices[0]}..{indices[-1]}" if indices else "none")
        print(f"fuzz: seed {a.seed}, cases {shown}, {len(corpus)} "
              f"snippets, {len(passes)} passes ({', '.join(passes)}), {a.jobs} jobs, "
              f"timeout {a.timeout:g} s", flush=True)
    cases = {i: make_case(a.seed, i, corpus, passes) for i in indices}
    out_dir = a.out
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    counts = {"crash": 0, "hang": 0, "error-exit-0": 0}
    by_sig = {}
    t0 = time.monotonic()
    jobs = max(1, a.jobs)
    init = (opt, a.timeout, a.mem_mb)
    if jobs == 1:
        _init_worker(*init)
        results = map(_run_case, (cases[i] for i in indices))
        pool = None
    else:
        pool = multiprocessing.get_context("fork").Pool(jobs, _init_worker, init)
        results = pool.imap_unordered(_run_case, (cases[i] for i in indices), chunksize=1)
    slowest = (0.0, None)
    done, exits, upstream = 0, {}, {}
    try:
        for index, verdict, rc, out, secs in results:
            done += 1
            exits[rc] = exits.get(rc, 0) + 1
            slowest = max(slowest, (secs, index), key=lambda x: x[0])
            if not verdict:
                continue
            kind, sig = verdict
            known = next((note for r, note in KNOWN_UPSTREAM if r.search(sig)), None)
            if known and not a.count_upstream:
                if known not in upstream:
                    print(f"[upstream] case {index}: {sig}\n    known: {known}", flush=True)
                upstream.setdefault(known, []).append(index)
                continue
            counts[kind] += 1
            key = (kind, sig)
            first = key not in by_sig
            by_sig.setdefault(key, []).append(index)
            case = cases[index]
            name = f"{kind}-{hashlib.sha1(sig.encode()).hexdigest()[:8]}-case{index}"
            line = f"[{kind}] case {index}: {sig}"
            if out_dir:
                path = os.path.join(out_dir, name + ".mlir")
                with open(path, "w", encoding="latin-1", errors="replace") as f:
                    f.write(case["text"])
                repro = repro_line(opt, path, case["args"])
                with open(os.path.join(out_dir, name + ".cmd"), "w") as f:
                    f.write(repro + "\n")
                with open(os.path.join(out_dir, name + ".log"), "w") as f:
                    f.write(f"# {line}\n# exit {rc}\n# {repro}\n{out}")
                line += f"\n    repro: {repro}"
            if first or not a.quiet:
                print(line, flush=True)
    finally:
        if pool:
            pool.close()
            pool.join()
    elapsed = time.monotonic() - t0
    failures = sum(counts.values())
    if by_sig:
        print(f"fuzz: {len(by_sig)} distinct signature(s):")
        summary = []
        for (kind, sig), idx in sorted(by_sig.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(idx):5d}  {kind}: {sig}  (cases {', '.join(map(str, idx[:8]))}"
                  f"{', ...' if len(idx) > 8 else ''})")
            entry = {"kind": kind, "signature": sig, "cases": idx,
                     "command": cases[idx[0]]["args"]}
            if a.minimize and out_dir:
                small, args = minimize(opt, cases[idx[0]], (kind, sig), a.timeout,
                                       a.mem_mb, a.minimize_budget)
                name = f"{kind}-{hashlib.sha1(sig.encode()).hexdigest()[:8]}-min"
                path = os.path.join(out_dir, name + ".mlir")
                with open(path, "w", encoding="latin-1", errors="replace") as f:
                    f.write(small)
                entry["minimized"] = path
                entry["repro"] = repro_line(opt, path, args)
                with open(os.path.join(out_dir, name + ".cmd"), "w") as f:
                    f.write(entry["repro"] + "\n")
                print(f"         minimized to {len(small.splitlines())} line(s): {entry['repro']}")
            summary.append(entry)
        if out_dir:
            with open(os.path.join(out_dir, "summary.json"), "w") as f:
                json.dump({"seed": a.seed, "cases": len(indices), "signatures": summary}, f,
                          indent=1)
    if not a.quiet:
        print(f"fuzz: {elapsed:.1f} s, slowest case {slowest[1]} ({slowest[0]:.1f} s); "
              "exit statuses: " + ", ".join(f"{'timeout' if k is None else k}: {v}"
                                            for k, v in sorted(exits.items(), key=str)))
    for note, idx in upstream.items():
        print(f"fuzz: {len(idx)} case(s) hit a known MLIR 22 bug, not counted "
              f"(cases {', '.join(map(str, idx[:8]))}): {note}")
    print(f"fuzz: {done} cases, {failures} failures (crash {counts['crash']}, hang "
          f"{counts['hang']}, error-exit-0 {counts['error-exit-0']})", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
