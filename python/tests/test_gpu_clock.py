"""bench/gpu_clock.py: the nvidia-smi sampler beside the benchmark timings
(no GPU needed: a stand-in nvidia-smi on PATH)."""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_clock  # noqa: E402


def test_parse_skips_what_is_not_a_sample():
    lines = ["1755, 612.40", "1740,598.1\n", "[N/A], 600", "garbage", "", "1, 2, 3"]
    assert gpu_clock.parse_samples(lines) == [(1755.0, 612.4), (1740.0, 598.1)]
    assert gpu_clock.medians([(1500.0, 600.0), (1700.0, 650.0), (1600.0, 700.0)]) == \
        (1600.0, 650.0)
    assert gpu_clock.medians([]) == (None, None)


def test_without_nvidia_smi_nothing_is_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with gpu_clock.ClockSampler() as s:
        pass
    assert s.median() == (None, None)


def test_samples_while_active(monkeypatch, tmp_path):
    # a stand-in that prints a sample every 10 ms until terminated, and
    # records its arguments
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"
                    "while true; do echo '1530, 655.5'; sleep 0.01; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    with gpu_clock.ClockSampler() as s:
        time.sleep(0.3)
    assert len(s.samples) >= 3
    assert s.median() == (1530.0, 655.5)
    args = (tmp_path / "args").read_text().split()
    assert "--query-gpu=clocks.sm,power.draw" in args and "--id=3" in args
