"""bench/records.py: the append-only histories and the tables of record that
bench_fwd, compare_fwd, autotune, check_fwd and gpu-session.sh write (CPU
only: the entries are the ones those scripts build on the GPU machine)."""

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import records  # noqa: E402

SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]


def bench_entry(date, tflops=600.0, dtype="bf16", full=True, hdims=(64, 128)):
    rows = []
    for d in hdims:
        for causal in (False, True):
            for s in SEQLENS:
                rows.append(dict(hdim=d, causal=causal, seqlen=s, batch=16384 // s,
                                 heads=2048 // d, kernel=f"fa3_fwd_d{d}_{dtype}_kernel",
                                 dtype=dtype, ours_ms=1.0, ours_tflops=tflops,
                                 cudnn_tflops=500.0, fa2_tflops=300.0,
                                 ours_over_cudnn=tflops / 500.0,
                                 ours_rel_err_vs_cudnn=3e-3, fa2_rel_err_vs_cudnn=3e-3))
    meta = dict(date=date, gpu="NVIDIA H200", torch="2.x", dtype=dtype, kernel_dir="k",
                timer="triton.testing.do_bench median", warmup_ms=25, rep_ms=100, rounds=3,
                tokens=16384, hidden=2048)
    return records.new_entry("bench", f"python3 bench/bench_fwd.py --kernel-dir k ({date})",
                             date, full=full, meta=meta, rows=rows)


def check_entry(date, ok=True, full=True):
    results = [dict(kernel="fa3_fwd_d64_bf16_kernel", case="random", layout="BSHD", B=1,
                    Sq=127, Skv=127, Hq=4, Hkv=4, rel_err_o=2e-3, max_abs_err_lse=1e-6,
                    empty_rows=0, ok=True),
               dict(kernel="fa3_fwd_d64_bf16_kernel", case="Skv = 0", layout="BSHD", B=2,
                    Sq=100, Skv=0, Hq=4, Hkv=2, ok=ok)]
    sass = {"fa3_fwd_d64_bf16_kernel": dict(hgmma=24, local_mem_insts=0,
                                            loop_batch="12 in 26", exp2_beside_pv=0, ok=True)}
    meta = dict(date=date, gpu="NVIDIA H200", torch="2.x", kernel_dir="k", seed=7,
                command="python3 test/gpu/check_fwd.py k --out o", o_rel_tol=0.01,
                lse_abs_tol=0.001)
    return records.new_entry("check_fwd", meta["command"], date, full=full, meta=meta,
                             sass=sass, results=results)


def lines(path):
    text = Path(path).read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def section(path, key):
    text = Path(path).read_text()
    begin, end = f"<!-- record: {key} -->\n", f"\n<!-- end: {key} -->"
    assert text.count(begin) == 1 and text.count(end) == 1, text
    return text[text.index(begin) + len(begin):text.index(end)]


def test_append_history_adds_one_valid_line_per_run(tmp_path, monkeypatch):
    monkeypatch.setenv("FA3_SESSION", "2026-12-01T000000")
    e1 = records.new_entry("compare", "python3 bench/compare_fwd.py ...", "2026-12-01T010203",
                           rows=[dict(hdim=64, base_tflops=float("nan"),
                                      new_tflops=float("inf"))])
    records.append_history(tmp_path, e1)
    records.append_history(tmp_path, records.new_entry("compare", "c2", "2026-12-01T010204"))
    got = lines(tmp_path / "history.jsonl")
    assert [g["id"] for g in got] == ["2026-12-01T010203", "2026-12-01T010204"]
    assert got[0]["kind"] == "compare" and got[0]["session"] == "2026-12-01T000000"
    # no NaN / Infinity literals: strict JSON parsers read every line
    assert got[0]["rows"][0]["base_tflops"] == "nan"
    assert got[0]["rows"][0]["new_tflops"] == "inf"
    with pytest.raises(ValueError):
        records.append_history(tmp_path, dict(kind="bench"))
    assert len(lines(tmp_path / "history.jsonl")) == 2


def test_full_bench_rewrites_its_table_partial_does_not(tmp_path):
    assert records.record(tmp_path, bench_entry("2026-12-01T010000", 600.0)) == "bench-bf16"
    table = tmp_path / "RESULTS.md"
    first = section(table, "bench-bf16")
    assert "2026-12-01T010000" in first and "| 128 | causal | 1.20 |" in first
    assert "600 (500, 300)" in first
    # a hand-written section and text outside the markers survive rewrites
    table.write_text(table.read_text() + "\nkept by hand\n")
    records.write_section(tmp_path, "ncu", "## ncu\nby hand")
    assert records.record(tmp_path, bench_entry("2026-12-02T010000", 550.0)) == "bench-bf16"
    second = section(table, "bench-bf16")
    assert "2026-12-02T010000" in second and "2026-12-01T010000" not in second
    assert "| 64 | full | 1.10 |" in second
    # other dtypes have their own table; a partial grid is history only
    assert records.record(tmp_path, bench_entry("2026-12-03T010000", dtype="f16")) == "bench-f16"
    assert records.record(tmp_path, bench_entry("2026-12-04T010000", 700.0, full=False,
                                                hdims=(128,))) is None
    assert section(table, "bench-bf16") == second
    assert section(table, "ncu") == "## ncu\nby hand"
    assert "kept by hand" in table.read_text()
    assert [e["id"] for e in lines(tmp_path / "history.jsonl")] == [
        "2026-12-01T010000", "2026-12-02T010000", "2026-12-03T010000", "2026-12-04T010000"]


