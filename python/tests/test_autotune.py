"""bench/autotune.py compile: enumerates the tile/pipeline space with
fa3-compile, keeps what compiles and rejects what does not fit (CPU only;
the timing step needs the GPU machine)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "build" / "bin" / "fa3-compile"


def autotune_compile(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench" / "autotune.py"), "compile",
                           *args], capture_output=True, text=True)


def candidates(out, *args):
    """Runs the compile step into `out`; its candidates.json."""
    p = autotune_compile(*args, "-o", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads((out / "candidates.json").read_text())


@pytest.mark.skipif(not TOOL.exists(), reason="fa3-compile not built")
def test_compile_keeps_legal_and_rejects_oversized(tmp_path):
    out = tmp_path / "tune"
    cand = candidates(out, "--head-dim", "256", "--block-n", "64,112", "--stages", "2",
                      "--pingpong", "1,0")
    kept = {c["label"] for c in cand["candidates"]}
    assert kept == {"n64_s2_pp1_q0", "n64_s2_pp0_q0"}
    for c in cand["candidates"]:
        facts = list((out / c["dir"]).glob("*.facts"))
        assert len(facts) == 1
        text = facts[0].read_text()
        assert "block_n 64" in text and "head_dim 256" in text
        assert f"pingpong {int(c['pingpong'])}" in text
    rejected = {r["label"]: r["why"] for r in cand["rejected"]}
    assert set(rejected) == {"n112_s2_pp1_q0", "n112_s2_pp0_q0"}
    assert all("shared memory" in why for why in rejected.values())
    assert not (out / "n112_s2_pp1_q0").exists()


@pytest.mark.skipif(not TOOL.exists(), reason="fa3-compile not built")
def test_lazy_rescale_is_a_dimension(tmp_path):
    out = tmp_path / "tune"
    cand = candidates(out, "--head-dim", "64", "--block-m", "128", "--block-n", "128",
                      "--stages", "2", "--lazy-rescale", "auto,on")
    flags = {}
    for c in cand["candidates"]:
        text = next((out / c["dir"]).glob("*.facts")).read_text()
        flags[c["label"]] = "lazy_rescale 1" in text
    # head dim 64 defaults to off; "on" overrides it
    assert flags == {"m128_n128_s2_pp1_q0": False, "m128_n128_s2_pp1_q0_lron": True}
    bad = autotune_compile("--head-dim", "64", "--lazy-rescale", "maybe", "-o", str(out))
    assert bad.returncode != 0 and "--lazy-rescale takes auto, on, off" in bad.stderr


@pytest.mark.skipif(not TOOL.exists(), reason="fa3-compile not built")
def test_transpose_warps_is_an_fp8_dimension(tmp_path):
    out = tmp_path / "tune"
    cand = candidates(out, "--head-dim", "128", "--dtype", "e4m3", "--block-n", "128",
                      "--stages", "2", "--transpose-warps", "0,3,4")
    kept = {c["label"]: c for c in cand["candidates"]}
    # head dim 128 takes 3 by default: _t3 is the same kernel as the default's
    assert set(kept) == {"n128_s2_pp1_q0", "n128_s2_pp1_q0_t4"}
    assert kept["n128_s2_pp1_q0_t4"]["transpose_warps"] == 4
    rejected = {r["label"]: r["why"] for r in cand["rejected"]}
    assert rejected == {"n128_s2_pp1_q0_t3": "the same kernel as n128_s2_pp1_q0"}
    for args, why in ((["--transpose-warps", "5"], "--transpose-warps takes 0, 3, 4"),
                      (["--dtype", "bf16", "--transpose-warps", "4"], "FP8 (--dtype e4m3) only")):
        bad = autotune_compile("--head-dim", "128", *args, "-o", str(out))
        assert bad.returncode != 0 and why in bad.stderr


@pytest.mark.skipif(not TOOL.exists(), reason="fa3-compile not built")
def test_block_m_is_a_dimension_and_twins_are_dropped(tmp_path):
    out = tmp_path / "tune"
    cand = candidates(out, "--head-dim", "64", "--block-m", "128,192", "--block-n", "128",
                      "--stages", "2", "--pingpong", "1,0")
    kept = {c["label"]: c for c in cand["candidates"]}
    assert set(kept) == {"m128_n128_s2_pp1_q0", "m128_n128_s2_pp0_q0", "m192_n128_s2_pp1_q0"}
    text = next((out / "m192_n128_s2_pp1_q0").glob("*.facts")).read_text()
    assert "block_m 192" in text and "threads 512" in text and "pingpong 0" in text
    # three consumer warpgroups do not take turns: pp0 is the same kernel
    rejected = {r["label"]: r["why"] for r in cand["rejected"]}
    assert rejected == {"m192_n128_s2_pp0_q0": "the same kernel as m192_n128_s2_pp1_q0"}


def test_run_appends_one_autotune_line(tmp_path, monkeypatch):
    """The run step reads the compare_fwd rounds from the history they append
    to and appends its own line (compare_fwd stands in: no GPU here)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import autotune
    import records

    tune = tmp_path / "tune"
    tune.mkdir()
    kept = [dict(label=x, dir=x, block_m=0, block_n=n, stages=2, pingpong=True, q_buffers=0,
                 lazy_rescale="auto") for x, n in (("a", 128), ("b", 160))]
    (tune / "candidates.json").write_text(json.dumps(dict(
        meta=dict(head_dim=128, dtype="bf16", causal=False, command="c", spills_checked=True),
        candidates=kept, rejected=[])))
    calls = []

    def fake_compare(cmd, *args, **kwargs):
        calls.append(cmd)
        assert cmd[1].endswith("compare_fwd.py")
        assert "a=" + str(tune / "a") in cmd and "b=" + str(tune / "b") in cmd
        rows = [dict(hdim=128, causal=False, seqlen=s, cudnn_tflops=500.0,
                     a_tflops=600.0 + len(calls), b_tflops=550.0 if s == 512 else 700.0)
                for s in (512, 16384)]
        records.append_history(cmd[cmd.index("--results-dir") + 1], records.new_entry(
            "compare", "python3 bench/compare_fwd.py ...", f"2026-12-01T00000{len(calls)}",
            meta=dict(gpu="NVIDIA H200"), rows=rows))
        return subprocess.CompletedProcess(cmd, 0)
    monkeypatch.setattr(autotune.subprocess, "run", fake_compare)
    res = tmp_path / "res"
    assert autotune.main(["run", str(tune), "--seqlens", "512,16384", "--rounds", "2",
                          "--results-dir", str(res)]) == 0
    assert len(calls) == 2
    (e,) = [json.loads(line) for line in (res / "history.jsonl").read_text().splitlines()]
    assert e["kind"] == "autotune" and e["id"] == e["date"] == e["meta"]["date"]
    assert e["meta"]["gpu"] == "NVIDIA H200" and e["meta"]["rounds"] == 2
    # per seqlen the median of the two rounds; the winner by geometric mean
    assert e["tflops"]["a"] == {"512": 602.0, "16384": 602.0}
    assert e["winner"] == "b" and e["winner_per_seqlen"] == {"512": "a", "16384": "b"}
    assert e["cudnn"] == {"512": 500.0, "16384": 500.0}
    assert not (res / "RESULTS.md").exists()  # autotuning is history only
