"""How a compiled kernel issues its wgmmas, read from `cuobjdump -sass`.

A developer check, not needed to run kernels. Properties of the
steady-state loop, each lost silently (correct results, a few per cent
slower) when ptxas schedules differently:

- It issues S = Q K^T (SS form; RS from zero with FP8 head dim 128's Q in
  registers) and O += P V (RS form: A from registers;
  `.tnspB` at 16 bits, FP8's QGMMA reads a K-major B) back to back; between two HGMMAs there should be only the few uniform-register
  moves of the next descriptor. When ptxas cannot prove the descriptor math
  warp-uniform, it computes it per thread and moves it with R2UR before
  every HGMMA: that cost 1-5 % once (bench/NOTES.md, Log, "mask of
  boundary blocks").
- No register spills in the kv loop: no LDL / STL between the head of
  the innermost loop that issues the wgmmas and its back-edge
  (local_memory_in_wgmma_loops); a spill there costs every kv block.
- With lazy rescaling (`lazy_rescale 1` in the kernel's facts) the
  softmax's exponentials run while the P V wgmmas do: they sit between the
  loop's wait for S (`WARPGROUP.DEPBAR.LE gsb0, 0x1`) and its wait for
  P V (`... 0x0`). ptxas hoists that second wait above independent
  arithmetic unless a branch stops it (bench/NOTES.md).

    python3 -m fa3.sass [--cuobjdump PATH] KERNEL.cubin ...

prints one line per cubin, `OK` or `FAIL`, with the loop's HGMMA count, the
number of SASS instructions they span, where the facts ask for it the
exponentials issued before the P V wait, and the spill instructions in the
loop; exit status 1 if any fails.
"""

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Instructions spanned per HGMMA in the loop's batch: 2.2-3.5 when the
# descriptors stay in uniform registers (head dim 64/128/192/256), 6-7 with an
# R2UR pair and the descriptor arithmetic before each HGMMA.
MAX_SPAN_PER_HGMMA = 4.5
# HGMMAs further apart than this (in instructions) belong to different batches.
BATCH_GAP = 15


def _instruction_lines(sass_text):
    """The lines of `cuobjdump -sass` output that hold an instruction:
    `/*ADDR*/  INSTRUCTION ;`."""
    return [line for line in sass_text.splitlines()
            if line.strip().startswith("/*") and "*/" in line
            and line.strip()[2:6].strip("0123456789abcdef") == ""
            and line.split("*/", 1)[1].strip()]


def instructions(sass_text):
    """The instruction lines of `cuobjdump -sass` output, in order."""
    return [line.split(";")[0].split("*/", 1)[1].strip()
            for line in _instruction_lines(sass_text)]


def wgmma_batches(insts):
    """Runs of warpgroup MMA instructions (HGMMA: 16-bit operands, QGMMA:
    FP8): lists of instruction indices."""
    idx = [i for i, s in enumerate(insts) if "HGMMA" in s or "QGMMA" in s]
    runs, cur = [], []
    for i in idx:
        if cur and i - cur[-1] >= BATCH_GAP:
            runs.append(cur)
            cur = []
        cur.append(i)
    if cur:
        runs.append(cur)
    return runs


def addresses(sass_text):
    """The byte addresses of instructions() (the same lines, in order)."""
    return [int(line.strip()[2:6], 16) for line in _instruction_lines(sass_text)]


def wgmma_loops(insts, addrs):
    """The innermost loops that issue warpgroup MMAs (a kernel's kv loops):
    (first, last) instruction indices of each conditional backward branch's
    range that holds an HGMMA or QGMMA and no smaller such range. (The
    unconditional backward jumps are ptxas's out-of-line mbarrier retries
    returning to the code after their wait, not loops.)"""
    # (a cubin of several functions: each one's addresses start again at 0)
    fn = [0] * len(addrs)
    for i in range(1, len(addrs)):
        fn[i] = fn[i - 1] + (addrs[i] <= addrs[i - 1])
    where = {(f, a): i for i, (f, a) in enumerate(zip(fn, addrs))}
    loops = []
    for i, s in enumerate(insts):
        words = s.split()
        if len(words) != 3 or not words[0].startswith("@") or \
                words[1].split(".")[0] != "BRA" or not words[2].startswith("0x"):
            continue
        t = where.get((fn[i], int(words[2], 16)))
        if t is not None and t <= i and any(
                "HGMMA" in insts[j] or "QGMMA" in insts[j] for j in range(t, i + 1)):
            loops.append((t, i))
    return [(a, b) for a, b in loops
            if not any((c, d) != (a, b) and a <= c and d <= b for c, d in loops)]


def is_local(inst):
    """Whether an instruction of instructions() reads or writes local
    memory (LDL, STL: register spills)."""
    op = inst.split()[1] if inst.startswith("@") else inst.split()[0]
    return op.startswith(("LDL", "STL"))


def local_memory_in_wgmma_loops(insts, addrs):
    """LDL / STL instructions (spill traffic) inside wgmma_loops: spills
    there cost every kv block; elsewhere (a tile's prologue, the epilogue)
    once a tile."""
    inside = {j for a, b in wgmma_loops(insts, addrs) for j in range(a, b + 1)}
    return sum(is_local(insts[j]) for j in inside)


def is_rs(inst):
    """Whether a warpgroup MMA takes its A from registers (P V: `HGMMA ...
    R88, R180, gdesc[...]`), not from shared memory (`R24, gdesc[...]`)."""
    ops = inst.split(None, 1)[1].split(",") if " " in inst else []
    return len(ops) > 1 and ops[1].strip().startswith("R")


