"""fa3-opt never crashes: random attention ops (valid and invalid shapes,
element types, head dims, masks, both forms) through every pipeline must end
in output or a diagnostic with a non-zero exit, never a signal or an LLVM
crash report. Seeded, so a failure reproduces; the seed list can grow."""
import random
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FA3_OPT = ROOT / "build" / "bin" / "fa3-opt"
PIPELINES = (["--attn-cpu-reference-pipeline"],
             ["--attn-cpu-tiled-pipeline=block-m=16 block-n=32"],
             ["--attn-hopper-pipeline=format=none"])


def random_attention(rng):
    dim = lambda v: "?" if v is None else str(v)
    dt = rng.choice(["bf16", "f16", "f32", "f8E4M3FN", "i8"])
    odt = rng.choice([dt, "f32", "bf16", "f16"])
    d = rng.choice([8, 16, 24, 64, 96, 128, 256, 264, 0])
    dv = rng.choice([d, d, 64, 128, 256])
    hkv = rng.choice([1, 2, 3, 4])
    hq = hkv * rng.choice([1, 2, 3]) if rng.random() < 0.9 else rng.choice([1, 5, 7])
    b, sq, skv = (rng.choice([None, 1, 2]), rng.choice([None, 1, 7, 128, 300]),
                  rng.choice([None, 1, 7, 128, 300]))
    form = rng.choice(["memref", "tensor"])
    lse = rng.random() < 0.5
    t = lambda shape, e: "%s<%sx%s>" % (form, "x".join(dim(s) for s in shape), e)
    tq, tk, tv, to = (t((b, hq, sq, d), dt), t((b, hkv, skv, d), dt),
                      t((b, hkv, skv, dv), dt), t((b, hq, sq, dv), odt))
    tl = t((b, hq, sq), "f32")
    attrs = []
    if rng.random() < 0.3:
        attrs.append("causal")
    if rng.random() < 0.3:
        attrs.append("window(%d, %d)" % (rng.choice([-2, -1, 0, 5, 200]),
                                         rng.choice([-1, 0, 5])))
    if rng.random() < 0.3:
        attrs.append("softcap(%s)" % rng.choice(["0.0", "5.0", "-1.0"]))
    outs, outt = ("%o, %l", "%s, %s" % (to, tl)) if lse else ("%o", to)
    args = "%%q: %s, %%k: %s, %%v: %s, %%o: %s%s" % (tq, tk, tv, to,
                                                     ", %%l: %s" % tl if lse else "")
    res = (" -> " + outt) if form == "tensor" else ""
    lhs = ("%%r%s = " % (":2" if lse else "")) if form == "tensor" else ""
    return ("func.func @f(%s) {\n  %sattn.flash_attention ins(%%q, %%k, %%v : %s, %s, %s) "
            "outs(%s : %s) %s%s\n  return\n}\n" % (args, lhs, tq, tk, tv, outs, outt,
                                                    " ".join(attrs), res))


@pytest.mark.skipif(not FA3_OPT.exists(), reason="fa3-opt not built")
@pytest.mark.parametrize("seed", range(8))
def test_random_attention_never_crashes(seed):
    rng = random.Random(seed)
    for _ in range(5):
        text = random_attention(rng)
        for p in PIPELINES:
            r = subprocess.run([str(FA3_OPT), "-", "--mlir-print-op-on-diagnostic=false"] + p,
                               input=text.encode(), capture_output=True, timeout=120)
            crashed = (r.returncode < 0 or b"Stack dump" in r.stderr
                       or b"PLEASE submit" in r.stderr)
            assert not crashed, "fa3-opt %s crashed on:\n%s\n%s" % (
                " ".join(p), text, r.stderr.decode()[-2000:])
            if r.returncode != 0:
                assert b"error:" in r.stderr, "non-zero exit without a diagnostic"