def test_check_fwd_table_counts_and_failures(tmp_path):
    assert records.record(tmp_path, check_entry("2026-12-01T010000")) == "check_fwd"
    text = section(tmp_path / "RESULTS.md", "check_fwd")
    assert "**2/2 cases passed; 0 failure(s) in total**" in text
    assert "| fa3_fwd_d64_bf16_kernel | 2/2 | 2.00e-03 | 1.00e-06 | 24 | 0 | 12 in 26 | - |" in text
    assert records.record(tmp_path, check_entry("2026-12-02T010000", ok=False)) == "check_fwd"
    text = section(tmp_path / "RESULTS.md", "check_fwd")
    assert "**1/2 cases passed; 1 failure(s) in total**" in text
    assert "- fa3_fwd_d64_bf16_kernel: Skv = 0" in text
    # --only: history only
    assert records.record(tmp_path, check_entry("2026-12-03T010000", full=False)) is None
    assert "2026-12-02T010000" in section(tmp_path / "RESULTS.md", "check_fwd")
    assert len(lines(tmp_path / "history.jsonl")) == 3


LOG = """========= COMPUTE-SANITIZER
seed 5; 2 kernel(s): fa3_a_kernel, fa3_b_kernel
== fa3_a_kernel: dtype=bf16
PASS {"kernel": "fa3_a_kernel", "case": "random", "ok": true}
== fa3_b_kernel: dtype=bf16
========= Warpgroup MMA sequence error detected.
=========     at fa3_b_kernel+0x6080
========= 
FAIL {"kernel": "fa3_b_kernel", "case": "random", "ok": false}
check_fwd: 1/2 cases passed, 1 failure(s), 2.1 s
========= ERROR SUMMARY: 1 error
"""


