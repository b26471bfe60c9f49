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
