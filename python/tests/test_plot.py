"""bench/plot.py: which run it plots and the series it draws (the drawing
itself needs matplotlib, which CI does not install)."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import plot  # noqa: E402


def entry(run_id, dtype=None, full=True, kind="bench", rows=()):
    meta = {} if dtype is None else {"dtype": dtype}
    return {"id": run_id, "kind": kind, "full": full, "meta": meta, "rows": list(rows)}


def test_latest_full_run_of_the_dtype(tmp_path):
    h = tmp_path / "history.jsonl"
    lines = [entry("a"),                       # before dtype was recorded: bf16
             entry("b", "f16"),
             entry("c", "bf16", full=False),   # partial grid: not of record
             entry("d", "bf16", kind="compare"),
             entry("e", "bf16"),
             entry("f", "f16", full=False)]
    h.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert plot.latest_full_run(h, "bf16")["id"] == "e"
    assert plot.latest_full_run(h, "f16")["id"] == "b"
    assert plot.latest_full_run(h, "f8") is None


def test_series_per_panel_sorted_by_seqlen():
    rows = [dict(hdim=128, causal=True, seqlen=4096, ours_tflops=600.0, cudnn_tflops=500.0),
            dict(hdim=128, causal=True, seqlen=512, ours_tflops=350.0, cudnn_tflops=330.0,
                 fa2_tflops=200.0),
            dict(hdim=64, causal=False, seqlen=512, ours_tflops=400.0)]
    s = plot.series(entry("x", rows=rows))
    assert s[(128, True)]["ours"] == [(512, 350.0), (4096, 600.0)]
    assert s[(128, True)]["cudnn"] == [(512, 330.0), (4096, 500.0)]
    assert s[(128, True)]["fa2"] == [(512, 200.0)]
    assert "fa3" not in s[(128, True)]
    assert s[(64, False)] == {"ours": [(512, 400.0)]}


def test_series_has_flashattention3_where_the_run_timed_it():
    rows = [dict(hdim=64, causal=False, seqlen=2048, ours_tflops=470.0, fa3_tflops=460.0),
            dict(hdim=64, causal=False, seqlen=512, ours_tflops=400.0, fa3_tflops=330.0)]
    assert plot.series(entry("y", rows=rows))[(64, False)]["fa3"] == [(512, 330.0),
                                                                      (2048, 460.0)]


def test_the_committed_plots_show_the_runs_of_record():
    # RESULTS.md's tables and the PNGs beside them come from the same runs.
    table = (ROOT / "bench" / "RESULTS.md").read_text()
    for dtype in ("bf16", "f16"):
        run = plot.latest_full_run(ROOT / "bench" / "history.jsonl", dtype)
        assert run is not None and run["id"] in table
        assert (ROOT / "bench" / f"RESULTS-{dtype}.png").exists()


def test_value_head_dim_is_a_panel_of_its_own():
    rows = [dict(hdim=192, causal=False, seqlen=512, ours_tflops=500.0),
            dict(hdim=192, hdim_v=128, causal=False, seqlen=512, ours_tflops=450.0),
            dict(hdim=96, causal=False, seqlen=512, ours_tflops=400.0)]
    s = plot.series(entry("x", rows=rows))
    assert s[(192, False)]["ours"] == [(512, 500.0)]
    assert s[("192/128", False)]["ours"] == [(512, 450.0)]
    # panels by D, then Dv
    assert sorted({h for h, _ in s}, key=plot.records.hdim_order) == [96, "192/128", 192]
