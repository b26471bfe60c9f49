"""Plots the forward benchmark of record: TFLOP/s against sequence length for
ours, cuDNN and FlashAttention-2, one panel per head dim and mask.

    python3 bench/plot.py [--history bench/history.jsonl] [--dtype bf16]
                          [--out bench/RESULTS-bf16.png]

Takes the latest full-grid `bench` run of the dtype from the history (what
bench/RESULTS.md shows as its table). bench_fwd.py calls it after a full run
where matplotlib is installed; otherwise run it here after `records.py merge`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import records

HERE = Path(__file__).resolve().parent
PEERS = (("ours", "FA3-MLIR"), ("cudnn", "cuDNN"), ("fa2", "FlashAttention-2"),
         ("fa3", "FlashAttention-3"))  # FA3 where the run timed it (bench/peer_fa3.py)


def latest_full_run(history: Path, dtype: str) -> Optional[dict]:
    """The last full-grid bench entry of `dtype` (entries before the dtype
    was recorded are bf16)."""
    best = None
    for line in history.read_text().splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if e.get("kind") != "bench" or not e.get("full"):
            continue
        if (e.get("meta") or {}).get("dtype", "bf16") != dtype:
            continue
        best = e
    return best


def series(entry: dict) -> Dict[Tuple[int, bool], Dict[str, List[Tuple[int, float]]]]:
    """{(hdim, causal): {peer: [(seqlen, tflops), ...] sorted by seqlen}}."""
    out: Dict[Tuple[int, bool], Dict[str, List[Tuple[int, float]]]] = {}
    for r in entry["rows"]:
        panel = out.setdefault((records.hdim_label(r), bool(r["causal"])), {})
        for key, _ in PEERS:
            v = r.get(key + "_tflops")
            if v is not None:
                panel.setdefault(key, []).append((int(r["seqlen"]), float(v)))
    for panel in out.values():
        for pts in panel.values():
            pts.sort()
    return out


def plot(entry: dict, out: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(entry)
    hdims = sorted({h for h, _ in data}, key=records.hdim_order)
    fig, axes = plt.subplots(2, len(hdims), figsize=(4.2 * len(hdims), 7.2),
                             squeeze=False, sharey=True)
    for col, h in enumerate(hdims):
        for row, causal in enumerate((False, True)):
            ax = axes[row][col]
            for i, (key, label) in enumerate(PEERS):
                pts = data.get((h, causal), {}).get(key, [])
                if pts:  # a peer's colour fixed by its place, also where another is missing
                    ax.plot([s for s, _ in pts], [t for _, t in pts], marker="o", color=f"C{i}",
                            label=label, linewidth=2 if key == "ours" else 1.2)
            ax.set_xscale("log", base=2)
            ax.set_title(f"head dim {h}, {'causal' if causal else 'full'}")
            ax.set_xlabel("sequence length")
            ax.grid(True, alpha=0.3)
            if col == 0:
                ax.set_ylabel("TFLOP/s")
    axes[0][0].legend(loc="lower right")
    meta = entry.get("meta") or {}
    fig.suptitle(f"Forward {meta.get('dtype', 'bf16')}, {meta.get('gpu', 'GPU')}, "
                 f"batch x seqlen = {meta.get('tokens', 16384)}, hidden "
                 f"{meta.get('hidden', 2048)} (run {entry['id']})")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--history", type=Path, default=HERE / "history.jsonl")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    entry = latest_full_run(a.history, a.dtype)
    if entry is None:
        ap.error(f"no full {a.dtype} benchmark run in {a.history}")
    out = plot(entry, a.out or a.history.parent / f"RESULTS-{a.dtype}.png")
    print(f"{out} (run {entry['id']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
