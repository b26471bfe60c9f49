"""FlashAttention-3's ``attention_chunk`` (chunked local attention, Llama 4's
local layers) as virtual batches of the existing kernels.

With a chunk of c keys, query row i of a sequence of Sq queries and Skv keys
sits at key position p = i + Skv - Sq (bottom-right aligned, as causal and
windows are) and sees only the keys of its chunk, floor(p / c) * c to
floor(p / c) * c + c - 1, intersected with causal or the window (FA3's
mask.h: the chunk bounds both sides of the local mask). A row whose p is
negative (more queries than keys) sees none.

No kernel here carries a chunk mask: a chunk is a sequence of its own. Each
(sequence, chunk) pair is a virtual sequence: the queries whose p falls in the
chunk against the chunk's keys. Within it the last query's position is the
last key's, so bottom-right alignment keeps every row's causal / window
offsets, and the mask is the one the kernels already apply. That is how
vLLM runs chunked local attention on FlashAttention too (its "virtual
batches"). Three forms:

* fold: Sq == Skv a multiple of c, the batch folded into B * Skv / c
  batches of c rows (views, no copy): any fixed-length kernel, the
  backward included (FA3's backward has no attention_chunk);
* segments: otherwise the variable-length kernel over cu_seqlens arrays of
  the virtual sequences, built on the device (no host sync: CUDA graphs and
  torch.compile see tensor arithmetic);
* a decoding step (one query row a batch): the row's chunk is a suffix of
  the keys, so the decoding kernel runs from the chunk's first key
  (cache_leftpad moved there, or the page table shifted by whole pages).

FA3's seqused_q is a virtual batch too (used_queries): each sequence's used
rows, then its unused rows as a sequence of no keys.
"""
from __future__ import annotations

import operator
from typing import Optional, Tuple


def check_chunk(fn: str, value) -> int:
    """attention_chunk as an int 0 (off) to 2^31-1."""
    at = f"{fn}: " if fn else ""
    if isinstance(value, bool):
        raise TypeError(f"{at}attention_chunk must be an integer (0: off), got bool")
    try:
        c = operator.index(value)
    except TypeError:
        raise TypeError(f"{at}attention_chunk must be an integer (0: off), got "
                        f"{type(value).__name__}") from None
    if not 0 <= c <= 2**31 - 1:
        raise ValueError(f"{at}attention_chunk must be 0 (off) to 2^31-1 keys, got {c}")
    return c


def changes_nothing(c: int, Sq: int, Skv: int, right_closed: bool = False) -> bool:
    """Whether a chunk of c keys masks nothing: every key in chunk 0, and no
    query before the first key (Sq <= Skv) or none that sees a key anyway
    (right_closed: causal, or a window's right bound 0)."""
    return c == 0 or (c >= Skv and (Sq <= Skv or right_closed))


def folds(c: int, Sq: int, Skv: int) -> int:
    """The number of chunks a batch folds into (Sq == Skv, a multiple of c),
    else 0."""
    if c and Sq == Skv and Sq % c == 0 and Sq > c:
        return Sq // c
    return 0


