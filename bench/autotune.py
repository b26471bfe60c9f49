#!/usr/bin/env python3
"""Search the legal tile / pipeline space of one attention variant and record
the fastest configuration on the GPU.

Two steps, since the GPU machine has no MLIR:

  1. here (CPU):   python3 bench/autotune.py compile --head-dim 128 [--causal]
                       -o gpu-kernels/tune-d128
     compiles every combination of --block-m, --block-n, --stages,
     --pingpong, --q-buffers, --lazy-rescale and (FP8) --transpose-warps
     with build/bin/fa3-compile
     into one directory per candidate, and keeps those that compile, fit in
     shared memory, assemble with no spills (ptxas -v, when ptxas is found)
     and differ from every candidate kept before (an option that does not
     apply, e.g. ping-pong with three consumer warpgroups, gives the same
     kernel);
  2. on the GPU:   python3 bench/autotune.py run gpu-kernels/tune-d128
                       [--seqlens 1024,16384] [--rounds 3]
     times the candidates with bench/compare_fwd.py (interleaved per cell,
     beside cuDNN, outputs checked), prints every candidate's TFLOP/s per
     seqlen, the winner per seqlen and overall (geometric mean over the
     seqlens), and appends them to <results-dir>/history.jsonl (default:
     bench/; bench/records.py).

The defaults the compiler uses per head dim came from such measurements
(bench/NOTES.md); a winner here is a candidate for a new default, to be
confirmed by an A/B run over the whole grid.
"""
import argparse
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import records  # noqa: E402


# fa3-compile's flags for each --lazy-rescale value
LAZY_FLAGS = {"auto": [], "on": ["--lazy-rescale"], "off": ["--no-lazy-rescale"]}


def parse_list(text, cast=int):
    return [cast(x) for x in text.split(",") if x != ""]


def compile_step(a):
    compiler = a.fa3_compile or str(ROOT / "build" / "bin" / "fa3-compile")
    if not Path(compiler).exists():
        sys.exit(f"autotune: {compiler} not found (build first: bash scripts/setup.sh)")
    sys.path.insert(0, str(ROOT / "python"))
    from fa3.compile import find_ptxas  # the compiler's own ptxas lookup
    ptxas = find_ptxas()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    base = ["--head-dim", str(a.head_dim), "--dtype", a.dtype] + (["--causal"] if a.causal else [])
    lazy = parse_list(a.lazy_rescale, str)
    bad = set(lazy) - set(LAZY_FLAGS)
    if bad:
        sys.exit(f"autotune: --lazy-rescale takes auto, on, off; got {','.join(sorted(bad))}")
    transposers = parse_list(a.transpose_warps)
    if set(transposers) - {0, 3, 4}:
        sys.exit(f"autotune: --transpose-warps takes 0, 3, 4; got {a.transpose_warps}")
    if transposers != [0] and a.dtype != "e4m3":
        sys.exit("autotune: --transpose-warps applies to FP8 (--dtype e4m3) only")
    space = itertools.product(parse_list(a.block_m), parse_list(a.block_n),
                              parse_list(a.stages), parse_list(a.pingpong),
                              parse_list(a.q_buffers), lazy, transposers)
    kept, rejected = [], []
    seen = {}  # PTX digest -> label of the candidate kept with it
    for bm, bn, st, pp, qb, lr, tw in space:
        label = (f"m{bm}_" if bm else "") + f"n{bn}_s{st}_pp{pp}_q{qb}" \
            + ("" if lr == "auto" else f"_lr{lr}") + (f"_t{tw}" if tw else "")
        d = out / label
        if d.exists():
            shutil.rmtree(d)
        cmd = [compiler, *base, "--block-m", str(bm), "--block-n", str(bn),
               "--stages", str(st), "--q-buffers", str(qb)] \
            + ([] if pp else ["--no-pingpong"]) + LAZY_FLAGS[lr] \
            + (["--transpose-warps", str(tw)] if tw else []) + ["-o", str(d)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            why = next((l for l in p.stderr.splitlines() if "error" in l), p.stderr.strip())
            rejected.append(dict(label=label, why=why[-200:]))
            shutil.rmtree(d, ignore_errors=True)
            continue
        spills = None
        if ptxas:
            for ptx in d.glob("*.ptx"):
                v = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(ptx), "-o", os.devnull],
                                   capture_output=True, text=True).stderr
                m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", v)
                spills = int(m.group(1)) + int(m.group(2)) if m else None
        if spills:
            rejected.append(dict(label=label, why=f"{spills} bytes of spills"))
            shutil.rmtree(d, ignore_errors=True)
            continue
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(d.glob("*.ptx"))))
        twin = seen.setdefault(digest.hexdigest(), label)
        if twin != label:
            rejected.append(dict(label=label, why=f"the same kernel as {twin}"))
            shutil.rmtree(d, ignore_errors=True)
            continue
        kept.append(dict(label=label, dir=label, block_m=bm, block_n=bn, stages=st,
                         pingpong=bool(pp), q_buffers=qb, lazy_rescale=lr,
                         transpose_warps=tw))
    meta = dict(head_dim=a.head_dim, dtype=a.dtype, causal=a.causal,
                command="python3 " + " ".join(sys.argv), spills_checked=bool(ptxas))
    (out / "candidates.json").write_text(json.dumps(dict(meta=meta, candidates=kept,
                                                         rejected=rejected), indent=1))
    print(f"{len(kept)} candidate(s) in {out}, {len(rejected)} rejected")
    for r in rejected:
        print(f"  rejected {r['label']}: {r['why']}")
    return 0 if kept else 1


