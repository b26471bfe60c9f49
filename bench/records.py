#!/usr/bin/env python3
"""Results of record: an append-only history and one current table.

Every run of the benchmark or the GPU checks is one line of `history.jsonl`
(a JSON object: id, kind, date, command and the run's data); the latest run
of record of each kind is a section of `RESULTS.md`, which that run
rewrites (the rest of the file is left as it is). In the repository:

    bench/history.jsonl, bench/RESULTS.md        bench, compare, autotune, ncu,
                                                 bench_varlen, bench_bwd,
                                                 bench_decode, bench_fp8
    test/gpu/history.jsonl, test/gpu/RESULTS.md  check_fwd, check_varlen,
                                                 check_bwd, check_decode, check_chunk,
                                                 check_fp8, check_quantize, memcheck,
                                                 racecheck, synccheck

Of record: a full bench_fwd grid (per dtype), a full check_fwd run, and each
compute-sanitizer run; partial grids, A/B comparisons and autotuning are
history only. What was measured and why: bench/NOTES.md.

On the GPU machine the scripts write into one directory (`$OUT` of
scripts/gpu-session.sh); back here

    python3 bench/records.py merge OUT_DIR

appends its history lines to the repository's histories (by kind; a line
whose id and kind are there already is skipped) and rewrites the sections
of record they bring.

    python3 bench/records.py sanitizer TOOL LOG OUT_DIR [--command CMD]

records a compute-sanitizer log of `check_fwd.py --sanitize` (gpu-session.sh
does this after each tool).
"""
import argparse
import datetime
import json
import math
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = "history.jsonl"
TABLE = "RESULTS.md"
SANITIZERS = ("memcheck", "racecheck", "synccheck")
# where each kind's history and table live in the repository
HOME = {"bench": "bench", "compare": "bench", "autotune": "bench", "ncu": "bench",
        "bench_varlen": "bench", "bench_bwd": "bench", "bench_decode": "bench",
        "bench_fp8": "bench", "check_fp8": "test/gpu", "check_quantize": "test/gpu",
        "check_fwd": "test/gpu", "check_varlen": "test/gpu", "check_decode": "test/gpu",
        "check_chunk": "test/gpu",
        "check_bwd": "test/gpu", **{t: "test/gpu" for t in SANITIZERS}}
TABLE_HEADER = ("# Results of record\n\n"
                "The latest run of record of each kind, rewritten by the script that ran it\n"
                "(`bench/records.py`); every run is a line of `history.jsonl` beside this file.\n"
                "What was measured and why: `bench/NOTES.md`.\n")


def run_id(when=None):
    """A run's id and date: local time as YYYY-MM-DDTHHMMSS."""
    return (when or datetime.datetime.now()).strftime("%Y-%m-%dT%H%M%S")


def new_entry(kind, command, date=None, **fields):
    """A history line: id (= date), kind, date, command, the session of
    scripts/gpu-session.sh ($FA3_SESSION) when set, then `fields`."""
    date = date or run_id()
    e = dict(id=date, kind=kind, date=date, command=command)
    if os.environ.get("FA3_SESSION"):
        e["session"] = os.environ["FA3_SESSION"]
    e.update(fields)
    return e


def _plain(x):
    """JSON without NaN/Infinity literals: non-finite floats as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def dumps(entry):
    return json.dumps(_plain(entry), ensure_ascii=False, allow_nan=False)


def append_history(directory, entry):
    """Appends `entry` as one line of DIRECTORY/history.jsonl."""
    if not entry.get("id") or not entry.get("kind"):
        raise ValueError("a history line needs an id and a kind")
    line = dumps(entry)
    path = Path(directory) / HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return path


def read_history(path):
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def _markers(key):
    return f"<!-- record: {key} -->", f"<!-- end: {key} -->"


def write_section(directory, key, text):
    """Rewrites section `key` of DIRECTORY/RESULTS.md (appended if absent;
    the file is created with a header if missing)."""
    path = Path(directory) / TABLE
    old = path.read_text(encoding="utf-8") if path.exists() else TABLE_HEADER
    begin, end = _markers(key)
    block = f"{begin}\n{text.strip()}\n{end}"
    i, j = old.find(begin), old.find(end)
    if i >= 0 and j > i:
        new = old[:i] + block + old[j + len(end):]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(path)
    return path


# The tables of record are the H200's: the issues' targets and the peers'
# numbers (FA3, cuDNN, FA2) were measured on it. A run on another GPU (the
# device tool may lend an H100) goes into the history only. Sanitizer runs
# name no GPU and are of record on any: they judge correctness, not speed.
RECORD_GPU = "H200"


def run_gpu(entry):
    """The GPU an entry names (at the top or in meta; sanitizer runs none), or None."""
    return entry.get("gpu") or (entry.get("meta") or {}).get("gpu")


def section_key(entry):
    """The RESULTS.md section a history line is of record for, or None."""
    kind = entry.get("kind")
    gpu = run_gpu(entry)
    if gpu and RECORD_GPU not in gpu:
        return None
    if kind == "bench" and entry.get("full"):
        return f"bench-{entry.get('meta', {}).get('dtype', 'bf16')}"
    if kind in ("check_fwd", "check_varlen", "check_bwd", "check_decode", "check_chunk",
                "bench_varlen",
                "bench_bwd", "bench_decode", "check_fp8", "bench_fp8",
                "check_quantize") and entry.get("full"):
        return kind
    if kind in SANITIZERS:
        return kind
    return None


def render(entry):
    kind = entry["kind"]
    if kind == "bench":
        return render_bench(entry)
    if kind in ("check_fwd", "check_varlen", "check_decode", "check_chunk"):
        return render_check(entry)
    if kind == "check_bwd":
        return render_check_bwd(entry)
    if kind == "bench_varlen":
        return render_bench_varlen(entry)
    if kind == "bench_bwd":
        return render_bench_bwd(entry)
    if kind == "bench_decode":
        return render_bench_decode(entry)
    if kind == "check_fp8":
        return render_check_fp8(entry)
    if kind == "bench_fp8":
        return render_bench_fp8(entry)
    if kind == "check_quantize":
        return render_check_quantize(entry)
    if kind in SANITIZERS:
        return render_sanitizer(entry)
    raise ValueError(f"no table for kind {kind!r}")


def record(directory, entry):
    """Appends `entry` to the history in `directory` and, if it is of
    record, rewrites its section of the table there. Returns the key of
    that section or None."""
    append_history(directory, entry)
    key = section_key(entry)
    if key:
        write_section(directory, key, render(entry))
    return key


# ---------------------------------------------------------------- tables

def _fmt(x, spec):
    if isinstance(x, str):  # a non-finite float as read back from the history
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec)


def _seqlen_label(s):
    return f"{s // 1024}k" if s >= 1024 and s % 1024 == 0 else str(s)


def hdim_label(r):
    """A row's head dim: D, or "D/Dv" where the value head dim differs."""
    d, dv = r["hdim"], r.get("hdim_v", r["hdim"])
    return d if dv == d else f"{d}/{dv}"