def fold(t, n: int):
    """[B, S, ...] as [B * n, S / n, ...]: a view where the batch stride is S
    row strides (a contiguous tensor's), else a copy."""
    return t.unflatten(1, (n, t.shape[1] // n)).flatten(0, 1)


def unfold_lse(lse, B: int, n: int):
    """A folded call's lse [B * n, H, c] as [B, H, n * c] (a copy)."""
    Bn, H, c = lse.shape
    return lse.reshape(B, n, H, c).transpose(1, 2).reshape(B, H, n * c)


def fold_descale(torch, name: str, d, B: int, n: int, c: int, rows_per_block: int):
    """An FP8 descale of a folded call: 0-d unchanged; [B, H] one row per
    fold; [B, H, blocks] of rows_per_block rows each, split at the chunks
    (c a multiple of rows_per_block, else a NotImplementedError)."""
    if d is None or not isinstance(d, torch.Tensor) or d.dim() == 0 or d.shape[0] != B:
        return d     # None, a 0-d factor, or a shape the FP8 checks refuse by name
    if d.dim() == 2:
        return d.repeat_interleave(n, dim=0)
    if d.dim() == 3 and d.shape[2] == n * c // rows_per_block and c % rows_per_block == 0:
        per = c // rows_per_block
        return d.unflatten(2, (n, per)).transpose(1, 2).flatten(0, 1)
    if d.dim() == 3 and c % rows_per_block:
        raise NotImplementedError(
            f"flash_attn_func: {name} per {rows_per_block} rows with attention_chunk {c}, not a "
            f"multiple of {rows_per_block}: each chunk runs as a batch of its own, and its rows "
            f"would start inside a block of scales")
    return d


def segments(torch, cu_q, cu_k, used_k, c: int, max_q: int, max_k: int,
             max_behind: Optional[int] = None) -> Tuple[object, object, object, int]:
    """The virtual sequences of a packed batch: (cu_seqlens_q, cu_seqlens_k,
    seqused_k, max_seqlen_q) for the variable-length kernel.

    cu_q, cu_k: int32 [B + 1] on the device; used_k: None or int32 [B]
    (sequence b's keys, clamped to 0 .. cu_k[b + 1] - cu_k[b] as the kernel
    clamps seqused_k). max_q, max_k: bounds of every sequence's query and
    key counts (the caller's contract, as max_seqlen_q's: rows of a longer
    sequence are not computed). max_behind: a bound of Sq - Skv over the
    sequences (None: max_q), how many chunks of rows may sit before the
    first key. Sequence b's virtual sequences, in row order, are chunks j =
    -ceil(max_behind / c) .. ceil(max_k / c) - 1: queries with positions
    j * c .. j * c + c - 1, keys j * c .. j * c + c - 1 of the sequence's
    (none for j < 0), so every query row is in exactly one."""
    B = cu_q.numel() - 1
    behind = max_q if max_behind is None else max(0, max_behind)
    jn, jk = -(-behind // c), max(1, -(-max_k // c))
    i64 = torch.int64
    q0, k0 = cu_q[:-1].to(i64), cu_k[:-1].to(i64)
    sq = cu_q[1:].to(i64) - q0
    sk = cu_k[1:].to(i64) - k0
    if used_k is not None:
        sk = torch.minimum(used_k.to(i64).clamp(min=0), sk)
    j = torch.arange(-jn, jk, dtype=i64, device=cu_q.device) * c      # chunk starts
    zero = torch.zeros((), dtype=i64, device=cu_q.device)

    def clamp(x, hi):          # x [B, J] into 0 .. hi [B, 1]
        return torch.minimum(torch.maximum(x, zero), hi)
    off = (sk - sq).unsqueeze(1)
    q_lo = clamp(j.unsqueeze(0) - off, sq.unsqueeze(1))
    k_lo = clamp(j.unsqueeze(0), sk.unsqueeze(1))
    k_hi = clamp(j.unsqueeze(0) + c, sk.unsqueeze(1))
    i32 = torch.int32
    seg_q = torch.cat(((q0.unsqueeze(1) + q_lo).flatten(), cu_q[B:].to(i64))).to(i32)
    seg_k = torch.cat(((k0.unsqueeze(1) + k_lo).flatten(), cu_k[B:].to(i64))).to(i32)
    used = (k_hi - k_lo).flatten().to(i32)
    return seg_q, seg_k, used, min(max_q, c)


def used_queries(torch, cu_q, cu_k, used_k, used_q):
    """FA3's seqused_q as virtual sequences: sequence b's first used_q[b]
    query rows (clamped to 0 .. its rows) against its keys, then its
    remaining rows as a sequence of no keys (their o 0 and lse -inf: FA3
    leaves them unwritten, "not used"). Returns (cu_seqlens_q,
    cu_seqlens_k, seqused_k) of 2 B sequences; bottom-right alignment then
    counts the used rows, as FA3's seqlen_q = seqused_q[b]."""
    B = cu_q.numel() - 1
    i64 = torch.int64
    q0, k0 = cu_q[:-1].to(i64), cu_k[:-1].to(i64)
    rows = cu_q[1:].to(i64) - q0
    cap = cu_k[1:].to(i64) - k0
    n = torch.minimum(used_q.to(i64).clamp(min=0), rows)
    keys = cap if used_k is None else used_k.to(i64)
    seq_q = torch.cat((torch.stack((q0, q0 + n), 1).flatten(), cu_q[B:].to(i64)))
    seq_k = torch.cat((torch.stack((k0, cu_k[1:].to(i64)), 1).flatten(), cu_k[B:].to(i64)))
    used = torch.stack((keys, torch.zeros_like(keys)), 1).flatten()
    return seq_q.to(torch.int32), seq_k.to(torch.int32), used.to(torch.int32)


def segment_count(B: int, c: int, max_q: int, max_k: int,
                  max_behind: Optional[int] = None) -> int:
    """How many virtual sequences segments() makes (its arrays' B)."""
    behind = max_q if max_behind is None else max(0, max_behind)
    return B * (-(-behind // c) + max(1, -(-max_k // c)))


def decode_start(torch, c: int, keys, leftpad):
    """A decoding step's first visible key per batch (int32 [B]): its one
    query row sits at the last key, position keys[b] - leftpad[b] - 1
    counted from the batch's first key leftpad[b] (None: 0), so its chunk
    starts at leftpad[b] + floor(that / c) * c (a batch with no keys keeps
    leftpad[b]). keys: int64 or int32 [B], the key rows after any append."""
    base = torch.zeros_like(keys) if leftpad is None else leftpad.to(keys.dtype)
    n = (keys - base - 1).clamp(min=0)
    return (base + torch.div(n, c, rounding_mode="floor") * c).to(torch.int32)