def run_step(a):
    tune = Path(a.dir)
    cand = json.loads((tune / "candidates.json").read_text())
    meta, kept = cand["meta"], cand["candidates"]
    if not kept:
        sys.exit("autotune: no candidates")
    tmp = Path(tempfile.mkdtemp(prefix="autotune-"))
    cmd = [sys.executable, str(ROOT / "bench" / "compare_fwd.py"),
           "--hdim", str(meta["head_dim"]), "--causal", "1" if meta["causal"] else "0",
           "--dtype", meta.get("dtype", "bf16"),
           "--seqlens", a.seqlens, "--results-dir", str(tmp)]
    for c in kept:
        cmd += ["--variant", f"{c['label']}={tune / c['dir']}"]
    for _ in range(a.rounds):
        if subprocess.run(cmd).returncode != 0:
            sys.exit("autotune: compare_fwd failed")
    runs = [e for e in records.read_history(tmp / records.HISTORY) if e["kind"] == "compare"]
    seqlens = parse_list(a.seqlens)
    # per candidate and seqlen: the median over the rounds
    table = {c["label"]: {} for c in kept}
    cudnn = {}
    for S in seqlens:
        rows = [r for run in runs for r in run["rows"] if r["seqlen"] == S]
        cudnn[S] = sorted(r["cudnn_tflops"] for r in rows)[len(rows) // 2]
        for c in kept:
            xs = sorted(r[f"{c['label']}_tflops"] for r in rows if f"{c['label']}_tflops" in r)
            table[c["label"]][S] = xs[len(xs) // 2] if xs else None

    def gmean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs and all(xs) else 0.0
    overall = {k: gmean([v[S] for S in seqlens]) for k, v in table.items()}
    best = max(overall, key=overall.get)
    date = records.run_id()
    res = dict(meta=dict(meta, date=date, gpu=runs[0]["meta"]["gpu"], rounds=a.rounds,
                         command="python3 " + " ".join(sys.argv)),
               candidates=kept, tflops=table, cudnn=cudnn, overall_gmean=overall,
               winner=best,
               winner_per_seqlen={S: max(table, key=lambda k: table[k][S] or 0)
                                  for S in seqlens})
    records.record(a.results_dir, records.new_entry("autotune", res["meta"]["command"], date,
                                                    **res))
    mask = "causal" if meta["causal"] else "full"
    md = [f"# autotune {date}", "", f"GPU: {res['meta']['gpu']}; head dim {meta['head_dim']}, "
          f"{meta['dtype']}, {mask}; median of {a.rounds} compare_fwd round(s)", "",
          f"Command: `{res['meta']['command']}`", "",
          "| candidate | " + " | ".join(str(S) for S in seqlens) + " | geo. mean |",
          "|---" * (len(seqlens) + 2) + "|",
          "| cuDNN | " + " | ".join(f"{cudnn[S]:.0f}" for S in seqlens) + " | "
          f"{gmean([cudnn[S] for S in seqlens]):.0f} |"]
    for k in sorted(table, key=lambda k: -overall[k]):
        md.append(f"| {k}{' (winner)' if k == best else ''} | "
                  + " | ".join("-" if table[k][S] is None else f"{table[k][S]:.0f}"
                               for S in seqlens) + f" | {overall[k]:.0f} |")
    md += ["", "Winner per seqlen: " + ", ".join(f"{S}: {w}" for S, w in
                                                 res["winner_per_seqlen"].items())]
    print("\n".join(md))
    print(f"appended to {Path(a.results_dir) / records.HISTORY}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    c = sub.add_parser("compile", help="compile the candidates (CPU machine)")
    c.add_argument("--head-dim", type=int, required=True)
    c.add_argument("--dtype", default="bf16")
    c.add_argument("--causal", action="store_true")
    c.add_argument("--block-m", default="0", help="0 (per head dim), 128, 192")
    c.add_argument("--block-n", default="64,96,128,160,176,192")
    c.add_argument("--stages", default="2,3,4")
    c.add_argument("--pingpong", default="1", help="1, 0 or 1,0")
    c.add_argument("--q-buffers", default="0", help="0 (per head dim), 1, 2")
    c.add_argument("--lazy-rescale", default="auto", help="auto (per head dim), on, off")
    c.add_argument("--transpose-warps", default="0",
                   help="FP8: V's transposer warps, 0 (per head dim), 3, 4 or a list")
    c.add_argument("--fa3-compile", default=None, help="default: build/bin/fa3-compile")
    c.add_argument("-o", "--out", required=True)
    r = sub.add_parser("run", help="time the candidates (GPU machine)")
    r.add_argument("dir")
    r.add_argument("--seqlens", default="1024,16384")
    r.add_argument("--rounds", type=int, default=1)
    r.add_argument("--results-dir", default=str(ROOT / "bench"),
                   help="where history.jsonl is (default: bench/)")
    a = ap.parse_args(argv)
    return compile_step(a) if a.step == "compile" else run_step(a)


if __name__ == "__main__":
    sys.exit(main())