def hdim_order(label):
    """Sort key of hdim_label's values: by D, then Dv."""
    d, _, dv = str(label).partition("/")
    return (int(d), int(dv or d))


def render_bench(entry):
    """A bench_fwd run: ratio and TFLOP/s by hdim, mask and seqlen, then the
    cells with their times, errors and clocks."""
    meta, rows = entry["meta"], entry["rows"]
    rounds = meta.get("rounds", 1)
    dtype = meta.get("dtype", "bf16")
    fa3 = any("fa3_tflops" in r for r in rows)
    out = [f"## Forward benchmark, {dtype} (bench_fwd, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; {meta.get('timer')} "
           f"(warm-up {meta.get('warmup_ms')} ms, rep {meta.get('rep_ms')} ms)"
           + (f"; median of {rounds} rounds per cell (ours, cuDNN, FA2"
              + (", FA3" if fa3 else "") + " in turn)"
              if rounds > 1 else ""), "",
           f"Command: `{entry['command']}`", "",
           f"{dtype}, batch*seqlen = {meta.get('tokens', 16384)}, hidden "
           f"{meta.get('hidden', 2048)} (heads = hidden/hdim); TFLOP/s = 4*B*H*S*S*D / t "
           + ("(half for causal; 2*B*H*S*S*(D+Dv) / t for head dims D/Dv)."
              if any("hdim_v" in r for r in rows) else "(half for causal).")]
    seqlens = sorted({r["seqlen"] for r in rows})
    groups = sorted({(hdim_label(r), bool(r["causal"])) for r in rows},
                    key=lambda g: (hdim_order(g[0]), g[1]))
    cell = {(hdim_label(r), bool(r["causal"]), r["seqlen"]): r for r in rows}
    head = ["| hdim | mask | " + " | ".join(_seqlen_label(s) for s in seqlens) + " |",
            "|---|---|" + "---|" * len(seqlens)]

    def pivot(fn):
        lines = list(head)
        for d, c in groups:
            lines.append(f"| {d} | {'causal' if c else 'full'} | " + " | ".join(
                fn(cell.get((d, c, s), {})) for s in seqlens) + " |")
        return lines
    if fa3:
        out += ["", f"FlashAttention-3: {meta.get('fa3', '?')}.", "",
                "Ratio ours / FA3:", ""]
        out += pivot(lambda r: _fmt(r.get("ours_over_fa3"), ".2f"))
    out += ["", "Ratio ours / cuDNN:", ""]
    out += pivot(lambda r: _fmt(r.get("ours_over_cudnn"), ".2f"))
    out += ["", "TFLOP/s, ours (cuDNN, FA2" + (", FA3" if fa3 else "") + "):", ""]
    out += pivot(lambda r: f"{_fmt(r.get('ours_tflops'), '.0f')} "
                           f"({_fmt(r.get('cudnn_tflops'), '.0f')}, "
                           f"{_fmt(r.get('fa2_tflops'), '.0f')}"
                           + (f", {_fmt(r.get('fa3_tflops'), '.0f')})" if fa3 else ")"))
    out += ["", "Per cell (err = rel. L2 error vs cuDNN's output; SM MHz / W: median "
            "nvidia-smi samples while ours (cuDNN) ran):", "",
            "| hdim | causal | seqlen | B | H | ours TFLOP/s | cuDNN | FA2 | "
            + ("FA3 | " if fa3 else "") + "ours/cuDNN "
            "| ours ms | err ours | err FA2 | " + ("err FA3 | " if fa3 else "")
            + "SM MHz | W |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            + ("---|---|" if fa3 else "")]
    for r in rows:
        out.append(f"| {hdim_label(r)} | {int(r['causal'])} | {r['seqlen']} | {r['batch']} | "
                   f"{r['heads']} | {_fmt(r.get('ours_tflops'), '.0f')} | "
                   f"{_fmt(r.get('cudnn_tflops'), '.0f')} | {_fmt(r.get('fa2_tflops'), '.0f')} | "
                   + (f"{_fmt(r.get('fa3_tflops'), '.0f')} | " if fa3 else "") +
                   f"{_fmt(r.get('ours_over_cudnn'), '.2f')} | {_fmt(r.get('ours_ms'), '.3f')} | "
                   f"{_fmt(r.get('ours_rel_err_vs_cudnn'), '.1e')} | "
                   f"{_fmt(r.get('fa2_rel_err_vs_cudnn'), '.1e')} | "
                   + (f"{_fmt(r.get('fa3_rel_err_vs_cudnn'), '.1e')} | " if fa3 else "") +
                   f"{_fmt(r.get('ours_sm_mhz'), '.0f')} ({_fmt(r.get('cudnn_sm_mhz'), '.0f')}) | "
                   f"{_fmt(r.get('ours_power_w'), '.0f')} ({_fmt(r.get('cudnn_power_w'), '.0f')}) |")
    errs = [f"- {hdim_label(r)}/{int(r['causal'])}/{r['seqlen']}: {k}: {v}"
            for r in rows for k, v in r.items() if k.endswith("_error")]
    if errs:
        out += ["", "Errors:"] + errs
    return "\n".join(out) + "\n"


def check_counts(results, sass):
    """(cases passed, cases, failures including SASS checks)."""
    passed = sum(bool(r.get("ok")) for r in results)
    failures = len(results) - passed + sum(not s.get("ok", True) for s in sass.values())
    return passed, len(results), failures


def render_bench_varlen(entry):
    """A bench_varlen run: TFLOP/s of the fixed-length kernel, the varlen one
    on the same tokens and on random lengths, by hdim, mask and seqlen."""
    out = [f"## Variable-length prefill (bench_varlen, {entry['date']})", "",
           f"GPU: {entry.get('gpu')}", "", f"Command: `{entry['command']}`", "",
           "bf16, 16384 tokens, hidden 2048. TFLOP/s (median round): fixed = "
           "flash_attn_func on [B, S, H, D]; varlen = flash_attn_varlen_func on the "
           "same tokens as B sequences of S; ragged = random lengths in [S/2, 3S/2) "
           "filling the 16384 tokens (sequences in parentheses).", "",
           "| mask | hdim | seqlen | fixed | varlen | ragged | varlen / fixed |",
           "|---|---|---|---|---|---|---|"]
    for r in entry["rows"]:
        t = r["tflops"]
        out.append(f"| {'causal' if r['causal'] else 'full'} | {r['hdim']} | {r['seqlen']} | "
                   f"{t['fixed']:.0f} | {t['varlen']:.0f} | {t['ragged']:.0f} "
                   f"({r['ragged_seqs']}) | {r['ratio']:.2f} |")
    return "\n".join(out) + "\n"


def render_bench_bwd(entry):
    """A bench_bwd run: backward TFLOP/s (2.5 x the forward's FLOPs) of ours,
    cuDNN's and FlashAttention-2's through SDPA, by hdim, mask and seqlen;
    with --deterministic also our deterministic kernels' (det)."""
    det = any("det" in r["tflops"] for r in entry["rows"])
    fa3 = any("fa3" in r["tflops"] for r in entry["rows"])
    out = [f"## Backward (bench_bwd, {entry['date']})", "",
           f"GPU: {entry.get('gpu')}; {entry.get('meta', {}).get('dtype', 'bf16')}, "
           f"torch {entry.get('meta', {}).get('torch', '?')}", "",
           f"Command: `{entry['command']}`", "",
           "16384 tokens, hidden 2048. TFLOP/s (median round, FlashAttention's "
           "convention: 2.5 x the forward's FLOPs): ours = flash_attn_backward "
           "(its three kernels: _pre, the kernel, _post); cudnn and fa2 = SDPA's backward "
           "with that backend, same inputs, same process"
           + (f"; fa3 = FlashAttention-3's backward through its autograd function "
              f"({entry.get('meta', {}).get('fa3')})" if fa3 else "")
           + ("; det = flash_attn_backward(deterministic=True)." if det else "."), "",
           "| mask | hdim | seqlen | ours | cudnn | fa2 | ours / cudnn | ours / fa2 |"
           + (" fa3 | ours / fa3 |" if fa3 else "")
           + (" det | det / ours |" if det else ""),
           "|---|---|---|---|---|---|---|---|" + ("---|---|" if fa3 else "")
           + ("---|---|" if det else "")]
    for r in entry["rows"]:
        t = r["tflops"]
        peer = lambda p: _fmt(t.get(p), ".0f")
        ratio = lambda p: _fmt(t["ours"] / t[p] if t.get(p) else None, ".2f")
        out.append(f"| {'causal' if r['causal'] else 'full'} | {r['hdim']} | {r['seqlen']} | "
                   f"{t['ours']:.0f} | {peer('cudnn')} | {peer('fa2')} | {ratio('cudnn')} | "
                   f"{ratio('fa2')} |"
                   + (f" {peer('fa3')} | {ratio('fa3')} |" if fa3 else "")
                   + (f" {peer('det')} | {_fmt(t['det'] / t['ours'] if t.get('det') else None, '.2f')} |"
                      if det else ""))
    return "\n".join(out) + "\n"


# bench_decode's target: 80 % of the H200's 4.25 TB/s where the K + V read
# is at least 256 MB (smaller reads are dominated by the launch and the merge)
DECODE_TARGET_TBS = 0.8 * 4.25
DECODE_TARGET_MIN_BYTES = 256 * 2**20


def decode_target_met(row):
    """True / False for a bench_decode cell the target applies to (K + V
    read >= 256 MB), None for the others."""
    if row.get("kv_bytes", 0) < DECODE_TARGET_MIN_BYTES:
        return None
    tbs = row.get("ours_tbs")
    return isinstance(tbs, (int, float)) and tbs >= DECODE_TARGET_TBS


def render_bench_decode(entry):
    """A bench_decode run: per cell (heads, batch, context) ours and PyTorch
    SDPA's best backend, time and K + V bandwidth, against the target."""
    meta, rows = entry.get("meta", {}), entry["rows"]
    hit = [decode_target_met(r) for r in rows]
    judged = [h for h in hit if h is not None]
    out = [f"## Decoding (bench_decode, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; {meta.get('dtype', 'bf16')}, "
           f"head dim {meta.get('hdim', 128)}, Sq = 1; kernel `{meta.get('kernel')}`", "",
           f"Command: `{entry['command']}`", "",
           "Time per call (us): the median over rounds of CUDA-graph replays of back-to-back "
           "calls, each call on its own copy of the cache where one cache fits in L2 "
           f"({meta.get('timer', 'CUDA graph')}). Bandwidth = K + V bytes of the cache "
           "(B x context x Hkv x (D + Dv) x 2) / time. Ours: flash_attn_with_kvcache with "
           "the heuristic's splits; SDPA: torch.nn.functional.scaled_dot_product_attention "
           "on the same cache (BHSD views), its fastest backend of those tried (named; "
           "'exp.': K/V expanded to the q heads, which SDPA then reads). Target: "
           f">= {DECODE_TARGET_TBS:.2f} TB/s (80 % of 4.25) where the K + V read is >= "
           f"256 MB: met in {sum(judged)}/{len(judged)} such cells.", "",
           "| Hq/Hkv | batch | context | K+V MB | splits | ours us | ours TB/s | SDPA us "
           "(backend) | SDPA TB/s | SDPA / ours | target |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, h in zip(rows, hit):
        ctx = r["context"]
        ctx_s = f"{ctx // 1024}k" if ctx % 1024 == 0 else str(ctx)
        sd = r.get("sdpa_us")
        out.append(f"| {r['hq']}/{r['hkv']} | {r['batch']} | {ctx_s} | "
                   f"{r['kv_bytes'] / 2**20:.0f} | {_fmt(r.get('splits'), 'd')} | "
                   f"{_fmt(r.get('ours_us'), '.1f')} | {_fmt(r.get('ours_tbs'), '.2f')} | "
                   f"{_fmt(sd, '.1f')} ({r.get('sdpa_backend') or '-'}) | "
                   f"{_fmt(r.get('sdpa_tbs'), '.2f')} | "
                   f"{_fmt(sd / r['ours_us'] if sd and r.get('ours_us') else None, '.2f')} | "
                   f"{'-' if h is None else ('yes' if h else '**no**')} |")
    skipped = meta.get("skipped") or []
    if skipped:
        out += ["", "Skipped (K + V cache over the memory limit): " + ", ".join(skipped) + "."]
    errs = [f"- {r['hq']}/{r['hkv']} B={r['batch']} ctx={r['context']}: {k}: {v}"
            for r in rows for k, v in (r.get("errors") or {}).items()]
    if errs:
        out += ["", "Errors:"] + errs
    return "\n".join(out) + "\n"


def render_check_quantize(entry):
    """A check_quantize run: counts, per head dim its cases and worst
    errors, the end-to-end RMSEs, and every failed case."""
    meta, results = entry["meta"], entry["results"]
    nfail = sum(not r.get("ok") for r in results)
    out = [f"## FP8 quantization kernel (check_quantize, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; kernels: "
           f"`{meta.get('kernel_dir')}`; seed {meta.get('seed')}", "",
           f"Command: `{entry['command']}`", "",
           "Bounds: every byte and descale written; without the rotation bit for bit the "
           "torch path's; with it the descale within "
           f"{meta.get('descale_rel_tol')} (relative) of the float64 rotation's amax / 448, "
           "each element within e4m3's half ulp + that much of the amax; end to end (FP8 "
           f"attention) the RMSE within {meta.get('rmse_ratio')}x + 1e-4 of the torch path's.",
           "", f"**{len(results) - nfail}/{len(results)} cases passed.**", "",
           "| head dim | cases passed | max rel err descale | max err / bound | RMSE o: kernel "
           "quantization | RMSE o: torch quantization |", "|---|---|---|---|---|---|"]

    def worst(rs, key, fmt=".2e"):
        xs = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
        return _fmt(max(xs), fmt) if xs else "-"
    for d in sorted({r.get("head_dim") for r in results if r.get("head_dim") is not None}):
        rs = [r for r in results if r.get("head_dim") == d]
        out.append(f"| {d} | {sum(bool(r.get('ok')) for r in rs)}/{len(rs)} | "
                   f"{worst(rs, 'max_rel_err_descale')} | {worst(rs, 'max_err_over_bound', '.3f')} "
                   f"| {worst(rs, 'rmse_kernel')} | {worst(rs, 'rmse_torch')} |")
    bad = [r for r in results if not r.get("ok")]
    if bad:
        out += ["", "Failed:"] + [f"- {r}" for r in bad]
    return "\n".join(out) + "\n"


def render_check(entry):
    """A check_fwd run: counts, per kernel its cases and worst errors beside
    its SASS checks, and every failed case."""
    meta, results, sass = entry["meta"], entry["results"], entry.get("sass", {})
    passed, total, nfail = check_counts(results, sass)
    out = [f"## GPU correctness ({entry['kind']}, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; kernels: "
           f"`{meta.get('kernel_dir')}`"
           + ("" if meta.get("seed") is None else f"; seed {meta['seed']}"), "",
           f"Command: `{entry['command']}`", "",
           f"Bounds: rel. error of o < {meta.get('o_rel_tol')}, max abs. error of lse < "
           f"{meta.get('lse_abs_tol')}; rows with no visible key: o = 0, lse = -inf; the "
           "same inputs give bit-identical outputs.", "",
           f"**{passed}/{total} cases passed; {nfail} failure(s) in total** "
           "(SASS checks included).", "",
           "| kernel | cases passed | max rel err o | max err lse | HGMMA in SASS | LDL/STL "
           "| loop wgmma batch (HGMMA in instructions) | exp2 beside P V |",
           "|---|---|---|---|---|---|---|---|"]
    kernels = list(dict.fromkeys([r["kernel"] for r in results] + list(sass)))

    def worst(rs, key):
        xs = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
        return _fmt(max(xs), ".2e") if xs else "-"
    for k in kernels:
        rs = [r for r in results if r["kernel"] == k]
        s = sass.get(k, {})
        out.append(f"| {k} | {sum(bool(r.get('ok')) for r in rs)}/{len(rs)} | "
                   f"{worst(rs, 'rel_err_o')} | {worst(rs, 'max_abs_err_lse')} | "
                   f"{_fmt(s.get('hgmma'), 'd')} | {_fmt(s.get('local_mem_insts'), 'd')} | "
                   f"{s.get('loop_batch') or '-'} | {s.get('exp2_beside_pv') or '-'} |")
    bad = [r for r in results if not r.get("ok")]
    bad_sass = {k: s for k, s in sass.items() if not s.get("ok", True)}
    if bad or bad_sass:
        out += ["", "Failures:"]
        out += [f"- {r['kernel']}: {r['case']} ({r.get('layout')}, B={r.get('B')} "
                f"Sq={r.get('Sq')} Skv={r.get('Skv')} Hq={r.get('Hq')} Hkv={r.get('Hkv')})"
                + (f": {r['error']}" if r.get("error") else "") for r in bad]
        out += [f"- {k}: SASS check: {json.dumps(s)}" for k, s in bad_sass.items()]
    return "\n".join(out) + "\n"


def render_check_bwd(entry):
    """A check_bwd run: counts, per kernel its cases and, for dq, dk and dv,
    the largest error over FlashAttention's bound (2 x PyTorch's own error in
    the dtype + 1e-3: below 1 passes), and every failed case."""
    meta, results = entry["meta"], entry["results"]
    passed, total, nfail = check_counts(results, {})
    out = [f"## GPU correctness, backward (check_bwd, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; kernels: "
           f"`{meta.get('kernel_dir')}`" + ("" if meta.get("seed") is None
                                           else f"; seed {meta['seed']}")
           + ("; **emulated** (PyTorch math for the kernel)" if meta.get("emulated") else ""),
           "", f"Command: `{entry['command']}`", "",
           f"Rule: {meta.get('rule')}; dk, dv bit-identical on a repeat; no NaN left.", "",
           f"**{passed}/{total} cases passed; {nfail} failure(s).**", "",
           "| kernel | cases passed | forward | err/bound dq | err/bound dk | err/bound dv "
           "| max dq change on repeat |", "|---|---|---|---|---|---|---|"]

    def worst(rs, g):
        xs = [r[f"err_{g}"] / (2 * r[f"err_pt_{g}"] + 1e-3) for r in rs
              if isinstance(r.get(f"err_{g}"), (int, float))
              and isinstance(r.get(f"err_pt_{g}"), (int, float))]
        return _fmt(max(xs), ".2f") if xs else "-"
    for k in dict.fromkeys(r["kernel"] for r in results):
        rs = [r for r in results if r["kernel"] == k]
        fwd = sorted({r["fwd"] for r in rs if r.get("fwd")})
        rep = [r["repeat_dq_max_diff"] for r in rs
               if isinstance(r.get("repeat_dq_max_diff"), (int, float))]
        out.append(f"| {k} | {sum(bool(r.get('ok')) for r in rs)}/{len(rs)} | "
                   f"{', '.join(fwd) or '-'} | {worst(rs, 'dq')} | {worst(rs, 'dk')} | "
                   f"{worst(rs, 'dv')} | {_fmt(max(rep), '.1e') if rep else '-'} |")
    bad = [r for r in results if not r.get("ok")]
    if bad:
        out += ["", "Failures:"]
        out += [f"- {r['kernel']}: {r['case']}"
                + (f" (B={r.get('B')} Sq={r.get('Sq')} Skv={r.get('Skv')} Hq={r.get('Hq')} "
                   f"Hkv={r.get('Hkv')})" if r.get("Sq") is not None else "")
                + (f": {r.get('error') or r.get('message')}"
                   if r.get("error") or r.get("message") else "") for r in bad]
    return "\n".join(out) + "\n"


def render_check_fp8(entry):
    """A check_fp8 run: counts, per FP8 kernel its cases and worst errors
    (rel. error of o, the largest z = |o - ref| / sigma of P's e4m3
    rounding, lse) beside its SASS check, every failed case, then the
    accuracy table of FlashAttention-3's outlier test."""
    meta, results = entry["meta"], entry["results"]
    sass, paper = entry.get("sass", {}), entry.get("paper", [])
    passed, total, nfail = check_counts(results, sass)
    nfail += sum(not r.get("ok") for r in paper)
    out = [f"## GPU correctness, FP8 (check_fp8, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; kernels: "
           f"`{meta.get('kernel_dir')}`"
           + ("" if meta.get("seed") is None else f"; seed {meta['seed']}"), "",
           f"Command: `{entry['command']}`", "",
           f"Reference: float64 attention of the dequantized e4m3 inputs. Bounds: rel. error "
           f"of o < {meta.get('o_rel_tol')}; z = |o - ref| / sigma <= {meta.get('z_max')} "
           "elementwise (sigma: the error that rounding P to e4m3 gives o); error of lse <= "
           f"{meta.get('lse_abs_tol')} + {meta.get('lse_acc_rel')} x the row's largest "
           "scale * sum |q| |k| (FP8 accumulation); no NaN left; rows with no visible key: o = 0, "
           "lse = -inf; the same inputs give bit-identical outputs. max err/max|ref| and the "
           "error of torch emulating the kernel's math (emul.) for scale.", "",
           f"**{passed}/{total} cases passed; {nfail} failure(s) in total** "
           "(SASS checks and accuracy rows included).", "",
           "| kernel | cases passed | max rel err o | emul. | max z | max err/max abs ref "
           "| max err lse | GMMA (e4m3) | LDL/STL |",
           "|---|---|---|---|---|---|---|---|---|"]
    kernels = list(dict.fromkeys([r["kernel"] for r in results] + list(sass)))

    def worst(rs, key, spec=".2e"):
        xs = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
        return _fmt(max(xs), spec) if xs else "-"
    for k in kernels:
        rs = [r for r in results if r["kernel"] == k]
        s = sass.get(k, {})
        out.append(f"| {k} | {sum(bool(r.get('ok')) for r in rs)}/{len(rs)} | "
                   f"{worst(rs, 'rel_err_o')} | {worst(rs, 'rel_err_o_emul')} | "
                   f"{worst(rs, 'max_z', '.2f')} | {worst(rs, 'max_abs_err_rel')} | "
                   f"{worst(rs, 'max_abs_err_lse')} | {_fmt(s.get('hgmma'), 'd')} "
                   f"({_fmt(s.get('hgmma_e4m3'), 'd')}) | {_fmt(s.get('local_mem_insts'), 'd')} |")
    bad = [r for r in results if not r.get("ok")]
    bad_sass = {k: s for k, s in sass.items() if not s.get("ok", True)}
    if bad or bad_sass:
        out += ["", "Failures:"]
        out += [f"- {r['kernel']}: {r['case']} ({r.get('mode')}, B={r.get('B')} "
                f"Sq={r.get('Sq')} Skv={r.get('Skv')} Hq={r.get('Hq')} Hkv={r.get('Hkv')})"
                + (f": {r.get('error') or r.get('message')}"
                   if r.get("error") or r.get("message") else "") for r in bad]
        out += [f"- {k}: SASS check: {json.dumps(s)}" for k, s in bad_sass.items()]
    if paper:
        size = meta.get("paper_size", {})
        out += ["", "FlashAttention-3's accuracy test (section 4.3): Q, K, V ~ N(0, 1) plus "
                "N(0, 100) on 0.1 % of the entries; RMSE of o against float64 attention of "
                f"the unquantized inputs; B {size.get('B')}, H {size.get('H')}, S "
                f"{size.get('S')}, non-causal. Emulation: torch on the same quantized inputs "
                "with P rounded to e4m3 (the kernel must be within "
                f"{meta.get('emul_ratio')}x of it). Paper: its reported RMSE for the method.",
                "", "| hdim | method | RMSE ours | RMSE emulation | paper |",
                "|---|---|---|---|---|"]
        for r in paper:
            out.append(f"| {r['hdim']} | {r['method']} | {_fmt(r.get('rmse'), '.2e')} | "
                       f"{_fmt(r.get('rmse_emul'), '.2e')} | {_fmt(r.get('paper'), '.1e')} |"
                       + ("" if r.get("ok", True) else " **fail**"))
        notes = [f"- {r['hdim']} {r['method']}: {r.get('error') or r.get('note')}"
                 for r in paper if r.get("error") or r.get("note")]
        if notes:
            out += [""] + notes
    return "\n".join(out) + "\n"


def render_bench_fp8(entry):
    """A bench_fp8 run: FP8 TFLOP/s beside our bf16 kernel's (same run,
    same shapes) and FlashAttention-3's FP8, the target: timed in the run
    where it was importable (bench/peer_fa3.py), else bench_fp8's
    FA3_FP8_TFLOPS; by hdim, mask and seqlen."""
    meta, rows = entry.get("meta", {}), entry["rows"]
    live = any(r.get("fa3_live") for r in rows)  # FA3 timed (or tried) in the run
    out = [f"## Forward benchmark, FP8 e4m3 (bench_fp8, {entry['date']})", "",
           f"GPU: {meta.get('gpu')}; torch {meta.get('torch')}; {meta.get('timer')} "
           f"(warm-up {meta.get('warmup_ms')} ms, rep {meta.get('rep_ms')} ms)", "",
           f"Command: `{entry['command']}`", "",
           f"batch*seqlen = {meta.get('tokens', 16384)}, hidden {meta.get('hidden', 2048)} "
           "(heads = hidden/hdim); TFLOP/s = 4*B*H*S*S*D / t (half for causal). fp8: "
           "flash_attn_func on e4m3 q, k, v with "
           + {"head": "[B, H] descales", "block": "block descales [B, H, S/128]",
              "none": "no descales"}.get(meta.get("descale", "head"), "descales")
           + " (o bf16); bf16: our bf16 "
           "kernel on the same shapes; FA3: FlashAttention-3's FP8 forward "
           + (f"timed in this run on the same inputs ({meta.get('fa3')}; '-' where it "
              "failed: Errors below)" if live else
              "measured on this GPU (shared/DESIGN.md; '-' where not measured)")
           + ", the target.", "",
           "| hdim | mask | seqlen | fp8 TFLOP/s | bf16 | fp8 / bf16 | FA3 fp8 "
           + ("(same run) " if live else "(target) ") +
           "| fp8 / FA3 | fp8 ms | err vs bf16 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r.get("fa3_fp8_tflops")
        out.append(f"| {r['hdim']} | {'causal' if r['causal'] else 'full'} | "
                   f"{_seqlen_label(r['seqlen'])} | {_fmt(r.get('fp8_tflops'), '.0f')} | "
                   f"{_fmt(r.get('bf16_tflops'), '.0f')} | "
                   f"{_fmt(r.get('fp8_over_bf16'), '.2f')} | {_fmt(t, '.0f')} | "
                   f"{_fmt(r['fp8_tflops'] / t if t and r.get('fp8_tflops') else None, '.2f')}"
                   f" | {_fmt(r.get('fp8_ms'), '.3f')} | "
                   f"{_fmt(r.get('fp8_rel_err_vs_bf16'), '.1e')} |")
    errs = [f"- {r['hdim']}/{int(r['causal'])}/{r['seqlen']}: {k}: {v}"
            for r in rows for k, v in r.items() if k.endswith("_error")]
    if errs:
        out += ["", "Errors:"] + errs
    return "\n".join(out) + "\n"


SUMMARY_RE = re.compile(r"^========= (ERROR|RACECHECK) SUMMARY: .*$", re.M)


def parse_sanitizer_log(text):
    """The facts of a `compute-sanitizer ... check_*.py --sanitize` log:
    seed, kernels, cases passed / run, the failed cases, the tool's summary
    line and its reports (its other `=========` lines, at most 200).
    check_fwd and check_bwd print `seed N; K kernel(s): names` and a JSON
    object per case; check_varlen and check_decode `seed N; K kernel(s)`,
    `== name: ...` per kernel and `PASS case: facts` per case."""
    res = dict(seed=None, kernels=[], passed=0, total=0, failures=[], summary=None,
               reports=[])
    m = re.search(r"^seed (\d+); \d+ kernel\(s\)(?:: (.*))?$", text, re.M)
    if m:
        res["seed"] = int(m.group(1))
        res["kernels"] = [k.strip() for k in (m.group(2) or "").split(",") if k.strip()]
    named = not res["kernels"]
    for line in text.splitlines():
        km = re.match(r"^== (\S+): ", line)
        if named and km:
            res["kernels"].append(km.group(1))
        elif line.startswith(("PASS ", "FAIL ")):
            res["total"] += 1
            if line.startswith("PASS"):
                res["passed"] += 1
            else:
                try:
                    res["failures"].append(json.loads(line[5:]))
                except ValueError:
                    res["failures"].append(line[5:])
        elif (line.startswith("=========") and not SUMMARY_RE.match(line)
              and line.strip() not in ("=========", "========= COMPUTE-SANITIZER")
              and len(res["reports"]) < 200):
            res["reports"].append(line)
    m = SUMMARY_RE.search(text)
    res["summary"] = m.group(0) if m else None
    m = re.search(r"^check_fwd: .*$", text, re.M)
    res["check_fwd"] = m.group(0) if m else None
    return res


def sanitizer_clean(entry):
    s = entry.get("summary") or ""
    return (entry.get("total", 0) > 0 and entry.get("passed") == entry.get("total")
            and (s.endswith("SUMMARY: 0 errors") or "SUMMARY: 0 hazards" in s))


def render_sanitizer(entry):
    tool = entry["kind"]
    out = [f"## compute-sanitizer {tool} ({entry['date']})", "",
           f"Command: `{entry.get('command') or '(not recorded)'}`", "",
           f"{len(entry.get('kernels', []))} kernel(s), {entry.get('passed')}/"
           f"{entry.get('total')} cases passed; `{entry.get('summary') or 'no summary line'}`"
           f" ({'clean' if sanitizer_clean(entry) else '**not clean**'})."]
    if entry.get("failures"):
        out += ["", "Failed cases:"] + [
            f"- {f.get('kernel')}: {f.get('case')}" if isinstance(f, dict) else f"- {f}"
            for f in entry["failures"]]
    if entry.get("reports"):
        out += ["", "Reports (first lines):", "", "```"] + entry["reports"][:20] + ["```"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- commands

def history_keys(out_dir):
    """The (id, kind) of every run in out_dir's history: a run's key."""
    return {(x.get("id"), x.get("kind")) for x in read_history(Path(out_dir) / HISTORY)}


def sanitizer_entry(tool, text, command=None, kernel_dir=None, date=None):
    if tool not in SANITIZERS:
        raise ValueError(f"tool is one of {', '.join(SANITIZERS)}, got {tool!r}")
    return new_entry(tool, command, date, kernel_dir=kernel_dir, **parse_sanitizer_log(text))


def record_sanitizer(out_dir, tool, log, command=None, kernel_dir=None, date=None):
    """Records compute-sanitizer's log `log` (a path) in out_dir. Its id
    and date are the run's: `date`, else the log's modification time (logs
    recorded together after a GPU session would otherwise share the
    recording's second). A run already in out_dir's history (same id and
    tool) is refused: two runs may not share an id."""
    log = Path(log)
    date = date or run_id(datetime.datetime.fromtimestamp(log.stat().st_mtime))
    e = sanitizer_entry(tool, log.read_text(errors="replace"), command, kernel_dir, date)
    if (e["id"], e["kind"]) in history_keys(out_dir):
        raise ValueError(f"{Path(out_dir) / HISTORY} already has a {tool} run {e['id']} "
                         f"(the log's time): give this run's own with --date")
    record(out_dir, e)
    return e


def merge(out_dir, root=ROOT):
    """Appends OUT_DIR/history.jsonl to the repository's histories and
    rewrites the sections of record it brings. Returns (added, skipped)."""
    added, skipped = [], []
    seen = {}
    for e in read_history(Path(out_dir) / HISTORY):
        home = HOME.get(e.get("kind"))
        if home is None:
            raise ValueError(f"unknown kind {e.get('kind')!r} in {out_dir}/{HISTORY}")
        dest = Path(root) / home
        if dest not in seen:
            seen[dest] = history_keys(dest)
        if (e.get("id"), e["kind"]) in seen[dest]:
            skipped.append(e)
            continue
        record(dest, e)
        seen[dest].add((e["id"], e["kind"]))
        added.append(e)
    return added, skipped


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="fold a GPU session's OUT_DIR into the repository")
    m.add_argument("out_dir")
    m.add_argument("--root", default=str(ROOT), help="repository root (default: this one)")
    s = sub.add_parser("sanitizer", help="record a compute-sanitizer log")
    s.add_argument("tool", choices=SANITIZERS)
    s.add_argument("log")
    s.add_argument("out_dir")
    s.add_argument("--command", default=None)
    s.add_argument("--kernel-dir", default=None)
    s.add_argument("--date", default=None,
                   help="the run's id and date, YYYY-MM-DDTHHMMSS (default: the log's "
                        "modification time)")
    a = ap.parse_args(argv)
    if a.cmd == "merge":
        added, skipped = merge(a.out_dir, a.root)
        for e in added:
            key = section_key(e)
            print(f"added {e['kind']} {e['id']} to {HOME[e['kind']]}/{HISTORY}"
                  + (f" (RESULTS.md: {key})" if key else ""))
        for e in skipped:
            print(f"already there: {e['kind']} {e['id']}")
        return 0
    try:
        e = record_sanitizer(a.out_dir, a.tool, a.log, a.command, a.kernel_dir, a.date)
    except ValueError as err:
        print(f"records.py sanitizer: {err}", file=sys.stderr)
        return 2
    print(f"{a.tool}: {e['passed']}/{e['total']} cases passed; {e['summary']}")
    return 0 if sanitizer_clean(e) else 1


if __name__ == "__main__":
    sys.exit(main())