def starts_from_zero(inst):
    """Whether a warpgroup MMA ignores its accumulator (`..., RZ, !UPT`):
    the first k-step of a product that starts from zero, as S's does."""
    return inst.rstrip().endswith("RZ, !UPT")


def destination(inst):
    """A warpgroup MMA's first accumulator register (`R24` of `HGMMA ...
    R24, gdesc[...], ...`)."""
    return inst.split(None, 1)[1].split(",")[0].strip() if " " in inst else ""


def holds_s_and_pv(batch):
    """Whether a batch of warpgroup MMAs issues both S = Q K^T and P V: S
    from shared memory (SS) beside P V from registers (RS); or, with Q in
    registers (FP8 head dim 128), both RS, S's first k-step starting from
    zero and P V accumulating into other registers."""
    if {is_rs(i) for i in batch} == {True, False}:
        return True
    s_regs = {destination(i) for i in batch if is_rs(i) and starts_from_zero(i)}
    return bool(s_regs) and any(is_rs(i) and destination(i) not in s_regs for i in batch)


def _loop_run(insts):
    """Indices of the steady-state batch: the largest run holding both S's
    and P V's wgmmas (holds_s_and_pv); None if there is none."""
    best = None
    for run in wgmma_batches(insts):
        if holds_s_and_pv([insts[i] for i in run]) and (best is None or len(run) > len(best)):
            best = run
    return best


def loop_batch(insts):
    """(hgmma count, instructions spanned) of the steady-state batch; None
    if there is none."""
    best = _loop_run(insts)
    if best is None:
        return None
    return len(best), best[-1] - best[0] + 1


def exps_beside_pv(insts):
    """MUFU.EX2 instructions between the loop's wait for S and its wait for
    P V (the first `DEPBAR.LE gsb0, 0x1` after the loop batch and the next
    `0x0`); None if the loop has no such pair."""
    run = _loop_run(insts)
    if run is None:
        return None
    waits = [i for i in range(run[-1], len(insts))
             if insts[i].startswith("WARPGROUP.DEPBAR.LE gsb0")]
    if len(waits) < 2 or not insts[waits[0]].endswith("0x1") \
            or not insts[waits[1]].endswith("0x0"):
        return None
    return sum(insts[i].startswith("MUFU.EX2") for i in range(waits[0], waits[1]))


def read_facts(cubin):
    """The `key value` facts beside a cubin (<kernel>.facts); {} if none."""
    f = Path(cubin).with_suffix(".facts")
    if not f.exists():
        return {}
    return dict(line.split(" ", 1) for line in f.read_text().splitlines() if " " in line)


def run_cuobjdump(cuobjdump, path):
    """`cuobjdump -sass path`; cuobjdump runs nvdisasm, found on PATH: the
    directory of cuobjdump comes first (a toolkit's or the pip wheels' bin)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(os.path.abspath(cuobjdump)) + os.pathsep + env.get("PATH", "")
    return subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True,
                          env=env)


def judge(insts, facts, addrs=None):
    """The loop's properties, for a kernel with these facts: dict with
    batch ((hgmma count, span) or None), tight, exps and need (None unless
    the facts say lazy_rescale 1), scheduled (tight, and the exponentials
    beside P V where needed), spills (LDL / STL in the kv loop; None
    without the instructions' addresses) and ok (scheduled, no spill)."""
    batch = loop_batch(insts)
    spills = None if addrs is None else local_memory_in_wgmma_loops(insts, addrs)
    tight = batch is not None and batch[1] <= MAX_SPAN_PER_HGMMA * batch[0]
    exps = need = None
    if facts.get("lazy_rescale") == "1":
        # each thread exponentiates block_n / 2 scores per kv block
        need = int(facts["block_n"]) // 2
        exps = exps_beside_pv(insts) or 0
    scheduled = tight and (need is None or exps >= need)
    return dict(batch=batch, tight=tight, exps=exps, need=need, scheduled=scheduled,
                spills=spills, ok=scheduled and not spills)


def check_cubin(path, cuobjdump, allow_spills=False):
    try:
        p = run_cuobjdump(cuobjdump, path)
    except OSError as e:
        return False, f"cannot run cuobjdump {cuobjdump!r}: {e.strerror}"
    if p.returncode:
        return False, f"cuobjdump failed: {p.stderr.strip()[:200]}"
    j = judge(instructions(p.stdout), read_facts(path), addresses(p.stdout))
    ok = j["scheduled"] if allow_spills else j["ok"]
    if j["batch"] is None:
        return False, "no HGMMA batch with both S's and P V's wgmmas"
    n, span = j["batch"]
    why = f"{n} HGMMA over {span} instructions (limit {MAX_SPAN_PER_HGMMA * n:.0f})"
    if j["need"] is not None:
        why += f"; {j['exps']} exp2 beside P V (need {j['need']})"
    why += (f"; {j['spills']} spill instructions in the kv loop"
            + (" (allowed)" if allow_spills else " (need 0)"))
    return ok, why


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump"))
    ap.add_argument("--allow-spills", action="store_true",
                    help="report spills in the kv loop without failing on them")
    ap.add_argument("cubins", nargs="+")
    a = ap.parse_args(argv)
    if not a.cuobjdump:
        ap.error("cuobjdump not found (PATH or --cuobjdump)")
    bad = 0
    for c in a.cubins:
        ok, why = check_cubin(c, a.cuobjdump, a.allow_spills)
        bad += not ok
        print(f"{'OK' if ok else 'FAIL'} {c}: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