def test_sanitizer_log_is_recorded(tmp_path):
    p = records.parse_sanitizer_log(LOG)
    assert (p["seed"], p["kernels"], p["passed"], p["total"]) == (
        5, ["fa3_a_kernel", "fa3_b_kernel"], 1, 2)
    assert p["failures"] == [dict(kernel="fa3_b_kernel", case="random", ok=False)]
    assert p["summary"] == "========= ERROR SUMMARY: 1 error"
    assert p["reports"] == ["========= Warpgroup MMA sequence error detected.",
                            "=========     at fa3_b_kernel+0x6080"]
    log = tmp_path / "synccheck.log"
    log.write_text(LOG)
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "records.py"), "sanitizer",
                          "synccheck", str(log), str(tmp_path / "out"), "--command", "cs ..."],
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr  # not clean
    (e,) = lines(tmp_path / "out" / "history.jsonl")
    assert e["kind"] == "synccheck" and e["command"] == "cs ..." and e["passed"] == 1
    text = section(tmp_path / "out" / "RESULTS.md", "synccheck")
    assert "1/2 cases passed" in text and "**not clean**" in text
    assert e["id"] == e["date"] == records.run_id(
        datetime.datetime.fromtimestamp(log.stat().st_mtime))  # the run's time
    clean = LOG.replace("FAIL", "PASS").replace("1 error", "0 errors")
    log.write_text(clean)
    # a second run with the first one's time is refused, not recorded twice
    first = datetime.datetime.strptime(e["id"], "%Y-%m-%dT%H%M%S").timestamp()
    os.utime(log, (first, first))
    cmd = [sys.executable, str(ROOT / "bench" / "records.py"), "sanitizer", "synccheck",
           str(log), str(tmp_path / "out")]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 2 and "already has a synccheck run " + e["id"] in run.stderr
    assert len(lines(tmp_path / "out" / "history.jsonl")) == 1
    run = subprocess.run(cmd + ["--date", "2026-12-02T120001"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(clean)" in section(tmp_path / "out" / "RESULTS.md", "synccheck")
    assert [x["id"] for x in lines(tmp_path / "out" / "history.jsonl")][1] == "2026-12-02T120001"


def test_merge_routes_lines_by_kind_and_skips_what_is_there(tmp_path):
    out, root = tmp_path / "out", tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    (root / "test" / "gpu").mkdir(parents=True)
    old = bench_entry("2026-11-30T064124")
    records.append_history(root / "bench", old)
    records.write_section(root / "bench", "ncu", "by hand")
    for e in (bench_entry("2026-12-01T010000", 610.0),
              records.new_entry("compare", "c", "2026-12-01T010100", meta={}, rows=[]),
              check_entry("2026-12-01T005900")):
        records.record(out, e)
    records.record(out, records.sanitizer_entry("memcheck", LOG.replace("1 error", "0 errors")))
    records.append_history(out, old)  # already in the repository
    added, skipped = records.merge(out, root)
    assert [e["kind"] for e in added] == ["bench", "compare", "check_fwd", "memcheck"]
    assert [e["id"] for e in skipped] == [old["id"]]
    assert [e["kind"] for e in lines(root / "bench" / "history.jsonl")] == [
        "bench", "bench", "compare"]
    assert [e["kind"] for e in lines(root / "test" / "gpu" / "history.jsonl")] == [
        "check_fwd", "memcheck"]
    assert "2026-12-01T010000" in section(root / "bench" / "RESULTS.md", "bench-bf16")
    assert section(root / "bench" / "RESULTS.md", "ncu") == "by hand"
    assert "2026-12-01T005900" in section(root / "test" / "gpu" / "RESULTS.md", "check_fwd")
    section(root / "test" / "gpu" / "RESULTS.md", "memcheck")
    # merging again adds nothing
    added, skipped = records.merge(out, root)
    assert added == [] and len(skipped) == 5
    assert len(lines(root / "bench" / "history.jsonl")) == 3


def test_a_run_on_another_gpu_is_history_only(tmp_path):
    """The tables of record are the H200's (records.RECORD_GPU): a full grid
    run on an H100 is appended but leaves the table as it was."""
    assert records.record(tmp_path, bench_entry("2026-12-01T010000", 600.0)) == "bench-bf16"
    h100 = bench_entry("2026-12-02T010000", 550.0)
    h100["meta"]["gpu"] = "NVIDIA H100 80GB HBM3"
    assert records.record(tmp_path, h100) is None
    table = section(tmp_path / "RESULTS.md", "bench-bf16")
    assert "2026-12-01T010000" in table and "2026-12-02T010000" not in table
    assert len(lines(tmp_path / "history.jsonl")) == 2


@pytest.mark.parametrize("home", ["bench", "test/gpu"])
def test_repository_histories_and_tables_agree(home):
    """Each line of the repository's history is a JSON object with an id,
    kind, date and command, (id, kind) is unique, and each table of record
    in RESULTS.md is the latest run of its kind."""
    hist = lines(ROOT / home / "history.jsonl")
    assert hist
    for e in hist:
        assert {"id", "kind", "date", "command"} <= set(e), e.get("id")
        assert records.HOME.get(e["kind"], home) == home
    assert len({(e["id"], e["kind"]) for e in hist}) == len(hist)
    latest = {}
    for e in hist:
        key = records.section_key(e)
        if key:
            latest[key] = e
    assert latest
    table = ROOT / home / "RESULTS.md"
    for key, e in latest.items():
        assert section(table, key) == records.render(e).strip(), key


def test_bench_table_shows_a_value_head_dim_as_its_own_row():
    e = bench_entry("2026-12-01", hdims=(192,))
    extra = [dict(r, hdim_v=128, ours_tflops=450.0, ours_over_cudnn=0.9) for r in e["rows"]]
    e["rows"] += extra
    text = records.render_bench(e)
    assert "| 192 | full | 1.20 |" in text
    assert "| 192/128 | full | 0.90 |" in text
    # rows by D then Dv: 192/128 before 192
    assert text.index("| 192/128 | full |") < text.index("| 192 | full |")


def test_bench_table_with_flashattention3_in_the_run():
    """A bench_fwd run that timed FA3 (bench/peer_fa3.py) shows ours / FA3
    first, FA3's TFLOP/s beside the others and its error; without it, the
    tables stay as they were (no FA3 column)."""
    e = bench_entry("2026-12-04", hdims=(64,))
    assert "FA3" not in records.render_bench(e)
    for r in e["rows"]:
        r.update(fa3_tflops=500.0, ours_over_fa3=1.2, fa3_rel_err_vs_cudnn=4e-3)
    e["meta"]["fa3"] = "FlashAttention-3 (flash_attn_interface), commit abc"
    text = records.render_bench(e)
    assert "commit abc" in text
    assert text.index("Ratio ours / FA3:") < text.index("Ratio ours / cuDNN:")
    assert "| 64 | full | 1.20 | 1.20 |" in text
    assert "| 64 | causal | 600 (500, 300, 500) |" in text
    assert "| 300 | 500 | 1.20 | 1.000 | 3.0e-03 | 3.0e-03 | 4.0e-03 |" in text
    assert "(ours, cuDNN, FA2, FA3 in turn)" in text


def test_bench_fp8_table_with_flashattention3_in_the_run():
    rows = [dict(hdim=64, causal=False, seqlen=2048, batch=8, heads=32, descale="head",
                 kernel="k", fa3_fp8_tflops=560.0, fa3_live=True, fp8_ms=0.5,
                 fp8_tflops=520.0)]
    meta = dict(gpu="NVIDIA H200", fa3="FlashAttention-3 (flash_attn_interface), commit abc")
    text = records.render(records.new_entry("bench_fp8", "python3 bench/bench_fp8.py",
                                            "2026-12-04T000000", full=False, meta=meta,
                                            rows=rows))
    assert "timed in this run on the same inputs (FlashAttention-3" in text
    assert "| 64 | full | 2k | 520 | - | - | 560 | 0.93 |" in text


def bwd_entry(date, ok=True, full=True):
    r = dict(kernel="fa3_bwd_d128_bf16_causal_kernel", case="random", fwd="ours", B=2,
             Sq=113, Skv=203, Hq=8, Hkv=2, err_dq=3e-3, err_pt_dq=4e-3, nan_dq=0,
             err_dk=1e-2, err_pt_dk=2e-3, nan_dk=0, err_dv=1e-3, err_pt_dv=1e-3, nan_dv=0,
             repeat_dkdv_identical=True, repeat_dq_max_diff=1.5e-5, ok=ok)
    results = [r, dict(kernel="fa3_bwd_d128_bf16_causal_kernel",
                       case="error: softcap with grad", ok=True)]
    meta = dict(date=date, gpu="NVIDIA H200", torch="2.x", kernel_dir="k", seed=3,
                rule="max|g - g_ref| <= 2 * max|g_pt - g_ref| + 1e-3",
                command="python3 test/gpu/check_bwd.py k --out o")
    return records.new_entry("check_bwd", meta["command"], date, full=full, meta=meta,
                             sass={}, results=results)


def test_check_bwd_is_recorded_and_merged(tmp_path):
    """check_bwd.py's runs: a history line of test/gpu, its table of record
    the worst error over FlashAttention's bound per gradient."""
    out = tmp_path / "out"
    assert records.record(out, bwd_entry("2026-12-01T100000", ok=False)) == "check_bwd"
    text = section(out / records.TABLE, "check_bwd")
    # dk: 1e-2 / (2 * 2e-3 + 1e-3) = 2.00 (fails), dq 3e-3 / 9e-3, dv 1e-3 / 3e-3
    assert ("| fa3_bwd_d128_bf16_causal_kernel | 1/2 | ours | 0.33 | 2.00 | 0.33 | 1.5e-05 |"
            in text)
    assert "- fa3_bwd_d128_bf16_causal_kernel: random (B=2 Sq=113 Skv=203 Hq=8 Hkv=2)" in text
    assert "**1/2 cases passed; 1 failure(s).**" in text
    assert records.section_key(bwd_entry("d", full=False)) is None
    root = tmp_path / "repo"
    added, skipped = records.merge(out, root)
    assert [e["kind"] for e in added] == ["check_bwd"] and not skipped
    assert (root / "test/gpu" / records.HISTORY).exists()


def test_check_bwd_imports_without_torch():
    """test/gpu/check_bwd.py imports where torch is missing (its helpers are
    plain Python): the case grid (a window's own seqlens) and FlashAttention's
    rule."""
    code = f"""
import sys
from types import SimpleNamespace as K
sys.modules['torch'] = None
sys.path.insert(0, {str(ROOT / 'test' / 'gpu')!r})
import check_bwd as c
cases = c.cases(K(causal=True, window_left=-1, window_right=0, softcap=0.0))
assert len(cases) == 18 and (1, 4224, 4224, 8, 1) in cases and (2, 203, 113, 8, 2) in cases
cases = c.cases(K(causal=False, window_left=256, window_right=0, softcap=0.0))
assert len(cases) == 15 and (2, 113, 1100, 4, 4) in cases and (2, 1, 1, 4, 4) not in cases
assert c.within_rule(3e-3, 1e-3) and not c.within_rule(3.1e-3, 1e-3)
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_bench_bwd_table_and_routing(tmp_path):
    """bench_bwd.py's runs: a history line of bench/, the full grid's table
    of record with ours / cuDNN and ours / FA2 per cell, a missing peer as
    '-'; a partial grid is history only."""
    rows = [dict(hdim=128, causal=True, seqlen=4096, batch=4, heads=16,
                 ms={"ours": 1.0, "cudnn": 2.0, "fa2": 4.0},
                 tflops={"ours": 400.0, "cudnn": 200.0, "fa2": 100.0}, rel_err=[1e-3] * 3),
            dict(hdim=64, causal=False, seqlen=512, batch=32, heads=32,
                 ms={"ours": 1.0, "cudnn": 1.5},
                 tflops={"ours": 300.0, "cudnn": 200.0}, rel_err=None)]
    entry = records.new_entry("bench_bwd", "python3 bench/bench_bwd.py --kernel-dir k",
                              "2026-12-01T110000", gpu="H200", rows=rows, full=True,
                              meta={"dtype": "bf16", "torch": "2.11"})
    out = tmp_path / "out"
    assert records.record(out, entry) == "bench_bwd"
    text = section(out / records.TABLE, "bench_bwd")
    assert "| causal | 128 | 4096 | 400 | 200 | 100 | 2.00 | 4.00 |" in text
    assert "| full | 64 | 512 | 300 | 200 | - | 1.50 | - |" in text
    partial = dict(entry, full=False)
    assert records.section_key(partial) is None
    root = tmp_path / "repo"
    added, _ = records.merge(out, root)
    assert [e["kind"] for e in added] == ["bench_bwd"]
    assert (root / "bench" / records.HISTORY).exists()


def test_bench_bwd_table_with_flashattention3_in_the_run():
    rows = [dict(hdim=128, causal=False, seqlen=2048, batch=8, heads=16,
                 ms={"ours": 1.0, "cudnn": 2.0, "fa2": 4.0, "fa3": 0.8},
                 tflops={"ours": 400.0, "cudnn": 200.0, "fa2": 100.0, "fa3": 500.0},
                 rel_err=[1e-3] * 3)]
    entry = records.new_entry("bench_bwd", "python3 bench/bench_bwd.py --kernel-dir k",
                              "2026-12-04T110000", gpu="H200", rows=rows, full=False,
                              meta={"dtype": "bf16", "fa3": "FlashAttention-3, commit abc"})
    text = records.render(entry)
    assert "(FlashAttention-3, commit abc)" in text
    assert "| full | 128 | 2048 | 400 | 200 | 100 | 2.00 | 4.00 | 500 | 0.80 |" in text


def test_bench_bwd_table_with_the_deterministic_kernels():
    """bench_bwd.py --deterministic: the det column and det / ours beside
    the others ('-' where a cell lacks it); without it, no such column."""
    rows = [dict(hdim=128, causal=True, seqlen=4096, batch=4, heads=16,
                 ms={"ours": 1.0, "cudnn": 2.0, "fa2": 4.0, "det": 1.25},
                 tflops={"ours": 400.0, "cudnn": 200.0, "fa2": 100.0, "det": 320.0},
                 rel_err=[1e-3] * 3),
            dict(hdim=64, causal=False, seqlen=512, batch=32, heads=32,
                 ms={"ours": 1.0}, tflops={"ours": 300.0}, rel_err=None)]
    entry = records.new_entry("bench_bwd", "python3 bench/bench_bwd.py --deterministic",
                              "2026-12-03T110000", gpu="H200", rows=rows, full=False,
                              meta={"dtype": "bf16", "torch": "2.11", "deterministic": True})
    text = records.render(entry)
    assert "| ours / fa2 | det | det / ours |" in text
    assert "| causal | 128 | 4096 | 400 | 200 | 100 | 2.00 | 4.00 | 320 | 0.80 |" in text
    assert "| full | 64 | 512 | 300 | - | - | - | - | - | - |" in text
    assert "det = flash_attn_backward(deterministic=True)" in text
    plain = dict(entry, rows=[dict(r, tflops={k: v for k, v in r["tflops"].items()
                                              if k != "det"}) for r in rows])
    assert "det" not in records.render(plain).split("| mask |")[1]


def test_check_decode_is_recorded_and_merged(tmp_path):
    """check_decode.py's runs: a history line of test/gpu with check_fwd's
    table of record (its kind in the heading)."""
    entry = dict(check_entry("2026-12-02T100000"), kind="check_decode")
    out = tmp_path / "out"
    assert records.record(out, entry) == "check_decode"
    text = section(out / records.TABLE, "check_decode")
    assert text.startswith("## GPU correctness (check_decode, 2026-12-02T100000)")
    assert "**2/2 cases passed; 0 failure(s) in total**" in text
    assert records.section_key(dict(entry, full=False)) is None
    root = tmp_path / "repo"
    added, _ = records.merge(out, root)
    assert [e["kind"] for e in added] == ["check_decode"]
    assert (root / "test/gpu" / records.HISTORY).exists()


def test_bench_decode_table_target_and_routing(tmp_path):
    """bench_decode.py's runs: a history line of bench/, the full grid's
    table with the bandwidth target judged where K + V >= 256 MB only."""
    def row(B, ctx, us, sdpa_us=None, backend="flash"):
        n = B * ctx * 8 * 256 * 2
        r = dict(hq=32, hkv=8, batch=B, context=ctx, kv_bytes=n, copies=1, splits=14,
                 ours_us=us, ours_tbs=n / us / 1e6)
        if sdpa_us:
            r.update(sdpa_us=sdpa_us, sdpa_backend=backend, sdpa_tbs=n / sdpa_us / 1e6)
        return r
    rows = [row(1, 1024, 10.0, 12.0),            # 4 MB: not judged
            row(16, 65536, 1320.0, 2640.0),     # 4096 MB at 3.25 TB/s: missed
            row(64, 65536, 4990.0, None)]       # 16384 MB at 3.44 TB/s: met
    rows[2]["errors"] = {"cudnn": "RuntimeError: no GQA"}
    assert [records.decode_target_met(r) for r in rows] == [None, False, True]
    entry = records.new_entry("bench_decode", "python3 bench/bench_decode.py --kernel-dir k",
                              "2026-12-02T110000", rows=rows, full=True,
                              meta=dict(gpu="H200", torch="2.11", kernel="fa3_fwd_d128_bf16_"
                                        "decode_kernel", skipped=["32/8 B=128 ctx=128k"]))
    out = tmp_path / "out"
    assert records.record(out, entry) == "bench_decode"
    text = section(out / records.TABLE, "bench_decode")
    assert "| 32/8 | 1 | 1k | 4 | 14 | 10.0 | 0.42 | 12.0 (flash) | 0.35 | 1.20 | - |" in text
    assert ("| 32/8 | 16 | 64k | 4096 | 14 | 1320.0 | 3.25 | 2640.0 (flash) | 1.63 | 2.00 | "
            "**no** |") in text
    assert "| 32/8 | 64 | 64k | 16384 | 14 | 4990.0 | 3.44 | - (-) | - | - | yes |" in text
    assert "met in 1/2 such cells" in text
    assert "Skipped (K + V cache over the memory limit): 32/8 B=128 ctx=128k." in text
    assert "- 32/8 B=64 ctx=65536: cudnn: RuntimeError: no GQA" in text
    assert records.section_key(dict(entry, full=False)) is None
    root = tmp_path / "repo"
    added, _ = records.merge(out, root)
    assert [e["kind"] for e in added] == ["bench_decode"]
    assert (root / "bench" / records.HISTORY).exists()


def test_decode_scripts_import_without_torch():
    """test/gpu/check_decode.py and bench/bench_decode.py import where torch
    is missing: their grids cover what the decoding kernels must be checked
    and timed on."""
    code = f"""
import sys
sys.modules['torch'] = None
sys.path.insert(0, {str(ROOT / 'test' / 'gpu')!r})
sys.path.insert(0, {str(ROOT / 'bench')!r})
import check_decode as c, bench_decode as b
full = c.cases(128, 'bf16')
assert full == c.CASES and len(c.cases(128, 'f16')) == len(full) - 2
assert [x[0] for x in c.cases(64, 'bf16')] == c.QUICK_CASES
assert {{x[2] for x in full}} == {{1, 4, 17}}
assert {{(x[3], x[4]) for x in full}} == {{(32, 8), (64, 8), (16, 1), (8, 8)}}
assert {{1, 113, 1023, 4224, 131072}} <= {{x[5] for x in full}}
assert {{x[6] for x in full}} == {{0, 1, 3, 128}}
assert sum(x[5] == 131072 for x in full) == 2
assert {{x[8] for x in full}} == {{True, False}}
ragged = [n for x in full if isinstance(x[7], list) for n in x[7]]
assert {{0, 1, 17, 1000, 4096}} <= set(ragged)
assert any(isinstance(x[7], int) for x in full)
for x in full + c.SANITIZE_CASES:
    label, B, Sq, Hq, Hkv, Skv, n, lens, lse = x
    L = c.lengths(x)
    assert len(L) == B and all(0 <= m <= Skv for m in L), label
    assert Hq % Hkv == 0 and 64 % (Hq // Hkv) == 0, label
cells, skipped = b.grid(b.HEADS, b.BATCHES, b.CONTEXTS, 40e9)
assert len(cells) == 48 and skipped == ['32/8 B=128 ctx=128k', '64/8 B=128 ctx=128k']
assert b.kv_bytes(1, 1024, 8) == 4 * 2**20
assert b.copies_for(4 * 2**20, 60 * 2**20) == 30 and b.copies_for(2**30, 60 * 2**20) == 1
print('ok')
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_check_fp8_table_and_routing(tmp_path):
    """check_fp8.py's runs: a history line of test/gpu, the table of record
    of a full run (per kernel its worst rel. error, z and lse beside its
    SASS check; failures; the accuracy table with the paper's numbers);
    --only runs are history only."""
    results = [dict(kernel="fa3_fwd_d128_e4m3_kernel", case="random", mode="block", B=2,
                    Sq=333, Skv=333, Hq=8, Hkv=2, rel_err_o=0.015, rel_err_o_emul=0.016,
                    max_z=3.5, max_abs_err_rel=0.012, max_abs_err_lse=2e-4, ok=True),
               dict(kernel="fa3_fwd_d128_e4m3_kernel", case="random", mode="fa3", B=2,
                    Sq=1041, Skv=333, Hq=8, Hkv=2, rel_err_o=0.3, max_z=40.0, ok=False),
               dict(kernel="fa3_fwd_d128_e4m3_kernel", case="error: misaligned q", mode="-",
                    B=0, Sq=0, Skv=0, Hq=0, Hkv=0, ok=True, message="not 16-byte aligned")]
    sass = {"fa3_fwd_d128_e4m3_kernel": dict(hgmma=24, hgmma_e4m3=24, local_mem_insts=0,
                                             ok=True)}
    paper = [dict(hdim=128, method="fp8 per-tensor", rmse=2.0e-2, rmse_emul=1.9e-2,
                  paper=2.4e-2, ok=True),
             dict(hdim=128, method="fp8 block + Hadamard", rmse=9.0e-3, rmse_emul=9.2e-3,
                  paper=9.1e-3, ok=True),
             dict(hdim=128, method="bf16 (ours)", rmse=None, ok=True, note="no bf16 kernel")]
    meta = dict(gpu="NVIDIA H200", torch="2.11", kernel_dir="k", seed=5, o_rel_tol=0.05,
                z_max=8.0, lse_abs_tol=1e-2, emul_ratio=1.5, paper_size=dict(B=1, H=8, S=4096))
    entry = records.new_entry("check_fp8", "python3 test/gpu/check_fp8.py k --out o",
                              "2026-12-02T100000", full=True, meta=meta, sass=sass,
                              results=results, paper=paper)
    out = tmp_path / "out"
    assert records.record(out, entry) == "check_fp8"
    text = section(out / records.TABLE, "check_fp8")
    assert "**2/3 cases passed; 1 failure(s) in total**" in text
    assert ("| fa3_fwd_d128_e4m3_kernel | 2/3 | 3.00e-01 | 1.60e-02 | 40.00 | 1.20e-02 | "
            "2.00e-04 | 24 (24) | 0 |") in text
    assert "- fa3_fwd_d128_e4m3_kernel: random (fa3, B=2 Sq=1041 Skv=333 Hq=8 Hkv=2)" in text
    assert "| 128 | fp8 block + Hadamard | 9.00e-03 | 9.20e-03 | 9.1e-03 |" in text
    assert "| 128 | bf16 (ours) | - | - | - |" in text and "no bf16 kernel" in text
    assert records.section_key(dict(entry, full=False)) is None
    root = tmp_path / "repo"
    added, _ = records.merge(out, root)
    assert [e["kind"] for e in added] == ["check_fp8"]
    assert (root / "test/gpu" / records.HISTORY).exists()


def test_check_quantize_table_and_routing(tmp_path):
    """check_quantize.py's runs: a history line of test/gpu and the table of
    record (per head dim its cases, worst descale error and error/bound,
    the end-to-end RMSEs; failures listed)."""
    results = [dict(case="odd 113", head_dim=128, rotated=True, max_rel_err_descale=2e-7,
                    max_err_over_bound=0.41, ok=True),
               dict(case="odd 113", head_dim=128, rotated=False, bytes_differing=3, ok=False),
               dict(case="end to end", head_dim=128, rmse_kernel=8.5e-3, rmse_torch=8.4e-3,
                    ok=True),
               dict(case="one row", head_dim=256, rotated=True, max_rel_err_descale=1e-7,
                    max_err_over_bound=0.3, ok=True)]
    meta = dict(gpu="NVIDIA H200", torch="2.11", kernel_dir="k", seed=5, descale_rel_tol=1e-5,
                rmse_ratio=1.1)
    entry = records.new_entry("check_quantize", "python3 test/gpu/check_quantize.py k --out o",
                              "2026-12-02T100000", full=True, meta=meta, results=results)
    out = tmp_path / "out"
    assert records.record(out, entry) == "check_quantize"
    text = section(out / records.TABLE, "check_quantize")
    assert "**3/4 cases passed.**" in text
    assert "| 128 | 2/3 | 2.00e-07 | 0.410 | 8.50e-03 | 8.40e-03 |" in text
    assert "| 256 | 1/1 | 1.00e-07 | 0.300 | - | - |" in text
    assert "bytes_differing': 3" in text
    added, _ = records.merge(out, tmp_path / "repo")
    assert [e["kind"] for e in added] == ["check_quantize"]


def test_bench_fp8_table_and_routing(tmp_path):
    """bench_fp8.py's runs: bench/'s history, the full grid's table with
    fp8 beside bf16 and FA3's FP8 target ('-' where not measured)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_fp8   # imports without torch (torch only in main)
    rows = []
    for causal in (False, True):
        for s in (512, 1024):
            t = bench_fp8.fa3_target(128, causal, s)
            rows.append(dict(hdim=128, causal=causal, seqlen=s, batch=16384 // s, heads=16,
                             kernel="fa3_fwd_d128_e4m3_kernel", descale="head",
                             fa3_fp8_tflops=t, fp8_ms=0.5, fp8_tflops=700.0, bf16_ms=0.8,
                             bf16_tflops=500.0, fp8_over_bf16=1.4, fp8_rel_err_vs_bf16=0.05))
    assert rows[0]["fa3_fp8_tflops"] == 547 and rows[1]["fa3_fp8_tflops"] is None
    meta = dict(gpu="NVIDIA H200", torch="2.11", timer="do_bench", warmup_ms=25, rep_ms=100,
                tokens=16384, hidden=2048)
    entry = records.new_entry("bench_fp8", "python3 bench/bench_fp8.py --kernel-dir k",
                              "2026-12-02T110000", full=True, meta=meta, rows=rows)
    out = tmp_path / "out"
    assert records.record(out, entry) == "bench_fp8"
    text = section(out / records.TABLE, "bench_fp8")
    assert "| 128 | full | 512 | 700 | 500 | 1.40 | 547 | 1.28 | 0.500 | 5.0e-02 |" in text
    assert "| 128 | full | 1k | 700 | 500 | 1.40 | - | - | 0.500 | 5.0e-02 |" in text
    assert "| 128 | causal | 512 | 700 | 500 | 1.40 | 331 | 2.11 |" in text
    root = tmp_path / "repo"
    added, _ = records.merge(out, root)
    assert [e["kind"] for e in added] == ["bench_fp8"]
    assert (root / "bench" / records.HISTORY).exists()


VARLEN_LOG = """========= COMPUTE-SANITIZER
seed 7; 2 kernel(s)
== fa3_fwd_d128_bf16_varlen_kernel: dtype=bf16 head_dim=128 varlen
PASS small ragged: layout=packed, B=4, unwritten=0
PASS small used: layout=packed, B=2, unwritten=0
== fa3_fwd_d64_bf16_varlen_kernel: dtype=bf16 head_dim=64 varlen
FAIL small ragged: unwritten=3
check_varlen: 2/3 cases passed, 1 failure(s), 1.2 s
========= ERROR SUMMARY: 0 errors
"""


def test_sanitizer_log_of_check_varlen():
    # check_varlen / check_decode: kernels from their `== name:` lines, a
    # case per `PASS name: facts` line
    p = records.parse_sanitizer_log(VARLEN_LOG)
    assert (p["seed"], p["kernels"], p["passed"], p["total"]) == (
        7, ["fa3_fwd_d128_bf16_varlen_kernel", "fa3_fwd_d64_bf16_varlen_kernel"], 2, 3)
    assert p["failures"] == ["small ragged: unwritten=3"]
    e = records.sanitizer_entry("memcheck", VARLEN_LOG)
    assert not records.sanitizer_clean(e)
    e = records.sanitizer_entry("memcheck", VARLEN_LOG.replace("FAIL", "PASS"))
    assert records.sanitizer_clean(e)


def test_gpu_checks_write_their_runs(tmp_path):
    """The GPU checks' shared run record (test/gpu/check_fwd.py run_meta and
    write_report, used by check_fwd, check_varlen, check_decode and
    check_chunk): the history line of the given kind with the run's meta
    and results, and on the GPU of record its table in RESULTS.md."""
    import importlib.util
    from types import SimpleNamespace
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch")
    root = Path(__file__).resolve().parents[2]
    for sub in ("test/gpu", "bench"):
        if str(root / sub) not in sys.path:
            sys.path.insert(0, str(root / sub))
    import check_fwd
    now = datetime.datetime(2026, 12, 6, 8, 0, 0)
    a = SimpleNamespace(kernel_dir="K", seed=7)
    meta = check_fwd.run_meta(a, now, gpu="NVIDIA H200", sms=132)
    assert (meta["date"], meta["gpu"], meta["kernel_dir"], meta["seed"], meta["sms"]) == \
        ("2026-12-06T08:00:00", "NVIDIA H200", "K", 7, 132)
    assert meta["o_rel_tol"] == check_fwd.O_REL_TOL and meta["command"].startswith("python3 ")
    results = [dict(kernel="kvcache", case="causal, x", ok=True, rel_err_o=2e-3,
                    max_abs_err_lse=1e-6),
               dict(kernel="kvcache", case="full, y", ok=False, error="boom")]
    check_fwd.write_report(str(tmp_path), "2026-12-06T080000", meta, results, {},
                           kind="check_chunk")
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    entry = json.loads(lines[-1])
    assert entry["kind"] == "check_chunk" and entry["results"] == results
    assert entry["meta"]["sms"] == 132 and entry["id"] == "2026-12-06T080000"
    table = (tmp_path / "RESULTS.md").read_text()
    assert "## GPU correctness (check_chunk, 2026-12-06T080000)" in table
    assert "**1/2 cases passed; 1 failure(s) in total**" in table and "boom" in table
