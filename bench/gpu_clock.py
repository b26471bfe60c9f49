"""SM clock and board power while a benchmark runs (nvidia-smi sampling).

The H200 runs attention at its power limit: the sustained SM clock, not the
kernel alone, sets absolute TFLOP/s, and it differs between the leased
machines. Recording it beside each timing tells a slower kernel from a
slower clock.

    with ClockSampler() as s:
        ...timed work...
    s.median()  # (MHz, W) over the samples taken meanwhile, or (None, None)
"""
import os
import shutil
import statistics
import subprocess
import threading

QUERY = "clocks.sm,power.draw"


def parse_samples(lines):
    """(MHz, W) pairs from `nvidia-smi --query-gpu=clocks.sm,power.draw
    --format=csv,noheader,nounits` lines; lines that do not parse are
    skipped."""
    out = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2:
            continue
        try:
            out.append((float(parts[0]), float(parts[1])))
        except ValueError:
            continue
    return out


def medians(samples):
    """(median MHz, median W) of the samples, or (None, None) if none."""
    if not samples:
        return None, None
    return (statistics.median(s[0] for s in samples),
            statistics.median(s[1] for s in samples))


class ClockSampler:
    """Samples the GPU's SM clock and power every `period_ms` while active.
    Without nvidia-smi it records nothing (median() gives (None, None))."""

    def __init__(self, gpu_id=None, period_ms=20):
        if gpu_id is None:  # the first visible GPU, torch's device 0
            gpu_id = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
        self.cmd = None
        tool = shutil.which("nvidia-smi")
        if tool:
            self.cmd = [tool, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                        f"--loop-ms={period_ms}", f"--id={gpu_id}"]
        self.samples = []
        self._proc = self._thread = None

    def __enter__(self):
        if self.cmd:
            self._proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True)
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()
        return self

    def _read(self):
        self.samples.extend(parse_samples(iter(self._proc.stdout.readline, "")))

    def __exit__(self, *exc):
        if self._proc:
            self._proc.terminate()
            self._proc.wait()
            self._thread.join(timeout=2)
        return False

    def median(self):
        return medians(self.samples)
