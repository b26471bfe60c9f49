#!/usr/bin/env python3
"""GPU correctness check of the decoding kernels (split-KV with GQA packing:
fa3-compile --decode, facts `split_kv 1`) through
fa3.torch_api.flash_attn_with_kvcache (run on an H100/H200).

    python3 test/gpu/check_decode.py KERNEL_DIR [--out OUT_DIR]
    python3 test/gpu/check_decode.py KERNEL_DIR --sanitize   # small cases, for
        `compute-sanitizer --tool memcheck|racecheck|synccheck python3 ...`

For every decoding kernel of the directory and every case (cases(): Sq 1
(decoding), 4 and 17 (speculative, odd); Hq/Hkv 32/8 and 64/8 (GQA), 16/1
(MQA), 8/8 (MHA); Skv 1, 113, 1023, 4224 and, on the bf16 head-dim-128
kernels only, 131072; num_splits 0 (the heuristic), 1, 3 and 128;
cache_seqlens ragged per batch (0, 1, 17, 1000, 4096 over a larger
capacity, passed as a 4-byte-offset view) or an int; with and without
return_softmax_lse): fresh random inputs (the cache rows past a batch's
length filled with large finite values, which must be masked out), o and
lse poisoned with NaN, then per batch check_fwd's criteria against its
fp32 reference on that batch's keys alone (masks bottom-right aligned to
its length): every element written, ||o - ref|| / ||ref|| < 1e-2 over rows
that see a key, max |lse - ref| < 1e-3, rows that see no key exactly 0 and
-inf (a batch of length 0 included, through the splits' merge); and the
public call on the same inputs gives bit-identical outputs, also launched
one CTA a SM (ctas_per_sm=1) and as many as fit (ctas_per_sm=2). The head-dim-128
kernels run every case, the others a subset (QUICK_CASES). Paged caches
(PAGED_CASES: page_table with page sizes 1, 2, 4, 16, 64, 128, 256 and twice
block_n, those the kernel takes; a pool of the table's pages in a random
order plus unused ones, every row that is no batch's key large finite
values; ragged, int and no cache_seqlens; Sq 1 and 4; GQA 32/8 and 64/8;
num_splits 0, 1, 3; a table that is a column slice of a wider one; 128k):
the same criteria per batch against the reference on its gathered keys,
the public call bit-identical, and the contiguous call on the gathered
cache bit-identical too (head dims 128 and 256 every case, the others
PAGED_QUICK). Plus per kernel
the SASS check of check_fwd. New keys and values appended in the call
(APPEND_CASES, every kernel: flash_attn_with_kvcache(k=, v=) on a
contiguous cache and on paged ones of page sizes 16, 64 and 256; Snew 1
and 5; ragged cache_seqlens from 0 to a cache filled exactly by the
append, the new rows at a page's last row, at the next page's first and
across page boundaries): the whole cache or page pool after the call
equal to torch's append (the new rows exactly, every other element
untouched, unused pages included), cache_seqlens unchanged, o and lse by
check_fwd's criteria per batch against the fp32 reference over its
cache_seqlens[b] + Snew keys, the public call repeated on the same inputs
bit-identical (the caches unchanged by it), and bit-identical to the
attention alone over the appended cache. Once per run: misuse refused
with its message (a GQA group that does not divide block_m,
cache_seqlens of the wrong dtype, count, device or value, page sizes 24
and 12 and bad page tables, appends without cache_seqlens, without room,
of the wrong shape, dtype or device or into a strided cache, rotary
embedding without new rows or too wide, cache_batch_idx with a page
table, cache_leftpad with a multi-page table or of the wrong dtype or
count, grad), no keys at all (Skv = 0), a CUDA-graph capture
of a split call replayed on new inputs (q and cache_seqlens changed in
place) equal to eager calls, the same for a paged call (the page table
changed in place), torch.compile(fullgraph=True) equal to eager,
contiguous and paged; and appending: a captured call (contiguous and
paged) replayed twice, the second time on new q, k, v and advanced
cache_seqlens written in place, each replay equal to an eager call on a
copy of the caches and to torch's append, and torch.compile(fullgraph=True)
of a function that appends, reads the cache and attends again equal to
eager (the caches written alike, the read seeing the new rows; contiguous
and paged). Once per run, under compute-sanitizer too: page-table entries
outside the pool (its page count, -1) where the append writes and the
attention reads: nothing written there (guard pages past the pool, in the
same allocation, unchanged), those pages read as zeros (TMA boxes) or,
with pages of 8 rows that the producer warp copies, as the pool's last
page (the entry clamped into the pool). On the head dim
128 kernels: rotary embedding (ROTARY_CASES: q and the new keys against
a float64 rotation, the cache's new rows within one rounding of it) and
cache_batch_idx (BATCH_IDX_CASES: each batch over its row of the caches,
with and without an append). On every kernel, also under --sanitize:
cache_leftpad (LEFTPAD_CASES: ragged pads, without cache_seqlens, out of
range (clamped), appending, with cache_batch_idx (pages of the whole cache,
a cache shorter than block_n too), the rows outside each batch's keys large
finite values; per batch against the fp32 reference over its keys alone;
one case also through torch.compile). On the head dim 128 kernels, FA3's
packed new rows (PACKED_APPEND_CASES: k, v [T_new, Hkv, D] with
cu_seqlens_k_new, [B, 1] and packed ragged queries, contiguous and paged
caches, a batch whose rows run past Skv, with and without rotary
embedding): the caches after the call equal to the expected append (rows
past Skv dropped; rotated rows within one rounding of the float64
rotation), o and lse per batch against the reference over the appended
keys. Packed queries (PACKED_Q_CASES: flash_attn_with_kvcache with
cu_seqlens_q; ragged ones through the varlen and paged varlen kernels of
the same variant, which the directory must hold: fa3-compile --all
--varlen, and --varlen --paged) on the head dim 128 kernels, their paged
cases (pages of 2 and 16 copied by the producer warps, 64 and 256 boxed)
also at head dims 64, 96 and 256. The FP8 decoding kernels (dtype e4m3:
an FP8 KV cache) take FP8_CASES only (also under --sanitize, one case): e4m3 q and caches with
FA3's [B, Hkv] descales (q's one per kv head), contiguous and paged,
split, several query rows, the append kernel and packed new rows, and
(FP8_ROUTE_CASES) cache_leftpad, cache_batch_idx, a decoding step under
attention_chunk and uniform packed queries; o and
lse against the fp32 reference on the dequantized inputs by check_fp8's
bounds, new rows in the cache bit for bit; the cases without new rows
also through torch.compile(fullgraph=True) and a CUDA graph, bit-identical
to the eager call. With --out:
appends the run to OUT/history.jsonl (kind check_decode; a full run also
rewrites its table in OUT/RESULTS.md). Exit status 1 on any failure.
"""
import datetime
import itertools
import math
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test" / "gpu"))

RAGGED = [0, 1, 17, 1000, 4096]

# (label, B, Sq, Hq, Hkv, Skv, num_splits, cache_seqlens, with_lse):
# cache_seqlens None (every key), a list (a tensor of them) or an int
CASES = [
    ("decode GQA 32/8, heuristic", 2, 1, 32, 8, 4224, 0, None, True),
    ("decode GQA 64/8, 3 splits", 1, 1, 64, 8, 1023, 3, None, True),
    ("decode MQA 16/1, heuristic", 3, 1, 16, 1, 113, 0, None, True),
    ("decode MHA 8/8, Skv 1", 2, 1, 8, 8, 1, 0, None, True),
    ("decode GQA 32/8, no lse", 2, 1, 32, 8, 4224, 0, None, False),
    ("speculative Sq 4 GQA 32/8, 128 splits", 2, 4, 32, 8, 4224, 128, None, True),
    ("odd Sq 17 MQA 16/1, 3 splits", 1, 17, 16, 1, 1023, 3, None, True),
    ("odd Sq 17 MHA 8/8, 1 split", 2, 17, 8, 8, 4224, 1, None, True),
    ("ragged cache_seqlens GQA 32/8, heuristic", 6, 1, 32, 8, 8192, 0, RAGGED + [8192], True),
    ("ragged cache_seqlens GQA 32/8, 1 split", 6, 1, 32, 8, 8192, 1, RAGGED + [8192], True),
    ("ragged Sq 4 GQA 64/8, 128 splits", 5, 4, 64, 8, 4224, 128, RAGGED, True),
    ("ragged Sq 17 MQA 16/1, 3 splits, no lse", 5, 17, 16, 1, 4224, 3, RAGGED, False),
    ("int cache_seqlens 1000 of 1023, Sq 17 MHA 8/8, 3 splits", 2, 17, 8, 8, 1023, 3, 1000,
     True),
    ("128k GQA 32/8, heuristic", 1, 1, 32, 8, 131072, 0, None, True),
    ("128k ragged GQA 64/8, heuristic", 2, 1, 64, 8, 131072, 0, [4096, 131071], True),
    # outside 0 .. Skv (the caller's contract): the kernel clamps, so no
    # tile reads past the cache and the result is the clamped lengths'
    ("out-of-range cache_seqlens -7, 1000, 2^31-1 of 300: clamped, Sq 4 GQA 32/8, 3 splits", 3,
     4, 32, 8, 300, 3, [-7, 1000, 2**31 - 1], True),
]
# the other head dims: a decoding step, speculative rows over MQA, ragged
# lengths through the heuristic's splits and through 128 splits
QUICK_CASES = ["decode GQA 32/8, heuristic", "odd Sq 17 MQA 16/1, 3 splits",
               "ragged cache_seqlens GQA 32/8, heuristic", "ragged Sq 4 GQA 64/8, 128 splits",
               "out-of-range cache_seqlens -7, 1000, 2^31-1 of 300: clamped, Sq 4 GQA 32/8, "
               "3 splits"]
# small ones for compute-sanitizer: every path (1 split, a few, more splits
# than kv blocks, lengths 0 and 1, rows without keys)
SANITIZE_CASES = [
    ("small ragged Sq 4 GQA 16/2, 3 splits", 3, 4, 16, 2, 300, 3, [0, 1, 300], True),
    ("small MHA 8/8, 1 split", 2, 1, 8, 8, 200, 1, None, True),
    ("small GQA 32/8, 128 splits", 1, 1, 32, 8, 1023, 128, [517], False),
    ("small out-of-range cache_seqlens -7, 1000 of 300, 3 splits", 2, 1, 16, 2, 300, 3,
     [-7, 1000], True),
]
LONG = 131072

# Paged caches (page_table, FA3's): (label, B, Sq, Hq, Hkv, capacity,
# num_splits, cache_seqlens, with_lse, page_size, table). The table has
# max_pages = ceil(capacity / page_size) columns (the logical Skv is
# max_pages * page_size) of distinct pages of the pool in a random order;
# the pool holds EXTRA_PAGES unused pages more. page_size "2bn": twice the
# kernel's block_n (whole blocks inside a page at any block_n); table
# "slice": a column slice of a wider table (its row stride past max_pages).
EXTRA_PAGES = 7
PAGED_CASES = []
for _ps in (16, 64, 128, 256):
    PAGED_CASES += [
        (f"paged {_ps}: ragged GQA 32/8, heuristic", 6, 1, 32, 8, 8192, 0, RAGGED + [8192],
         True, _ps, None),
        (f"paged {_ps}: ragged Sq 4 GQA 64/8, 3 splits", 5, 4, 64, 8, 4224, 3, RAGGED, True,
         _ps, None),
    ]
PAGED_CASES += [
    ("paged 128: ragged GQA 32/8, 1 split", 6, 1, 32, 8, 8192, 1, RAGGED + [8192], True, 128,
     None),
    ("paged 64: every key (no cache_seqlens) GQA 32/8, 3 splits", 2, 1, 32, 8, 1000, 3, None,
     True, 64, None),
    ("paged 16: int cache_seqlens 1000, Sq 4 GQA 64/8, heuristic, no lse", 2, 4, 64, 8, 1023, 0,
     1000, False, 16, None),
    ("paged 256: table a column slice of a wider one, ragged GQA 32/8, heuristic", 5, 1, 32, 8,
     4096, 0, RAGGED, True, 256, "slice"),
    ("paged 2bn: ragged Sq 4 GQA 64/8, 3 splits", 5, 4, 64, 8, 4224, 3, RAGGED, True, "2bn",
     None),
    ("paged 256: 128k ragged GQA 64/8, heuristic", 2, 1, 64, 8, LONG, 0, [4096, LONG - 1], True,
     256, None),
    # pages of fewer than 8 rows (SGLang's 1): boxes of part of a swizzle atom
    ("paged 1: ragged GQA 32/8, heuristic", 5, 1, 32, 8, 2048, 0, RAGGED[:4] + [2048], True, 1,
     None),
    ("paged 2: ragged Sq 4 GQA 64/8, 3 splits", 5, 4, 64, 8, 1056, 3, [0, 1, 17, 1000, 1056],
     True, 2, None),
    ("paged 4: ragged GQA 32/8, heuristic", 6, 1, 32, 8, 4096, 0, RAGGED + [4096], True, 4,
     None),
]
# the head dims other than 128 and 256 (whose block_n is 128 or 64, like
# theirs): page size 16 and twice block_n (those that it takes)
PAGED_QUICK = ["paged 16: ragged GQA 32/8, heuristic", "paged 16: ragged Sq 4 GQA 64/8, 3 splits",
               "paged 2bn: ragged Sq 4 GQA 64/8, 3 splits",
               "paged 64: every key (no cache_seqlens) GQA 32/8, 3 splits",
               "paged 1: ragged GQA 32/8, heuristic"]
PAGED_SANITIZE_CASES = [
    ("small paged 16: ragged Sq 4 GQA 16/2, 3 splits", 3, 4, 16, 2, 300, 3, [0, 1, 300], True,
     16, None),
    ("small paged 2: ragged GQA 16/2, 3 splits", 3, 1, 16, 2, 300, 3, [0, 1, 300], True, 2,
     None),
    ("small paged 2bn: GQA 32/8, 128 splits", 1, 1, 32, 8, 1023, 128, [517], False, "2bn",
     "slice"),
]

# New keys and values appended in the call (flash_attn_with_kvcache(k=, v=),
# FA3's): (label, B, Sq, Hq, Hkv, capacity, num_splits, cache_seqlens before
# the call, Snew, with_lse, page_size: None for a contiguous cache). A paged
# cache's logical Skv is ceil(capacity / page_size) * page_size. The lengths
# include 0, a cache filled exactly by the append and, paged, new rows at a
# page's last row, at the next page's first and across a page boundary.
APPEND_CASES = [
    ("append Snew 1: ragged GQA 32/8, heuristic", 6, 1, 32, 8, 4224, 0,
     [0, 1, 17, 1000, 4096, 4223], 1, True, None),
    ("append Snew 5, Sq 5 (speculative): ragged GQA 64/8, 3 splits", 5, 5, 64, 8, 4224, 3,
     [0, 1, 17, 1000, 4219], 5, True, None),
    ("append Snew 5, Sq 1: MQA 16/1, 1 split, no lse", 3, 1, 16, 1, 1023, 1, [0, 500, 1018], 5,
     False, None),
    # zero new rows: nothing appended, the attention on cache_seqlens alone
    ("append Snew 0: GQA 16/2, heuristic", 3, 1, 16, 2, 1023, 0, [0, 500, 1023], 0, True,
     None),
    # outside the caller's contract: rows at or past the cache are not
    # written (a negative count: none), the attention over the clamped
    # lengths
    ("append out of range: cache_seqlens -3, 298, 1000 of 300, Snew 5, 3 splits", 3, 1, 16, 2,
     300, 3, [-3, 298, 1000], 5, True, None),
]
for _ps in (16, 64, 256):
    APPEND_CASES += [
        (f"append paged {_ps}: Snew 1 at page edges, ragged GQA 32/8, heuristic", 6, 1, 32, 8,
         4096, 0, [0, _ps - 1, _ps, 2 * _ps - 1, 1000, 4095], 1, True, _ps),
        (f"append paged {_ps}: Snew 5 across page boundaries, Sq 5 GQA 64/8, 3 splits", 5, 5,
         64, 8, 4096, 3, [0, _ps - 2, 3 * _ps - 1, 1000, 4091], 5, True, _ps),
    ]
APPEND_SANITIZE_CASES = [
    ("small append paged 16: Snew 5 across a page, Sq 5 GQA 16/2, 3 splits", 3, 5, 16, 2, 300,
     3, [0, 14, 299], 5, True, 16),
    ("small append Snew 1: MHA 8/8, 1 split", 2, 1, 8, 8, 200, 1, [0, 199], 1, True, None),
    ("small append out of range: cache_seqlens -3, 198 of 200, Snew 5", 2, 1, 8, 8, 200, 1,
     [-3, 198], 5, True, None),
]


def cases(kf_head_dim, kf_dtype, sanitize=False):
    """The cases a kernel of this head dim and dtype runs: every case for
    head dim 128 (the 128k ones for bf16 only), QUICK_CASES for the others,
    SANITIZE_CASES under compute-sanitizer."""
    if sanitize:
        return list(SANITIZE_CASES)
    if kf_head_dim != 128:
        return [c for c in CASES if c[0] in QUICK_CASES]
    return [c for c in CASES if c[5] < LONG or kf_dtype == "bf16"]


def page_size_of(kf, case):
    ps = case[9]
    return 2 * kf.block_n if ps == "2bn" else ps


def takes_page_size(kf, ps):
    """Whether the kernel takes this page size (fa3rt: one that divides
    block_n or that block_n divides)."""
    return ps >= 1 and (kf.block_n % ps == 0 or ps % kf.block_n == 0)


def paged_cases(kf, sanitize=False):
    """The paged cases a kernel runs: all at head dims 128 and 256 (the
    128k one on bf16 head dim 128 only), PAGED_QUICK at the others; those
    whose page size it takes."""
    if sanitize:
        cs = list(PAGED_SANITIZE_CASES)
    elif kf.head_dim in (128, 256):
        cs = [c for c in PAGED_CASES
              if c[5] < LONG or (kf.head_dim == 128 and kf.dtype == "bf16")]
    else:
        cs = [c for c in PAGED_CASES if c[0] in PAGED_QUICK]
    return [c for c in cs if takes_page_size(kf, page_size_of(kf, c))]


def clamped(n, Skv):
    """A key count as the kernel reads it: clamped to 0 .. Skv."""
    return min(max(int(n), 0), Skv)


def lengths(case):
    """Each batch's key count of a case: its cache_seqlens (clamped to 0 ..
    Skv, as the kernel does), else Skv."""
    _, B, _, _, _, Skv, _, lens, _ = case
    if lens is None:
        return [Skv] * B
    if isinstance(lens, int):
        return [clamped(lens, Skv)] * B
    return [clamped(n, Skv) for n in lens]


def resolved_splits(kf, case, sms):
    """The split count the runtime launches (fa3rt_fwd_plan: the heuristic
    over the kernel's packed tiles and Skv's kv blocks where num_splits is
    0)."""
    from fa3 import runtime
    _, B, Sq, Hq, Hkv, Skv, n, _, _ = case
    if n:
        return n
    g = Hq // Hkv
    tiles = -(-Sq * g // kf.block_m) * Hkv * B
    return runtime.num_splits_heuristic(tiles, -(-Skv // kf.block_n), sms)


def compare_batches(kf, q, k, v, L, o, lse):
    """Per batch b, check_fwd's criteria for o[b] (and lse[b]) against the
    fp32 reference on its first L[b] keys of the contiguous caches k, v
    [B, Skv, Hkv, D] (masks bottom-right aligned to L[b]); a batch of no
    keys: every row 0 and -inf."""
    import torch
    import check_fwd
    _, Sq, Hq, _ = q.shape
    Dv = v.shape[3]
    res = {"unwritten": 0, "rel_err_o": 0.0, "max_abs_err_lse": 0.0, "empty_rows": 0,
           "empty_rows_ok": True, "ok": True}
    for b, n in enumerate(L):
        if n:
            ref_o, ref_lse, empty = check_fwd.reference(q[b:b + 1], k[b:b + 1, :n],
                                                        v[b:b + 1, :n], kf.scale, kf)
        else:  # no keys: every row empty
            ref_o = torch.zeros(1, Sq, Hq, Dv, device="cuda")
            ref_lse = torch.full((1, Hq, Sq), float("-inf"), device="cuda")
            empty = torch.ones(Sq, dtype=torch.bool, device="cuda")
        c = check_fwd.compare(o[b:b + 1], None if lse is None else lse[b:b + 1], ref_o,
                              ref_lse, empty)
        res["unwritten"] += c["unwritten"]
        res["rel_err_o"] = max(res["rel_err_o"], c["rel_err_o"])
        res["max_abs_err_lse"] = max(res["max_abs_err_lse"], c.get("max_abs_err_lse", 0.0))
        res["empty_rows"] += c["empty_rows"]
        res["empty_rows_ok"] &= c["empty_rows_ok"]
        res["ok"] &= c["ok"]
    return res


def run_case(kf, case, seed, sms):
    import torch
    import check_fwd
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, Skv, num_splits, lens, with_lse = case
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    D, Dv = kf.head_dim, kf.head_dim_v
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    k = check_fwd.rand((B, Skv, Hkv, D), dt, gen)
    v = check_fwd.rand((B, Skv, Hkv, Dv), dt, gen)
    L = lengths(case)
    for b, n in enumerate(L):
        # past the batch's keys: large finite values (masked, or the scores
        # and o would be far off)
        k[b, n:] = 8.0
        v[b, n:] = 100.0
    if isinstance(lens, list):
        # a view 4 bytes into its storage: int32 alignment suffices
        seqlens = torch.tensor([-7] + lens, dtype=torch.int32, device="cuda")[1:]
    else:
        seqlens = lens
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)

    # the outputs poisoned: an element not written stays NaN (the internal
    # call takes out / lse_out, which flash_attn_with_kvcache, as FA3's, has not)
    o = torch.full((B, Sq, Hq, Dv), float("nan"), dtype=dt, device="cuda")
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda") if with_lse else None
    r = torch_api._decode(torch, "flash_attn_with_kvcache", q, k, v, seqlens, None,
                          kw["causal"], kw["window_size"], kw["softcap"], num_splits, 0,
                          with_lse, None, kf, o, lse, None)
    assert (r[0] if with_lse else r) is o
    # the public call on the same inputs: bit-identical
    r2 = torch_api.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens,
                                           num_splits=num_splits,
                                           return_softmax_lse=with_lse, **kw)
    # and launched one CTA a SM (all the shared memory a block may have):
    # the same kernel, so bit-identical too
    r3 = torch_api.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens,
                                           num_splits=num_splits,
                                           return_softmax_lse=with_lse, ctas_per_sm=1, **kw)
    # and as many a SM as fit (the default's other choice)
    r4 = torch_api.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens,
                                           num_splits=num_splits,
                                           return_softmax_lse=with_lse, ctas_per_sm=2, **kw)
    torch.cuda.synchronize()
    o2, lse2 = (r2 if with_lse else (r2, None))
    o3, lse3 = (r3 if with_lse else (r3, None))
    o4, lse4 = (r4 if with_lse else (r4, None))
    res = compare_batches(kf, q, k, v, L, o, lse)
    same = torch.equal(o, o2) and (lse is None or torch.equal(lse, lse2))
    one_cta = (torch.equal(o, o3) and (lse is None or torch.equal(lse, lse3))
               and torch.equal(o, o4) and (lse is None or torch.equal(lse, lse4)))
    res["repeat_identical"] = bool(same)
    res["one_cta_per_sm_identical"] = bool(one_cta)
    res["ok"] = bool(res["ok"] and same and one_cta)
    return dict(kernel=kf.kernel, case=label, layout="BSHD cache", B=B, Sq=Sq, Skv=Skv, Hq=Hq,
                Hkv=Hkv, num_splits=num_splits, splits=resolved_splits(kf, case, sms),
                cache_seqlens=lens, **res)


def seqlens_arg(lens):
    """A case's cache_seqlens as passed: a list as an int32 tensor (a view 4
    bytes into its storage: int32 alignment suffices), else as is."""
    import torch
    if isinstance(lens, list):
        return torch.tensor([-7] + lens, dtype=torch.int32, device="cuda")[1:]
    return lens


def paged_inputs(kf, B, Hkv, Skv, ps, L, gen, table_kind=None, fill=True):
    """A page pool k, v [num_pages, ps, Hkv, D] of B * max_pages pages in a
    random order plus EXTRA_PAGES unused ones, the table int32 [B,
    max_pages] (a column slice of a wider one with table_kind "slice"), and
    the contiguous caches [B, Skv, Hkv, D] it describes (gathered). With
    fill, every row of the pool that is no batch's key (unused pages, rows
    of a batch's pages past its length L[b]) holds large finite values,
    which must be masked out."""
    import torch
    import check_fwd
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    P = Skv // ps
    n_pages = B * P + EXTRA_PAGES
    k = check_fwd.rand((n_pages, ps, Hkv, D), dt, gen)
    v = check_fwd.rand((n_pages, ps, Hkv, Dv), dt, gen)
    perm = torch.randperm(n_pages, generator=gen, device="cuda")
    table = perm[:B * P].view(B, P).to(torch.int32)
    if fill:
        key = torch.zeros(n_pages * ps, dtype=torch.bool, device="cuda")
        r = torch.arange(Skv, device="cuda")
        for b, n in enumerate(L):
            rows = table[b].long().repeat_interleave(ps) * ps + r % ps   # key r's pool row
            key[rows[:n]] = True
        k.view(n_pages * ps, Hkv, D)[~key] = 8.0
        v.view(n_pages * ps, Hkv, Dv)[~key] = 100.0
    kc = k[table.long()].reshape(B, Skv, Hkv, D)
    vc = v[table.long()].reshape(B, Skv, Hkv, Dv)
    if table_kind == "slice":
        wide = torch.full((B, P + 5), -1, dtype=torch.int32, device="cuda")
        wide[:, :P] = table
        table = wide[:, :P]
        assert table.stride(0) == P + 5
    return k, v, table, kc, vc


def run_paged_case(kf, case, seed, sms):
    """A paged case: the internal call (outputs poisoned), the public call
    (bit-identical) and the contiguous call on the gathered caches
    (bit-identical: the same blocks of keys, the masked rows aside), and
    per batch the fp32 reference on its keys."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, cap, num_splits, lens, with_lse, _, table_kind = case
    ps = page_size_of(kf, case)
    P = -(-cap // ps)
    Skv = P * ps                                      # the logical key length
    L = lengths((label, B, Sq, Hq, Hkv, Skv, num_splits, lens, with_lse))
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    D, Dv = kf.head_dim, kf.head_dim_v
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    k, v, table, kc, vc = paged_inputs(kf, B, Hkv, Skv, ps, L, gen, table_kind)
    seqlens = seqlens_arg(lens)
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)
    o = torch.full((B, Sq, Hq, Dv), float("nan"), dtype=dt, device="cuda")
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda") if with_lse else None
    r = torch_api._decode(torch, "flash_attn_with_kvcache", q, k, v, seqlens, None,
                          kw["causal"], kw["window_size"], kw["softcap"], num_splits, 0,
                          with_lse, None, kf, o, lse, None, page_table=table)
    assert (r[0] if with_lse else r) is o
    r2 = torch_api.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens, page_table=table,
                                           num_splits=num_splits, return_softmax_lse=with_lse,
                                           **kw)
    r3 = torch_api.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens,
                                           num_splits=num_splits, return_softmax_lse=with_lse,
                                           **kw)
    torch.cuda.synchronize()
    o2, lse2 = (r2 if with_lse else (r2, None))
    o3, lse3 = (r3 if with_lse else (r3, None))
    res = compare_batches(kf, q, kc, vc, L, o, lse)
    same = torch.equal(o, o2) and (lse is None or torch.equal(lse, lse2))
    contig = torch.equal(o, o3) and (lse is None or torch.equal(lse, lse3))
    res["repeat_identical"] = bool(same)
    res["same_as_contiguous"] = bool(contig)
    if not contig:
        res["max_abs_diff_vs_contiguous"] = float((o.float() - o3.float()).abs().max().item())
    res["ok"] = bool(res["ok"] and same and contig)
    splits = resolved_splits(kf, (label, B, Sq, Hq, Hkv, Skv, num_splits, lens, with_lse), sms)
    return dict(kernel=kf.kernel, case=label, layout="paged cache", B=B, Sq=Sq, Skv=Skv, Hq=Hq,
                Hkv=Hkv, page_size=ps, pages=k.shape[0], table_stride=table.stride(0),
                num_splits=num_splits, splits=splits, cache_seqlens=lens, **res)


def append_cases(kf, sanitize=False):
    """The append cases a kernel runs: every one (APPEND_SANITIZE_CASES
    under compute-sanitizer), those whose page size it takes."""
    cs = APPEND_SANITIZE_CASES if sanitize else APPEND_CASES
    return [c for c in cs if c[10] is None or takes_page_size(kf, c[10])]


def append_inputs(kf, case, gen):
    """q, the caches (contiguous [B, Skv, Hkv, D], every row past a batch's
    length large finite values; or paged_inputs' pool and table, the same
    way), the new rows k_new, v_new [B, Snew, Hkv, D / Dv], and the logical
    Skv."""
    import check_fwd
    _, B, Sq, Hq, Hkv, cap, _, lens, snew, _, ps = case
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    kn, vn = new_rows(kf, B, snew, Hkv, gen)
    if ps is None:
        Skv, table = cap, None
        k = check_fwd.rand((B, Skv, Hkv, D), dt, gen)
        v = check_fwd.rand((B, Skv, Hkv, Dv), dt, gen)
        for b, n in enumerate(lens):
            k[b, clamped(n, Skv):] = 8.0
            v[b, clamped(n, Skv):] = 100.0
    else:
        Skv = -(-cap // ps) * ps
        k, v, table, _, _ = paged_inputs(kf, B, Hkv, Skv, ps, lens, gen)
    return q, k, v, kn, vn, table, Skv


def new_rows(kf, B, snew, Hkv, gen):
    """Fresh new keys and values [B, Snew, Hkv, D / Dv] (kf's dtype) to
    append to a cache."""
    import check_fwd
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    return (check_fwd.rand((B, snew, Hkv, kf.head_dim), dt, gen),
            check_fwd.rand((B, snew, Hkv, kf.head_dim_v), dt, gen))


def write_rows(ek, ev, kn, vn, idx, lens):
    """The expected contiguous caches ek, ev after an append: batch b's new
    rows at rows lens[b] .. of cache row idx[b]."""
    snew = kn.shape[1]
    for b, n in enumerate(lens):
        ek[idx[b], n:n + snew], ev[idx[b], n:n + snew] = kn[b], vn[b]


def appended(k, v, kn, vn, lens, table, ps, Skv):
    """The caches (or pools) k, v after the append, by torch: batch b's new
    row s at its row lens[b] + s, through the page table where given (row r
    in page table[b, r // ps] at r % ps), where that row lies in the cache
    (0 .. Skv - 1; a negative lens[b] writes none, as its unsigned reading
    in the kernel; a page outside the pool, none either, as the kernel skips
    it); every other element as it was."""
    ek, ev = k.clone(), v.clone()
    lens = [int(n) for n in lens]
    pages = None if table is None else table.cpu().tolist()
    for b, n in enumerate(lens):
        for s in range(kn.shape[1]):
            r = n + s
            if n < 0 or r >= Skv:
                continue
            if pages is None:
                ek[b, r], ev[b, r] = kn[b, s], vn[b, s]
            else:
                page = pages[b][r // ps]
                if 0 <= page < ek.shape[0]:
                    ek[page, r % ps], ev[page, r % ps] = kn[b, s], vn[b, s]
    return ek, ev


def gathered(k, v, table):
    """A paged pool's caches [B, Skv, Hkv, D] in key order (contiguous
    caches as they are)."""
    if table is None:
        return k, v
    B, P = table.shape
    idx = table.long()
    return (k[idx].reshape(B, P * k.shape[1], *k.shape[2:]),
            v[idx].reshape(B, P * v.shape[1], *v.shape[2:]))


def wrong_rows(got, want):
    """Rows (of D elements) of a cache or pool that differ."""
    return int((got != want).flatten(0, -2).any(-1).sum().item())


def run_append_case(kf, case, seed, sms):
    """New rows appended in the call (contiguous or paged): the internal
    call (outputs poisoned); the caches after it equal to torch's (the new
    rows exactly at lens[b] .. + Snew - 1 through the table, every other
    element of the cache or pool untouched), cache_seqlens unchanged; per
    batch the fp32 reference over its lens[b] + Snew keys; the public call
    on the same inputs (it writes the same rows again) bit-identical, the
    caches still torch's; and the attention alone over the appended cache
    (cache_seqlens + Snew, no k and v) bit-identical."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, cap, num_splits, lens, snew, with_lse, ps = case
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, kn, vn, table, Skv = append_inputs(kf, case, gen)
    ek, ev = appended(k, v, kn, vn, lens, table, ps, Skv)
    seqlens = seqlens_arg(lens)
    kept = seqlens.clone()
    Dv = kf.head_dim_v
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)
    o = torch.full((B, Sq, Hq, Dv), float("nan"), dtype=dt, device="cuda")
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda") if with_lse else None
    r = torch_api._decode(torch, "flash_attn_with_kvcache", q, k, v, seqlens, None,
                          kw["causal"], kw["window_size"], kw["softcap"], num_splits, 0,
                          with_lse, None, kf, o, lse, None, page_table=table, k_new=kn,
                          v_new=vn)
    assert (r[0] if with_lse else r) is o
    torch.cuda.synchronize()
    wrong = (wrong_rows(k, ek), wrong_rows(v, ev))
    r2 = torch_api.flash_attn_with_kvcache(q, k, v, k=kn, v=vn, cache_seqlens=seqlens,
                                           page_table=table, num_splits=num_splits,
                                           return_softmax_lse=with_lse, **kw)
    torch.cuda.synchronize()
    wrong2 = (wrong_rows(k, ek), wrong_rows(v, ev))
    L = [clamped(n + snew, Skv) for n in lens]
    r3 = torch_api.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens_arg(L),
                                           page_table=table, num_splits=num_splits,
                                           return_softmax_lse=with_lse, **kw)
    torch.cuda.synchronize()
    o2, lse2 = (r2 if with_lse else (r2, None))
    o3, lse3 = (r3 if with_lse else (r3, None))
    kc, vc = gathered(ek, ev, table)
    res = compare_batches(kf, q, kc, vc, L, o, lse)
    same = torch.equal(o, o2) and (lse is None or torch.equal(lse, lse2))
    alone = torch.equal(o, o3) and (lse is None or torch.equal(lse, lse3))
    lens_kept = torch.equal(seqlens, kept)
    cache_ok = wrong == (0, 0) and wrong2 == (0, 0)
    res.update(cache_exact=bool(cache_ok), cache_seqlens_unchanged=bool(lens_kept),
               repeat_identical=bool(same), same_as_attention_alone=bool(alone))
    if not cache_ok:
        res["wrong_rows_k_v"] = f"{wrong} after the first call, {wrong2} after the second"
    if not alone:
        res["max_abs_diff_vs_alone"] = float((o.float() - o3.float()).abs().max().item())
    res["ok"] = bool(res["ok"] and same and alone and lens_kept and cache_ok)
    splits = resolved_splits(kf, (label, B, Sq, Hq, Hkv, Skv, num_splits, lens, with_lse), sms)
    return dict(kernel=kf.kernel, case=label,
                layout="contiguous cache" if ps is None else "paged cache", B=B, Sq=Sq,
                Skv=Skv, Hq=Hq, Hkv=Hkv, Snew=snew, page_size=ps, num_splits=num_splits,
                splits=splits, cache_seqlens=lens, **res)


# Rotary embedding in the call (flash_attn_with_kvcache(rotary_cos=,
# rotary_sin=), with new rows): label, B, Sq, Hq, Hkv, Skv, num_splits,
# cache_seqlens, Snew, rotary_dim, interleaved, by rotary_seqlens.
ROTARY_CASES = [
    ("rotary 64 of 128, interleaved: ragged GQA 32/8, Snew 1", 3, 1, 32, 8, 1023, 0,
     [0, 17, 1000], 1, 64, True, False),
    ("rotary 128, GPT-NeoX, rotary_seqlens: Sq 3 Snew 3 GQA 16/2, 3 splits", 2, 3, 16, 2, 300,
     3, [5, 290], 3, 128, False, True),
]


def rotated_ref(x, cos, sin, pos, interleaved):
    """x [B, S, H, D] rotated in float64 at positions pos [B, S] (cos, sin
    [seqlen_ro, rd / 2]), FlashAttention's pairs; then x's dtype."""
    import torch
    rd = 2 * cos.shape[1]
    c = cos.double()[pos].unsqueeze(2)
    s = sin.double()[pos].unsqueeze(2)
    xr = x[..., :rd].double()
    if interleaved:
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((a * c - b * s, a * s + b * c), -1).flatten(-2)
    else:
        a, b = xr[..., :rd // 2], xr[..., rd // 2:]
        out = torch.cat((a * c - b * s, a * s + b * c), -1)
    return torch.cat((out.to(x.dtype), x[..., rd:]), -1)


def run_rotary_case(kf, case, seed, sms):
    """q and the new keys rotated in the call: per batch the fp32 reference
    on q and k rotated in float64 (k at p[b] + i, q there too if causal or
    windowed, else every row at p[b]; p = rotary_seqlens or cache_seqlens)
    over the cache with the rotated rows appended; the cache's new rows
    within one bf16/f16 rounding of the float64 rotation (ours rotates in
    float32), every other element untouched."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, cap, num_splits, lens, snew, rd, inter, by_rot = case
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, kn, vn, table, Skv = append_inputs(
        kf, (label, B, Sq, Hq, Hkv, cap, num_splits, lens, snew, True, None), gen)
    ang = torch.rand(cap + 8, rd // 2, generator=gen, device="cuda", dtype=torch.float64) * 6.3
    cos, sin = ang.cos().float(), ang.sin().float()
    rot = [n + 3 for n in lens]
    p = rot if by_rot else lens
    consecutive = kf.causal or (kf.window_left, kf.window_right) != (-1, -1)
    qpos = torch.tensor([[n + (i if consecutive else 0) for i in range(Sq)] for n in p],
                        device="cuda")
    kpos = torch.tensor([[n + i for i in range(snew)] for n in p], device="cuda")
    qr, knr = rotated_ref(q, cos, sin, qpos, inter), rotated_ref(kn, cos, sin, kpos, inter)
    ek, ev = appended(k, v, knr, vn, lens, None, None, Skv)
    k0 = k.clone()
    o, lse = torch_api.flash_attn_with_kvcache(
        q, k, v, k=kn, v=vn, rotary_cos=cos, rotary_sin=sin,
        cache_seqlens=seqlens_arg(lens),
        rotary_seqlens=seqlens_arg(rot) if by_rot else None, rotary_interleaved=inter,
        causal=kf.causal, window_size=(kf.window_left, kf.window_right), softcap=kf.softcap,
        kernel=kf, num_splits=num_splits, return_softmax_lse=True)
    torch.cuda.synchronize()
    L = [clamped(n + snew, Skv) for n in lens]
    res = compare_batches(kf, qr, ek, ev, L, o, lse)
    new_rows = torch.zeros_like(k, dtype=torch.bool)
    for b, n in enumerate(lens):
        new_rows[b, n:n + snew] = True
    ulp = 2.0 ** -7 if kf.dtype == "bf16" else 2.0 ** -10
    diff = (k.double() - ek.double()).abs()
    new_ok = bool((diff[new_rows] <= ulp * ek.double().abs()[new_rows] + 1e-6).all())
    rest_ok = torch.equal(k[~new_rows], k0[~new_rows]) and torch.equal(v, ev)
    res.update(new_rows_within_one_rounding=new_ok, rest_of_cache_untouched=bool(rest_ok))
    res["ok"] = bool(res["ok"] and new_ok and rest_ok)
    return dict(kernel=kf.kernel, case=label, B=B, Sq=Sq, Hq=Hq, Hkv=Hkv, Skv=Skv, Snew=snew,
                rotary_dim=rd, interleaved=inter, cache_seqlens=lens, **res)


# cache_batch_idx (FA3's): batch b attends row idx[b] of the caches
# [B_cache, Skv, Hkv, D]: label, idx, B_cache, Sq, Hq, Hkv, Skv, num_splits,
# cache_seqlens, Snew (0: no append).
BATCH_IDX_CASES = [
    ("cache_batch_idx [4, 0, 2] of 5: ragged GQA 32/8, heuristic", [4, 0, 2], 5, 1, 32, 8,
     1024, 0, [0, 17, 1000], 0),
    ("cache_batch_idx [1, 0] of 2, appending Snew 2: Sq 2 GQA 16/2, 3 splits", [1, 0], 2, 2,
     16, 2, 512, 3, [30, 500], 2),
]


def run_batch_idx_case(kf, case, seed, sms):
    """Per batch the fp32 reference over row idx[b] of the caches (after
    torch's append of the new rows there, where given); every other row of
    the caches untouched."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, idx, Bc, Sq, Hq, Hkv, Skv, num_splits, lens, snew = case
    B = len(idx)
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    k = check_fwd.rand((Bc, Skv, Hkv, D), dt, gen)
    v = check_fwd.rand((Bc, Skv, Hkv, Dv), dt, gen)
    for b, n in enumerate(lens):
        k[idx[b], n + snew:] = 8.0
        v[idx[b], n + snew:] = 100.0
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf, num_splits=num_splits, return_softmax_lse=True)
    ek, ev = k.clone(), v.clone()
    if snew:
        kn, vn = new_rows(kf, B, snew, Hkv, gen)
        write_rows(ek, ev, kn, vn, idx, lens)
        kw.update(k=kn, v=vn)
    o, lse = torch_api.flash_attn_with_kvcache(
        q, k, v, cache_seqlens=seqlens_arg(lens),
        cache_batch_idx=torch.tensor(idx, dtype=torch.int32, device="cuda"), **kw)
    torch.cuda.synchronize()
    rows = torch.tensor(idx, device="cuda", dtype=torch.long)
    L = [n + snew for n in lens]
    res = compare_batches(kf, q, ek[rows], ev[rows], L, o, lse)
    cache_ok = torch.equal(k, ek) and torch.equal(v, ev)
    res.update(cache_exact=bool(cache_ok))
    res["ok"] = bool(res["ok"] and cache_ok)
    return dict(kernel=kf.kernel, case=label, B=B, B_cache=Bc, Sq=Sq, Hq=Hq, Hkv=Hkv, Skv=Skv,
                Snew=snew, cache_seqlens=lens, **res)


# cache_leftpad (FA3's): batch b attends rows pad[b] .. cache_seqlens[b] (+
# Snew) - 1 of its cache: label, B, Sq, Hq, Hkv, Skv, num_splits,
# cache_seqlens (None: Skv), pads, Snew (0: no append), cache_batch_idx
# (None, or (idx, B_cache)).
LEFTPAD_CASES = [
    ("cache_leftpad ragged (keys 1000, 2224, 0, 1): GQA 32/8, heuristic", 4, 1, 32, 8, 4224, 0,
     [1000, 4224, 17, 300], [0, 2000, 17, 299], 0, None),
    ("cache_leftpad without cache_seqlens (keys 1018, 23, 0): Sq 4 GQA 64/8, 3 splits", 3, 4,
     64, 8, 1023, 3, None, [5, 1000, 1023], 0, None),
    ("cache_leftpad out of range (-5, 2000 of 1000: clamped): GQA 32/8, 1 split", 2, 1, 32, 8,
     1024, 1, [100, 1000], [-5, 2000], 0, None),
    ("cache_leftpad appending Snew 3: Sq 3 GQA 16/2, 128 splits", 2, 3, 16, 2, 512, 128,
     [100, 500], [37, 499], 3, None),
    ("cache_leftpad with cache_batch_idx [2, 0] of 3: GQA 32/8, heuristic", 2, 1, 32, 8, 1024,
     0, [700, 1024], [129, 1], 0, ([2, 0], 3)),
    ("cache_leftpad with cache_batch_idx [1, 0] of 2, Skv 64, appending Snew 2: MQA 16/1", 2, 2,
     16, 1, 64, 0, [10, 40], [3, 39], 2, ([1, 0], 2)),
]


def run_leftpad_case(kf, case, seed, sms, compiled=False):
    """Per batch the fp32 reference over its keys pad[b] .. end (the pad
    and the end clamped as the kernel does: end = cache_seqlens[b] + Snew
    into 0 .. Skv, the pad into 0 .. end), the rows before and after them
    large finite values that must be masked out; the outputs poisoned; the
    caches after an append equal to torch's; the public call bit-identical
    (and, with `compiled`, torch.compile(fullgraph=True) of it)."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, Skv, num_splits, lens, pads, snew, bidx = case
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    gen = torch.Generator(device="cuda").manual_seed(seed)
    idx, Bc = bidx if bidx else (list(range(B)), B)
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    k = check_fwd.rand((Bc, Skv, Hkv, D), dt, gen)
    v = check_fwd.rand((Bc, Skv, Hkv, Dv), dt, gen)
    used = [Skv] * B if lens is None else [clamped(n, Skv) for n in lens]
    end = [clamped(n + snew, Skv) for n in used]
    first = [min(max(p, 0), e) for p, e in zip(pads, end)]
    for b in range(B):
        # outside the batch's keys: large finite values (masked, or the
        # scores and o would be far off)
        k[idx[b], :first[b]] = 8.0
        v[idx[b], :first[b]] = 100.0
        k[idx[b], end[b]:] = 8.0
        v[idx[b], end[b]:] = 100.0
    ek, ev = k.clone(), v.clone()
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf, num_splits=num_splits, return_softmax_lse=True)
    extra = {}
    if snew:
        kn, vn = new_rows(kf, B, snew, Hkv, gen)
        write_rows(ek, ev, kn, vn, idx, used)
        extra.update(k=kn, v=vn)
    seqlens = None if lens is None else seqlens_arg(lens)
    pad_t = seqlens_arg(pads)
    table = torch.tensor(idx, dtype=torch.int32, device="cuda").reshape(-1, 1) if bidx else None
    o = torch.full((B, Sq, Hq, Dv), float("nan"), dtype=dt, device="cuda")
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda")
    torch_api._decode(torch, "flash_attn_with_kvcache", q, k, v, seqlens, None, kw["causal"],
                      kw["window_size"], kw["softcap"], num_splits, 0, True, None, kf, o, lse,
                      None, page_table=table, k_new=extra.get("k"), v_new=extra.get("v"),
                      leftpad=pad_t)
    torch.cuda.synchronize()
    cache_ok = torch.equal(k, ek) and torch.equal(v, ev)
    if bidx:
        extra["cache_batch_idx"] = table.reshape(-1)
    pub = torch_api.flash_attn_with_kvcache(q, k, v, cache_seqlens=seqlens,
                                            cache_leftpad=pad_t, **extra, **kw)
    torch.cuda.synchronize()
    same = torch.equal(o, pub[0]) and torch.equal(lse, pub[1])
    if compiled:
        f = torch.compile(lambda *a: torch_api.flash_attn_with_kvcache(
            *a, cache_seqlens=seqlens, cache_leftpad=pad_t, **extra, **kw), fullgraph=True)
        co, clse = f(q, k, v)
        torch.cuda.synchronize()
        same = same and torch.equal(o, co) and torch.equal(lse, clse)
    L = [e - f0 for e, f0 in zip(end, first)]
    kk = torch.zeros((B, max(L + [1]), Hkv, D), dtype=dt, device="cuda")
    vv = torch.zeros((B, max(L + [1]), Hkv, Dv), dtype=dt, device="cuda")
    for b in range(B):
        kk[b, :L[b]] = ek[idx[b], first[b]:end[b]]
        vv[b, :L[b]] = ev[idx[b], first[b]:end[b]]
    res = compare_batches(kf, q, kk, vv, L, o, lse)
    res.update(cache_exact=bool(cache_ok), repeat_identical=bool(same))
    res["ok"] = bool(res["ok"] and cache_ok and same)
    return dict(kernel=kf.kernel, case=label + (", torch.compile" if compiled else ""), B=B,
                Sq=Sq, Hq=Hq, Hkv=Hkv, Skv=Skv, Snew=snew, cache_seqlens=lens, cache_leftpad=pads,
                keys=L, **res)


# flash_attn_with_kvcache with packed queries (cu_seqlens_q, max_seqlen_q;
# a serving engine's form): (label, queries per sequence, Hq, Hkv, Skv,
# cache_seqlens, page size (0: contiguous), the contiguous cache's batch
# stride in rows (None: Skv; "sliced table": the page table a column slice
# of a wider one)). Every sequence max_seqlen_q long runs the
# decoding kernel; a ragged batch the variable-length kernel of the same
# variant, found in the same kernel directory (fa3-compile --varlen).
PACKED_Q_CASES = [
    ("packed q, one query a sequence, paged 64: GQA 32/8", [1] * 6, 32, 8, 4096,
     [4096, 1, 0, 2000, 17, 3000], 64, None),
    ("packed q, 4 queries a sequence, sliced cache: GQA 16/2", [4] * 3, 16, 2, 1000,
     [1000, 4, 513], 0, 1200),
    ("packed q ragged (1, 17, 0, 300), sliced cache: GQA 32/8", [1, 17, 0, 300], 32, 8, 4224,
     [1000, 64, 5, 4224], 0, 4300),
    ("packed q ragged (113, 1), no cache_seqlens: MQA 8/1", [113, 1], 8, 1, 203, None, 0, None),
    # a ragged batch over a paged cache: the paged varlen kernel
    # (fa3-compile --varlen --paged), the table's pages in order the rows
    ("packed q ragged (1, 17, 0, 300), paged 16: GQA 32/8", [1, 17, 0, 300], 32, 8, 4224,
     [1000, 64, 5, 4224], 16, None),
    ("packed q ragged (129, 1, 7), paged 256: GQA 16/2", [129, 1, 7], 16, 2, 4096,
     [4096, 300, 0], 256, None),
    ("packed q ragged (113, 1), paged 64, no cache_seqlens: MQA 8/1", [113, 1], 8, 1, 256,
     None, 64, None),
    ("packed q ragged (1, 17, 0, 300), paged 2: GQA 32/8", [1, 17, 0, 300], 32, 8, 1024,
     [1000, 64, 5, 1024], 2, None),
    # a column slice of a wider table (a serving engine's block table), made
    # contiguous by the call
    ("packed q ragged (300, 2), paged 16, a table's column slice: GQA 32/8", [300, 2], 32, 8,
     1024, [1000, 77], 16, "sliced table"),
]
# small ones, also under compute-sanitizer
PACKED_Q_SANITIZE = ["packed q ragged (113, 1), no cache_seqlens: MQA 8/1",
                     "packed q ragged (113, 1), paged 64, no cache_seqlens: MQA 8/1",
                     "packed q ragged (1, 17, 0, 300), paged 2: GQA 32/8"]


def run_packed_q_case(kf, case, seed, kernel_dir, compiled=False):
    """flash_attn_with_kvcache(cu_seqlens_q=, max_seqlen_q=) as a serving
    engine calls it (the kernels looked up by variant in kernel_dir): per
    sequence, check_fwd's criteria against the fp32 reference over its
    cache rows (masks bottom-right aligned per sequence), o [total_q, Hq,
    Dv] and lse [Hq, total_q] poisoned first (every row a sequence owns
    written: the allocator's blocks for them poisoned); the call repeated
    bit-identical (with `compiled`, through torch.compile(fullgraph=True))."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, lens_q, Hq, Hkv, Skv, lens, ps, rows = case
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    gen = torch.Generator(device="cuda").manual_seed(seed)
    B, Tq, Sq = len(lens_q), sum(lens_q), max(lens_q)
    q = check_fwd.rand((Tq, Hq, D), dt, gen)
    used = [Skv] * B if lens is None else lens
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel_dir=kernel_dir, return_softmax_lse=True,
              cache_seqlens=None if lens is None else seqlens_arg(lens),
              cu_seqlens_q=seqlens_arg([0] + list(itertools.accumulate(lens_q))),
              max_seqlen_q=Sq)
    sliced_table = rows == "sliced table"
    rows = None if sliced_table else rows
    k = check_fwd.rand((B, rows or Skv, Hkv, D), dt, gen)[:, :Skv]
    v = check_fwd.rand((B, rows or Skv, Hkv, Dv), dt, gen)[:, :Skv]
    for b in range(B):   # past each batch's keys: large finite values, masked
        k[b, used[b]:] = 8.0
        v[b, used[b]:] = 100.0
    if ps:
        kc, vc, table = paged_inputs_from(k, v, ps, gen)
        if sliced_table:   # the same entries, rows 3 x wider apart
            wide = torch.full((B, 3 * table.shape[1]), -1, dtype=torch.int32, device="cuda")
            wide[:, :table.shape[1]] = table
            table = wide[:, :table.shape[1]]
        kw["page_table"] = table
    else:
        kc, vc = k, v
    # the public call allocates its outputs: poison the blocks the caching
    # allocator hands out next for their sizes (freed NaN tensors of the
    # same shapes), so that a row left unwritten reads NaN
    poison = [torch.full((Tq, Hq, Dv), float("nan"), dtype=dt, device="cuda"),
              torch.full((Hq, Tq), float("nan"), device="cuda")]
    del poison
    o, lse = torch_api.flash_attn_with_kvcache(q, kc, vc, **kw)
    if compiled:   # the op Dynamo traces (the varlen op's page_table argument)
        f = torch.compile(lambda *t: torch_api.flash_attn_with_kvcache(*t, **kw),
                          fullgraph=True)
        o2, lse2 = f(q, kc, vc)
    else:
        o2, lse2 = torch_api.flash_attn_with_kvcache(q, kc, vc, **kw)
    torch.cuda.synchronize()
    same = torch.equal(o, o2) and torch.equal(lse, lse2)
    res = {"unwritten": 0, "rel_err_o": 0.0, "max_abs_err_lse": 0.0, "ok": True}
    q0 = 0
    for b, n in enumerate(lens_q):
        if n:
            c = compare_batches(kf, q[q0:q0 + n].unsqueeze(0), k[b:b + 1], v[b:b + 1],
                                [used[b]], o[q0:q0 + n].unsqueeze(0),
                                lse[:, q0:q0 + n].unsqueeze(0))
            res["unwritten"] += c["unwritten"]
            res["rel_err_o"] = max(res["rel_err_o"], c["rel_err_o"])
            res["max_abs_err_lse"] = max(res["max_abs_err_lse"], c["max_abs_err_lse"])
            res["ok"] &= c["ok"]
        q0 += n
    shapes = tuple(o.shape) == (Tq, Hq, Dv) and tuple(lse.shape) == (Hq, Tq)
    res.update(repeat_identical=bool(same), shapes_ok=shapes)
    res["ok"] = bool(res["ok"] and same and shapes)
    route = "decode" if Tq == B * Sq else "paged varlen" if ps else "varlen"
    return dict(kernel=kf.kernel, case=label + (", torch.compile" if compiled else ""),
                lens_q=lens_q, Skv=Skv, cache_seqlens=lens,
                page_size=ps, route=route, **res)


# FA3's packed new rows (cu_seqlens_k_new with k and v): (label, cache
# lengths, new rows a batch, packed query lengths or None ([B, 1] queries),
# Hq, Hkv, Skv, page size (0: contiguous)); a batch past Skv drops its last
# rows
PACKED_APPEND_CASES = [
    ("packed new rows, decoding step, contiguous: GQA 32/8", [4000, 0, 17, 100], [1, 3, 0, 96],
     None, 32, 8, 4096, 0),
    ("packed new rows, ragged q, paged 64: GQA 16/2", [1000, 4090, 0], [5, 9, 300],
     [5, 1, 300], 16, 2, 4096, 64),
    ("packed new rows, one query, paged 16: MQA 8/1", [63, 200, 250], [1, 2, 1], None, 8, 1,
     256, 16),
    # rotary embedding (rotary_dim, interleaved, by rotary_seqlens): the rows
    # and q rotated before the append, every route after it
    ("packed new rows + rotary 64 of 128, ragged q, paged 64: GQA 16/2", [1000, 4090, 0],
     [5, 9, 300], [5, 1, 300], 16, 2, 4096, 64, (64, True, False)),
    ("packed new rows + rotary 128 GPT-NeoX, rotary_seqlens, decoding step: GQA 32/8",
     [4000, 0, 17, 100], [1, 3, 0, 96], None, 32, 8, 4096, 0, (128, False, True)),
]
PACKED_APPEND_SANITIZE = ["packed new rows, one query, paged 16: MQA 8/1"]


def run_packed_append_case(kf, case, seed, kernel_dir):
    """flash_attn_with_kvcache(k, v, cu_seqlens_k_new=): every new row in
    its batch's cache rows from cache_seqlens[b] on (through the table), the
    rows past Skv dropped and the rest of the cache unchanged, then per
    batch check_fwd's criteria against the fp32 reference over the expected
    cache's first min(cache_seqlens[b] + new rows, Skv) keys. With rotary
    embedding (the case's last entry: rotary_dim, interleaved, by
    rotary_seqlens): the new rows expected rotated in float64 at p[b] + i
    (run_rotary_case's bound: within one rounding in the cache), the
    reference's q rotated at p[b] + i (causal or windowed) or p[b], i
    counted in q's sequence."""
    import torch
    import check_fwd
    from fa3 import torch_api
    label, lens, new, lens_q, Hq, Hkv, Skv, ps = case[:8]
    rotary = case[8] if len(case) > 8 else None
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    gen = torch.Generator(device="cuda").manual_seed(seed)
    B = len(lens)
    k = check_fwd.rand((B, Skv, Hkv, D), dt, gen)
    v = check_fwd.rand((B, Skv, Hkv, Dv), dt, gen)
    kn = check_fwd.rand((sum(new), Hkv, D), dt, gen)
    vn = check_fwd.rand((sum(new), Hkv, Dv), dt, gen)
    kw = {}
    if lens_q is None:
        q = check_fwd.rand((B, 1, Hq, D), dt, gen)
    else:
        q = check_fwd.rand((sum(lens_q), Hq, D), dt, gen)
        kw.update(cu_seqlens_q=seqlens_arg([0] + list(itertools.accumulate(lens_q))),
                  max_seqlen_q=max(lens_q))
    kn_want, q_ref = kn, q
    if rotary is not None:
        rd, inter, by_rot = rotary
        ang = torch.rand(Skv + 8, rd // 2, generator=gen, device="cuda",
                         dtype=torch.float64) * 6.3
        cos, sin = ang.cos().float(), ang.sin().float()
        rot = [n + 3 for n in lens]
        p = rot if by_rot else lens
        kw.update(rotary_cos=cos, rotary_sin=sin, rotary_interleaved=inter,
                  rotary_seqlens=seqlens_arg(rot) if by_rot else None)
        local = kf.causal or (kf.window_left, kf.window_right) != (-1, -1)
        kpos = torch.tensor([p[b] + i for b in range(B) for i in range(new[b])],
                            device="cuda")
        kn_want = rotated_ref(kn[None], cos, sin, kpos[None], inter)[0]
        sq = [1] * B if lens_q is None else lens_q
        qpos = torch.tensor([p[b] + (i if local else 0) for b in range(B) for i in range(sq[b])],
                            device="cuda")
        q_ref = rotated_ref(q.reshape(1, sum(sq), Hq, D), cos, sin, qpos[None],
                            inter).reshape(q.shape)
    want_k, want_v, keys, r0 = k.clone(), v.clone(), [], 0
    new_rows = torch.zeros(k.shape[:2], dtype=torch.bool, device="cuda")
    for b in range(B):
        n = min(new[b], Skv - lens[b])
        new_rows[b, lens[b]:lens[b] + n] = True
        want_k[b, lens[b]:lens[b] + n] = kn_want[r0:r0 + n]
        want_v[b, lens[b]:lens[b] + n] = vn[r0:r0 + n]
        keys.append(lens[b] + n)
        r0 += new[b]
    kw.update(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel_dir=kernel_dir, return_softmax_lse=True,
              cache_seqlens=seqlens_arg(lens),
              cu_seqlens_k_new=seqlens_arg([0] + list(itertools.accumulate(new))))
    kc, vc, rows = cache_layout(k, v, ps, gen, kw)
    o, lse = torch_api.flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, **kw)
    torch.cuda.synchronize()
    if rotary is None:
        landed = bool(torch.equal(rows(kc), want_k) and torch.equal(rows(vc), want_v))
    else:
        ulp = 2.0 ** -7 if kf.dtype == "bf16" else 2.0 ** -10
        got = rows(kc)
        diff = (got.double() - want_k.double()).abs()[new_rows]
        landed = bool((diff <= ulp * want_k.double().abs()[new_rows] + 1e-6).all()
                      and torch.equal(got[~new_rows], want_k[~new_rows])
                      and torch.equal(rows(vc), want_v))
        want_k = got     # the reference attends over the rows as written
    q = q_ref
    if lens_q is None:
        res = compare_batches(kf, q, want_k, want_v, keys, o, lse)
    else:
        res = {"unwritten": 0, "rel_err_o": 0.0, "max_abs_err_lse": 0.0, "ok": True}
        q0 = 0
        for b, n in enumerate(lens_q):
            if n:
                c = compare_batches(kf, q[q0:q0 + n].unsqueeze(0), want_k[b:b + 1],
                                    want_v[b:b + 1], [keys[b]], o[q0:q0 + n].unsqueeze(0),
                                    lse[:, q0:q0 + n].unsqueeze(0))
                for key in ("rel_err_o", "max_abs_err_lse"):
                    res[key] = max(res[key], c[key])
                res["unwritten"] += c["unwritten"]
                res["ok"] &= c["ok"]
            q0 += n
    res["cache_rows_as_expected"] = landed
    res["ok"] = bool(res["ok"] and landed)
    return dict(kernel=kf.kernel, case=label, cache_seqlens=lens, new_rows=new,
                page_size=ps, **res)


# FP8 decoding (an e4m3 KV cache; FA3's [B, Hkv] descales, q's per kv
# head): label, B, Sq, Hq, Hkv, Skv, page size (0: contiguous), num_splits,
# cache_seqlens, new rows (0: none; "packed": one or two a batch through
# cu_seqlens_k_new)
FP8_CASES = [
    ("FP8 decoding step, contiguous ragged: GQA 32/8, heuristic", 3, 1, 32, 8, 4096, 0, 0,
     [4000, 0, 17], 0),
    ("FP8 decoding step, paged 64 shuffled, 3 splits: GQA 16/2", 2, 1, 16, 2, 2048, 64, 3,
     [1000, 300], 0),
    ("FP8 4 query rows, contiguous: GQA 32/8", 2, 4, 32, 8, 1024, 0, 0, [700, 1024], 0),
    ("FP8 + 2 new rows (the append kernel), contiguous: MHA 8/8", 2, 2, 8, 8, 3072, 0, 0,
     [100, 3000], 2),
    ("FP8 + packed new rows, paged 128: GQA 16/4", 3, 1, 16, 4, 1024, 128, 0,
     [5, 1000, 0], "packed"),
]
FP8_SANITIZE = ["FP8 decoding step, paged 64 shuffled, 3 splits: GQA 16/2"]


def quantize_heads(x, per):
    """x [B, S, H, D] float32 as e4m3 with one descale per (batch, group of
    `per` consecutive heads): (x_e4m3, descale [B, H / per])."""
    import torch
    B, S, H, D = x.shape
    amax = x.abs().reshape(B, S, H // per, per, D).amax(dim=(1, 3, 4)).clamp(min=1e-12)
    d = amax / 448.0
    xq = (x / d.repeat_interleave(per, 1)[:, None, :, None]).to(torch.float8_e4m3fn)
    return xq, d


def run_fp8_case(kf, case, seed, kernel_dir, sanitize=False):
    """flash_attn_with_kvcache on e4m3 q and caches with FA3's descales
    ([B, Hkv] each, q's one per kv head): o (bf16, poisoned first) and lse
    per batch against the fp32 reference on the dequantized inputs, by
    check_fp8's bounds (rel. error of o < O_REL_TOL, |lse - ref| <
    LSE_ABS_TOL; rows of no keys 0 and -inf); new rows found in the cache
    bit for bit."""
    import torch
    import check_fwd
    import check_fp8
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, Skv, ps, num_splits, lens, new = case
    D = kf.head_dim
    g = Hq // Hkv
    gen = torch.Generator(device="cuda").manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, device="cuda", generator=gen)  # noqa: E731
    q8, qd = quantize_heads(randn(B, Sq, Hq, D), g)
    k8, kd = quantize_heads(randn(B, Skv, Hkv, D), 1)
    v8, vd = quantize_heads(randn(B, Skv, Hkv, D), 1)
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel_dir=kernel_dir, num_splits=num_splits,
              cache_seqlens=seqlens_arg(lens), q_descale=qd, k_descale=kd, v_descale=vd)
    nnew = [0] * B
    if new:
        nnew = [1 + b % 2 for b in range(B)] if new == "packed" else [new] * B
        kn = (randn(sum(nnew), Hkv, D) / kd.repeat_interleave(torch.tensor(
            nnew, device="cuda"), 0)[:, :, None]).to(torch.float8_e4m3fn)
        vn = (randn(sum(nnew), Hkv, D) / vd.repeat_interleave(torch.tensor(
            nnew, device="cuda"), 0)[:, :, None]).to(torch.float8_e4m3fn)
        if new == "packed":
            kw.update(k=kn, v=vn, cu_seqlens_k_new=seqlens_arg(
                [0] + list(itertools.accumulate(nnew))))
        else:
            kw.update(k=kn.reshape(B, new, Hkv, D), v=vn.reshape(B, new, Hkv, D))
    want_k, want_v, r0 = k8.clone(), v8.clone(), 0
    for b in range(B):
        if nnew[b]:
            want_k[b, lens[b]:lens[b] + nnew[b]] = kn[r0:r0 + nnew[b]]
            want_v[b, lens[b]:lens[b] + nnew[b]] = vn[r0:r0 + nnew[b]]
        r0 += nnew[b]
    kc, vc, rows = cache_layout(k8, v8, ps, gen, kw)
    # the public call allocates its outputs: poison the blocks the caching
    # allocator hands out next for their sizes (check_decode's packed cases)
    poison = [torch.full((B, Sq, Hq, D), float("nan"), device="cuda", dtype=torch.bfloat16),
              torch.full((B, Hq, Sq), float("nan"), device="cuda")]
    del poison
    o, lse = torch_api.flash_attn_with_kvcache(q8, kc, vc, return_softmax_lse=True, **kw)
    torch.cuda.synchronize()
    extra = {}
    # (not under compute-sanitizer: racecheck runs without the caching
    # allocator, which a CUDA graph's capture needs)
    if not new and not sanitize:
        # the same call through torch.compile (the decoding op with its
        # descales) and captured in a CUDA graph: bit-identical to eager
        def call(q_):
            return torch_api.flash_attn_with_kvcache(q_, kc, vc, return_softmax_lse=True, **kw)
        torch._dynamo.reset()     # (a fresh compile a case: `call` closes over its inputs)
        oc, lc = torch.compile(call, fullgraph=True, dynamic=False)(q8)
        s_ = torch.cuda.Stream()
        s_.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s_):
            call(q8)
        torch.cuda.current_stream().wait_stream(s_)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            og, lg = call(q8)
        graph.replay()
        torch.cuda.synchronize()
        extra = dict(compiled_equal=bool(torch.equal(oc, o) and torch.equal(lc, lse)),
                     graph_equal=bool(torch.equal(og, o) and torch.equal(lg, lse)))
    landed = bool(torch.equal(rows(kc).view(torch.uint8), want_k.view(torch.uint8))
                  and torch.equal(rows(vc).view(torch.uint8), want_v.view(torch.uint8)))
    qf = q8.float() * qd.repeat_interleave(g, 1)[:, None, :, None]
    kf_ = want_k.float() * kd[:, None, :, None]
    vf = want_v.float() * vd[:, None, :, None]
    res = {"unwritten": 0, "rel_err_o": 0.0, "max_abs_err_lse": 0.0, "empty_rows": 0,
           "ok": True}
    for b in range(B):
        n = min(lens[b] + nnew[b], Skv)
        if n:
            ref_o, ref_lse, empty = check_fwd.reference(qf[b:b + 1], kf_[b:b + 1, :n],
                                                        vf[b:b + 1, :n], kf.scale, kf)
        else:
            ref_o = torch.zeros(1, Sq, Hq, D, device="cuda")
            ref_lse = torch.full((1, Hq, Sq), float("-inf"), device="cuda")
            empty = torch.ones(Sq, dtype=torch.bool, device="cuda")
        c = check_fwd.compare(o[b:b + 1], lse[b:b + 1], ref_o, ref_lse, empty)
        res["unwritten"] += c["unwritten"]
        res["empty_rows"] += c["empty_rows"]
        for key in ("rel_err_o", "max_abs_err_lse"):
            res[key] = max(res[key], c.get(key, 0.0))
        res["ok"] &= c["empty_rows_ok"]
    # (its own keys: the report's columns hold check_fwd's bounds)
    res["fp8_rel_err_o"] = res.pop("rel_err_o")
    res["fp8_max_abs_err_lse"] = res.pop("max_abs_err_lse")
    res["cache_rows_as_expected"] = landed
    res.update(extra)
    res["ok"] = bool(res["ok"] and landed and res["unwritten"] == 0 and all(extra.values())
                     and math.isfinite(res["fp8_rel_err_o"])
                     and res["fp8_rel_err_o"] < check_fp8.O_REL_TOL
                     and res["fp8_max_abs_err_lse"] < check_fp8.LSE_ABS_TOL)
    return dict(kernel=kf.kernel, case=label, cache_seqlens=lens, page_size=ps, **res)


# FP8 through the decoding kernel's other routes: label, B, Sq, Hq, Hkv,
# Skv, cache_seqlens, options (leftpad, batch_idx with cache_rows, chunk,
# packed: q passed packed with cu_seqlens_q, every sequence Sq rows)
FP8_ROUTE_CASES = [
    ("FP8 cache_leftpad: GQA 32/8", 3, 1, 32, 8, 2048, [2000, 300, 17],
     dict(leftpad=[100, 0, 16])),
    ("FP8 cache_batch_idx: GQA 16/2", 2, 1, 16, 2, 1024, [900, 1000],
     dict(batch_idx=[2, 0], cache_rows=3)),
    ("FP8 attention_chunk 256, decoding step: GQA 32/8", 2, 1, 32, 8, 4096, [4000, 300],
     dict(chunk=256)),
    ("FP8 packed q, 2 rows a sequence: GQA 32/8", 2, 2, 32, 8, 1024, [700, 1024],
     dict(packed=True)),
]


def run_fp8_route_case(kf, case, seed, kernel_dir):
    """FP8 q and caches through cache_leftpad, cache_batch_idx (k and v
    quantized per cache row, the descales given per batch: its row's), a
    decoding step under attention_chunk and uniform packed queries: per
    batch against the fp32 reference on the dequantized keys it attends (its
    cache row's, from its pad or its chunk's first key to cache_seqlens[b]),
    by check_fp8's bounds; outputs poisoned first."""
    import torch
    import check_fwd
    import check_fp8
    from fa3 import torch_api
    label, B, Sq, Hq, Hkv, Skv, lens, opts = case
    D, g = kf.head_dim, Hq // Hkv
    gen = torch.Generator(device="cuda").manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, device="cuda", generator=gen)  # noqa: E731
    rows_n = opts.get("cache_rows", B)
    idx = opts.get("batch_idx", list(range(B)))
    q8, qd = quantize_heads(randn(B, Sq, Hq, D), g)
    k8, kd_rows = quantize_heads(randn(rows_n, Skv, Hkv, D), 1)
    v8, vd_rows = quantize_heads(randn(rows_n, Skv, Hkv, D), 1)
    ix = torch.tensor(idx, device="cuda")
    kd, vd = kd_rows[ix], vd_rows[ix]          # batch b's: its cache row's
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel_dir=kernel_dir, cache_seqlens=seqlens_arg(lens),
              q_descale=qd, k_descale=kd, v_descale=vd, return_softmax_lse=True)
    starts = [0] * B
    if "leftpad" in opts:
        kw["cache_leftpad"] = seqlens_arg(opts["leftpad"])
        starts = opts["leftpad"]
    if "batch_idx" in opts:
        kw["cache_batch_idx"] = seqlens_arg(idx)
    if "chunk" in opts:
        c = opts["chunk"]
        kw["attention_chunk"] = c
        starts = [(n - 1) // c * c if n else 0 for n in lens]
    poison = [torch.full((B * Sq, Hq, D), float("nan"), device="cuda", dtype=torch.bfloat16),
              torch.full((B * Sq * Hq,), float("nan"), device="cuda")]
    del poison
    if opts.get("packed"):
        kw.update(cu_seqlens_q=seqlens_arg([b * Sq for b in range(B + 1)]), max_seqlen_q=Sq)
        o, lse = torch_api.flash_attn_with_kvcache(q8.flatten(0, 1), k8, v8, **kw)
        o = o.unflatten(0, (B, Sq))
        lse = lse.unflatten(1, (B, Sq)).transpose(0, 1)
    else:
        o, lse = torch_api.flash_attn_with_kvcache(q8, k8, v8, **kw)
    torch.cuda.synchronize()
    qf = q8.float() * qd.repeat_interleave(g, 1)[:, None, :, None]
    res = {"unwritten": 0, "fp8_rel_err_o": 0.0, "fp8_max_abs_err_lse": 0.0, "ok": True}
    for b in range(B):
        r, lo, hi = idx[b], starts[b], lens[b]
        kf_ = k8[r:r + 1, lo:hi].float() * kd_rows[r][None, None, :, None]
        vf = v8[r:r + 1, lo:hi].float() * vd_rows[r][None, None, :, None]
        ref_o, ref_lse, empty = check_fwd.reference(qf[b:b + 1], kf_, vf, kf.scale, kf)
        c = check_fwd.compare(o[b:b + 1], lse[b:b + 1].contiguous(), ref_o, ref_lse, empty)
        res["unwritten"] += c["unwritten"]
        res["fp8_rel_err_o"] = max(res["fp8_rel_err_o"], c["rel_err_o"])
        res["fp8_max_abs_err_lse"] = max(res["fp8_max_abs_err_lse"], c.get("max_abs_err_lse", 0))
        res["ok"] &= c["empty_rows_ok"]
    res["ok"] = bool(res["ok"] and res["unwritten"] == 0
                     and math.isfinite(res["fp8_rel_err_o"])
                     and res["fp8_rel_err_o"] < check_fp8.O_REL_TOL
                     and res["fp8_max_abs_err_lse"] < check_fp8.LSE_ABS_TOL)
    return dict(kernel=kf.kernel, case=label, cache_seqlens=lens, **res)


def cache_layout(k, v, ps, gen, kw):
    """The caches a call gets for contiguous k, v [B, Skv, Hkv, D]: those
    (ps 0), or page pools of ps rows with a shuffled table (paged_inputs_from,
    put in kw as page_table); and rows(t), the caches' rows as [B, Skv, ...]
    again."""
    if not ps:
        return k, v, lambda t: t
    kc, vc, table = paged_inputs_from(k, v, ps, gen)
    kw["page_table"] = table
    return kc, vc, lambda t: t[table.long()].flatten(1, 2)


def paged_inputs_from(k, v, ps, gen):
    """Contiguous caches k, v [B, Skv, Hkv, D] (Skv a multiple of ps) as a
    page pool in a shuffled order and its page table."""
    import torch
    B, Skv, Hkv, D = k.shape
    n = Skv // ps
    perm = torch.randperm(B * n, generator=gen, device="cuda")
    kc = torch.empty((B * n, ps, Hkv, D), dtype=k.dtype, device="cuda")
    vc = torch.empty((B * n, ps, Hkv, v.shape[3]), dtype=v.dtype, device="cuda")
    kc[perm] = k.reshape(B * n, ps, Hkv, D)
    vc[perm] = v.reshape(B * n, ps, Hkv, v.shape[3])
    return kc, vc, perm.to(torch.int32).reshape(B, n)


# fa3rt.h's FA3RT_COPY_ROWS: the runtime has the producer warps copy pages
# of at most this many rows (fewer than block_n)
COPY_ROWS = 16


def copies_small_pages(kf, ps):
    """Whether the kernel's producer warps copy pages of ps rows (cp.async)
    rather than boxing them by TMA: a kernel built to (facts paged_copy 1)
    given pages of at most COPY_ROWS rows (its facts' copy_rows where
    given), fewer than its block_n (the runtime's other conditions, equal K
    and V strides and a pool of at most 2^36 bytes, hold for these tests'
    caches)."""
    return kf.paged_copy and ps <= (kf.copy_rows or COPY_ROWS) and ps < kf.block_n


def check_bad_page_entries(kf, seed, ps=None):
    """Page-table entries outside the pool (the caller's contract broken):
    the pool's page count and -1, in pages that the append writes and the
    attention reads. The append writes nothing there: the pool is the front
    of a larger allocation, whose guard pages past it stay as they were,
    and the pool's other rows are torch's append; the attention reads such
    a page as zeros (the tensor map's out-of-bounds fill), or, where the
    producer warps copy small pages (copies_small_pages), as the pool's
    last page (the kernel clamps the entry into the pool), so its reference
    is the cache with those keys and values there. Outputs poisoned first;
    under compute-sanitizer, memcheck sees any access outside the tensors."""
    import torch
    import check_fwd
    from fa3 import torch_api
    if ps is None:
        ps = next(p for p in (64, 16, 128, 256, 8) if takes_page_size(kf, p))
    B, Sq, Hq, Hkv, P, snew, guard = 2, 1, 16, 2, 4, 5, 3
    D, Dv = kf.head_dim, kf.head_dim_v
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    pages = B * P + EXTRA_PAGES
    big_k = check_fwd.rand((pages + guard, ps, Hkv, D), dt, gen)
    big_v = check_fwd.rand((pages + guard, ps, Hkv, Dv), dt, gen)
    before_k, before_v = big_k.clone(), big_v.clone()
    k, v = big_k[:pages], big_v[:pages]
    perm = torch.randperm(pages, generator=gen, device="cuda")
    table = perm[:B * P].view(B, P).to(torch.int32)
    # batch 0 appends inside its second page, batch 1 from its second page
    # into its third: both bad
    lens = [ps + 3, 2 * ps - 2]
    table[0, 1] = pages
    table[1, 2] = -1
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    kn, vn = new_rows(kf, B, snew, Hkv, gen)
    ek, ev = appended(k, v, kn, vn, lens, table, ps, P * ps)
    o = torch.full((B, Sq, Hq, Dv), float("nan"), dtype=dt, device="cuda")
    lse = torch.full((B, Hq, Sq), float("nan"), device="cuda")
    torch_api._decode(torch, "flash_attn_with_kvcache", q, k, v, seqlens_arg(lens), None,
                      kf.causal, (kf.window_left, kf.window_right), kf.softcap, 0, 0, True,
                      None, kf, o, lse, None, page_table=table, k_new=kn, v_new=vn)
    torch.cuda.synchronize()
    guard_kept = (torch.equal(big_k[pages:], before_k[pages:]) and
                  torch.equal(big_v[pages:], before_v[pages:]))
    wrong = (wrong_rows(k, ek), wrong_rows(v, ev))
    # the reference: a zero page where the table points outside the pool
    # (TMA boxes), the pool's last page (the producer warp's copies)
    bad = (table < 0) | (table >= pages)
    if copies_small_pages(kf, ps):
        kc, vc = gathered(ek, ev, torch.where(bad, pages - 1, table))
    else:
        zk = torch.cat([ek, torch.zeros_like(ek[:1])])
        zv = torch.cat([ev, torch.zeros_like(ev[:1])])
        kc, vc = gathered(zk, zv, torch.where(bad, pages, table))
    res = compare_batches(kf, q, kc, vc, [n + snew for n in lens], o, lse)
    res.update(guard_pages_kept=bool(guard_kept), pool_rows_wrong=str(wrong))
    res["ok"] = bool(res["ok"] and guard_kept and wrong == (0, 0))
    return dict(kernel=kf.kernel, case=f"paged: table entries {pages} and -1 (outside the pool "
                f"of {pages} pages of {ps}), appending {snew} rows into them", **res)


def check_graph_append(kf, sms, paged):
    """An appending split call (the heuristic's splits; contiguous, or
    paged with 64-row pages) captured in a CUDA graph: each replay writes
    the new rows where cache_seqlens says at replay and equals an eager
    call on a copy of the caches as they were (outputs bit for bit, the
    caches equal, and equal to torch's append); then again after q, k, v
    and cache_seqlens (advanced by Snew, as a serving loop does) change in
    place."""
    import torch
    import check_fwd
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(19 if paged else 23)
    B, Sq, Hq, Hkv, Skv, snew, ps = 3, 1, 32, 8, 16384, 2, 64
    D, Dv = kf.head_dim, kf.head_dim_v
    q = check_fwd.rand((B, Sq, Hq, D), dt, gen)
    kn, vn = new_rows(kf, B, snew, Hkv, gen)
    if paged:
        k, v, table, _, _ = paged_inputs(kf, B, Hkv, Skv, ps, [Skv] * B, gen, fill=False)
    else:
        k = check_fwd.rand((B, Skv, Hkv, D), dt, gen)
        v = check_fwd.rand((B, Skv, Hkv, Dv), dt, gen)
        table = None
    # the second step's rows reach the cache's end in batch 2 (rows 16382, 16383);
    # batch 0's cross a page (63, 64 then 65, 66)
    lens = torch.tensor([ps - 1, 0, Skv - 2 * snew], dtype=torch.int32, device="cuda")
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf, num_splits=0, return_softmax_lse=True,
              page_table=table)

    def call(kc, vc):
        return flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=lens, **kw)
    splits = resolved_splits(kf, ("graph", B, Sq, Hq, Hkv, Skv, 0, None, True), sms)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):   # loads the kernel and warms the allocator (on copies)
        call(k.clone(), v.clone())
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    k_pre = k.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        og, lg = call(k, v)
    torch.cuda.synchronize()
    captured_nothing = torch.equal(k, k_pre)   # a capture runs no kernel
    steps, before = [], None
    for step in range(2):
        if step:
            q.copy_(check_fwd.rand(tuple(q.shape), dt, gen))
            kn.copy_(check_fwd.rand(tuple(kn.shape), dt, gen))
            vn.copy_(check_fwd.rand(tuple(vn.shape), dt, gen))
            lens.add_(snew)
            before = og.clone()
        k0, v0 = k.clone(), v.clone()
        ek, ev = appended(k0, v0, kn, vn, lens.tolist(), table, ps, Skv)
        graph.replay()
        torch.cuda.synchronize()
        oe, le = call(k0, v0)
        torch.cuda.synchronize()
        ok = (torch.equal(og, oe) and torch.equal(lg, le) and wrong_rows(k, ek) == 0
              and wrong_rows(v, ev) == 0 and wrong_rows(k0, ek) == 0 and wrong_rows(v0, ev) == 0)
        if before is not None:
            ok = ok and not torch.equal(og, before)
        steps.append(bool(ok))
    ok = bool(all(steps) and splits > 1 and captured_nothing)
    return dict(kernel=kf.kernel, case="append: CUDA graph of a " + ("paged " if paged else "")
                + "split call, replayed on new rows and advanced cache_seqlens", B=B, Sq=Sq,
                Skv=Skv, Hq=Hq, Hkv=Hkv, Snew=snew, page_size=ps if paged else None,
                splits=splits, ok=ok,
                error=None if ok else f"replays equal eager and torch's caches: {steps}, "
                                      f"splits {splits}")


def check_compiled_append(kf, paged):
    """torch.compile(fullgraph=True) of a function that appends (contiguous,
    or paged with 64-row pages), then reads the cache and attends again
    without new rows: equal to eager bit for bit, the caches written as
    eager writes them (and as torch's append), the read after the call
    seeing the new rows (the op's schema declares the writes); no graph
    break."""
    import torch
    import check_fwd
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(29 if paged else 31)
    B, Hkv, Skv, snew, ps = 2, 8, 4096, 2, 64
    D, Dv = kf.head_dim, kf.head_dim_v
    q = check_fwd.rand((B, 1, 32, D), dt, gen)
    kn, vn = new_rows(kf, B, snew, Hkv, gen)
    if paged:
        k, v, table, _, _ = paged_inputs(kf, B, Hkv, Skv, ps, [Skv] * B, gen, fill=False)
    else:
        k = check_fwd.rand((B, Skv, Hkv, D), dt, gen)
        v = check_fwd.rand((B, Skv, Hkv, Dv), dt, gen)
        table = None
    lens = torch.tensor([3, 1000], dtype=torch.int32, device="cuda")
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)

    def f(q, k, v, kn, vn, lens, table):
        o, lse = flash_attn_with_kvcache(q, k, v, k=kn, v=vn, cache_seqlens=lens,
                                         page_table=table, num_splits=0,
                                         return_softmax_lse=True, **kw)
        # batch 0's first 8 rows, read after the call: rows 3 and 4 are new
        first = (k[0] if table is None else k.index_select(0, table[0, :1].long())[0])[:8]
        o2 = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens + snew, page_table=table,
                                     num_splits=3, **kw)
        return o.float() * 2, lse, first.float() * 2, o2

    torch._dynamo.reset()
    ek, ev = appended(k, v, kn, vn, lens.tolist(), table, ps, Skv)
    k1, v1, k2, v2 = k.clone(), v.clone(), k.clone(), v.clone()
    eager = f(q, k1, v1, kn, vn, lens, table)
    got = torch.compile(f, fullgraph=True)(q, k2, v2, kn, vn, lens, table)
    torch.cuda.synchronize()
    same = all(torch.equal(a, b) for a, b in zip(eager, got))
    caches = (wrong_rows(k1, ek), wrong_rows(v1, ev), wrong_rows(k2, ek), wrong_rows(v2, ev))
    seen = torch.equal(got[2][3:5], kn[0].float() * 2)
    graph = torch._dynamo.explain(f)(q, k.clone(), v.clone(), kn, vn, lens, table)
    ok = bool(same and caches == (0, 0, 0, 0) and seen and graph.graph_break_count == 0)
    return dict(kernel=kf.kernel, case="append: torch.compile(fullgraph=True) == eager"
                + (", paged" if paged else "") + ", the caches written", ok=ok,
                error=None if ok else f"outputs equal {same}, wrong cache rows (eager k, v, "
                                      f"compiled k, v) {caches}, new rows seen {seen}, graph "
                                      f"breaks {graph.graph_break_count}")


def check_errors(kf):
    """Misuse gets a clear error before any launch; no keys at all (Skv = 0)
    gives o = 0 and lse = -inf without the kernel."""
    import torch
    import check_fwd
    from fa3 import runtime as fa3rt
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    D, Dv = kf.head_dim, kf.head_dim_v
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)

    def mk(B, S, H, d):
        return torch.randn(B, S, H, d, device="cuda").to(dt)
    q, kc, vc = mk(2, 1, 8, D), mk(2, 64, 2, D), mk(2, 64, 2, Dv)
    kn, vn = mk(2, 2, 2, D), mk(2, 2, 2, Dv)   # new rows (refused before any launch)
    lens = torch.tensor([10, 62], dtype=torch.int32, device="cuda")

    def pool(ps, d=D):   # 9 pages of ps rows
        return mk(9, ps, 2, d)
    table = torch.tensor([[3, 1, 4, 0], [2, 8, 5, 6]], dtype=torch.int32, device="cuda")
    g = next(x for x in (48, 96, 40, 3) if kf.block_m % x)   # a group that does not divide
    cases = [
        (f"Hq/Hkv = {g}/1: g does not divide block_m {kf.block_m}",
         lambda: flash_attn_with_kvcache(mk(1, 1, g, D), mk(1, 64, 1, D), mk(1, 64, 1, Dv),
                                         **kw),
         fa3rt.Fa3RuntimeError,
         f"g = Hq / Hkv = {g} / 1 = {g} must divide block_m {kf.block_m}"),
        ("int64 cache_seqlens",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens.long(), **kw),
         ValueError, "cache_seqlens must be a 1-D torch.int32 tensor on cuda:0, got torch.int64"),
        ("cache_seqlens of 3 for B = 2",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.cat([lens, lens[:1]]),
                                         **kw),
         ValueError, "cache_seqlens must have 2 entries (one per batch), got 3"),
        ("cache_seqlens on the CPU",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens.cpu(), **kw),
         ValueError, "cache_seqlens must be a 1-D torch.int32 tensor on cuda:0"),
        ("int cache_seqlens past Skv",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=65, **kw),
         ValueError, "cache_seqlens must be 0 to k_cache's Skv = 64, got 65"),
        ("float cache_seqlens",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_seqlens=3.0, **kw),
         TypeError, "cache_seqlens must be an int or a 1-D torch.int32 tensor"),
        ("paged: page size 24",
         lambda: flash_attn_with_kvcache(q, pool(24), pool(24, Dv), cache_seqlens=lens,
                                         page_table=table, **kw),
         ValueError, f"page size 24 (k_cache.shape[1]) must divide the kernel's block_n "
         f"{kf.block_n} or be a multiple of it"),
        ("paged: page size 12",
         lambda: flash_attn_with_kvcache(q, pool(12), pool(12, Dv), cache_seqlens=lens,
                                         page_table=table, **kw),
         ValueError, "page size 12 (k_cache.shape[1]) must divide the kernel's block_n"),
        ("paged: int64 page_table",
         lambda: flash_attn_with_kvcache(q, pool(64), pool(64, Dv), page_table=table.long(),
                                         **kw),
         ValueError, "page_table must be a 2-D torch.int32 tensor [B, max_pages_per_seq] on "
         "cuda:0, got torch.int64"),
        ("paged: page_table of 3 rows for B = 2",
         lambda: flash_attn_with_kvcache(q, pool(64), pool(64, Dv),
                                         page_table=torch.cat([table, table[:1]]), **kw),
         ValueError, "page_table must have 2 rows (one per batch), got 3"),
        ("paged: k_cache and v_cache pools differ",
         lambda: flash_attn_with_kvcache(q, pool(64), pool(32, Dv), page_table=table, **kw),
         ValueError, "k_cache and v_cache must agree in [num_pages, page_size, Hkv]"),
        ("paged: int cache_seqlens past max_pages * page_size",
         lambda: flash_attn_with_kvcache(q, pool(64), pool(64, Dv), cache_seqlens=257,
                                         page_table=table, **kw),
         ValueError, "cache_seqlens must be 0 to k_cache's Skv = 256, got 257"),
        ("append: k and v without cache_seqlens",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, **kw),
         ValueError, "k and v (new keys and values to append) need cache_seqlens"),
        ("append: k without v",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn, cache_seqlens=lens, **kw),
         ValueError, "k and v (the new keys and values to append to the cache) must be given "
         "together, got k alone"),
        ("append: an int cache_seqlens without room for the new rows",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn, cache_seqlens=63, **kw),
         ValueError, "cache_seqlens must be 0 to k_cache's Skv - Snew = 64 - 2 = 62 (room for "
         "the 2 new rows of k and v a batch), got 63"),
        ("append: more new rows than the cache holds",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=mk(2, 65, 2, D), v=mk(2, 65, 2, Dv),
                                         cache_seqlens=0, **kw),
         ValueError, "k and v have Snew = 65 new rows a batch but the cache holds Skv = 64 "
         "keys"),
        ("append: k of another head count",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=mk(2, 2, 1, D), v=mk(2, 2, 1, Dv),
                                         cache_seqlens=lens, **kw),
         ValueError, f"k must be [B, Snew, Hkv, D] = [2, Snew, 2, {D}]"),
        ("append: v of another Snew",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn[:, :1], cache_seqlens=lens,
                                         **kw),
         ValueError, f"v must be [B, Snew, Hkv, Dv] = [2, 2, 2, {Dv}]"),
        ("append: k of another dtype",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn.float(), v=vn, cache_seqlens=lens,
                                         **kw),
         ValueError, f"k must have q's dtype {dt}, got torch.float32"),
        ("append: k on the CPU",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn.cpu(), v=vn, cache_seqlens=lens,
                                         **kw),
         ValueError, "k must be on q's device cuda:0, got cpu"),
        ("append: a cache with a strided last dim (written in place, not copied)",
         lambda: flash_attn_with_kvcache(q, mk(2, 64, 2, 2 * D)[..., ::2], vc, k=kn, v=vn,
                                         cache_seqlens=lens, **kw),
         ValueError, "k_cache must have a contiguous last dim to take the new rows of k and v"),
        ("append: new values that require grad",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn.clone().requires_grad_(),
                                         cache_seqlens=lens, **kw),
         NotImplementedError, "is forward-only"),
        ("rotary embedding without new rows",
         lambda: flash_attn_with_kvcache(q, kc, vc, rotary_cos=torch.zeros(8, 4, device="cuda"),
                                         rotary_sin=torch.zeros(8, 4, device="cuda"),
                                         cache_seqlens=lens, **kw),
         ValueError, "rotary_cos and rotary_sin rotate the new keys k"),
        ("rotary_cos wider than the head dim allows",
         lambda: flash_attn_with_kvcache(q, kc, vc, k=kn, v=vn,
                                         rotary_cos=torch.zeros(8, D, device="cuda"),
                                         rotary_sin=torch.zeros(8, D, device="cuda"),
                                         cache_seqlens=lens, **kw),
         ValueError, "rotary_cos must be a floating tensor [seqlen_ro, rotary_dim / 2]"),
        ("cache_batch_idx with a page table",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_batch_idx=lens,
                                         page_table=lens.reshape(2, 1), **kw),
         ValueError, "cache_batch_idx indexes a contiguous cache's rows"),
        ("cache_leftpad with a paged cache of several pages a batch",
         lambda: flash_attn_with_kvcache(q, pool(16), pool(16), cache_leftpad=lens,
                                         page_table=torch.zeros(2, 4, dtype=torch.int32,
                                                                device="cuda"), **kw),
         NotImplementedError, "cache_leftpad with a paged cache of 4 pages a batch"),
        ("cache_leftpad of the wrong dtype",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_leftpad=lens.long(), **kw),
         ValueError, "cache_leftpad must be a 1-D torch.int32 tensor on cuda:0"),
        ("cache_leftpad of the wrong count",
         lambda: flash_attn_with_kvcache(q, kc, vc, cache_leftpad=lens[:1], **kw),
         ValueError, "cache_leftpad must have 2 entries"),
        ("num_splits 129",
         lambda: flash_attn_with_kvcache(q, kc, vc, num_splits=129, **kw),
         ValueError, "num_splits must be 0 (the heuristic) to 128, got 129"),
        ("q requires grad",
         lambda: flash_attn_with_kvcache(q.clone().requires_grad_(), kc, vc, **kw),
         NotImplementedError, "is forward-only"),
        ("Hq % Hkv != 0",
         lambda: flash_attn_with_kvcache(mk(2, 1, 3, D), kc, vc, **kw),
         ValueError, "multiple of the number of k/v heads"),
    ]
    out = []
    for label, fn, exc, text in cases:
        try:
            fn()
            ok, got = False, "no error"
        except exc as e:
            ok, got = text in str(e), str(e)[:300]
        except Exception as e:  # noqa: BLE001
            ok, got = False, f"{type(e).__name__}: {str(e)[:300]}"
        out.append(dict(kernel=kf.kernel, case=f"error: {label}", ok=ok,
                        error=None if ok else got))
    # no keys at all (Skv = 0): the runtime's fill, splits or not
    e = torch.empty(2, 0, 2, D, device="cuda", dtype=dt)
    ok = True
    for n in (0, 1, 4):
        o, lse = flash_attn_with_kvcache(q, e, e[..., :Dv], cache_seqlens=0, num_splits=n,
                                         return_softmax_lse=True, **kw)
        ok = ok and bool((o == 0).all()) and bool(torch.isneginf(lse).all())
    out.append(dict(kernel=kf.kernel, case="no keys (Skv = 0)", ok=ok))
    return out


def check_graph(kf, sms):
    """A split call (the heuristic's splits, ragged cache_seqlens) captured
    in a CUDA graph: its replays equal eager calls, also after q and
    cache_seqlens change in place (the graph reads them at replay)."""
    import torch
    import check_fwd
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(11)
    B, Sq, Hq, Hkv, Skv = 3, 1, 32, 8, 16384
    q = check_fwd.rand((B, Sq, Hq, kf.head_dim), dt, gen)
    k = check_fwd.rand((B, Skv, Hkv, kf.head_dim), dt, gen)
    v = check_fwd.rand((B, Skv, Hkv, kf.head_dim_v), dt, gen)
    lens = torch.tensor([5000, 0, Skv], dtype=torch.int32, device="cuda")
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf, num_splits=0, return_softmax_lse=True)
    splits = resolved_splits(kf, ("graph", B, Sq, Hq, Hkv, Skv, 0, None, True), sms)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):   # loads the kernel and warms the allocator
        flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        og, lg = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    graph.replay()
    torch.cuda.synchronize()
    oe, le = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    first = torch.equal(og, oe) and torch.equal(lg, le)
    before = og.clone()
    q.copy_(check_fwd.rand(tuple(q.shape), dt, gen))
    lens.copy_(torch.tensor([Skv, 17, 1], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    oe, le = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    second = torch.equal(og, oe) and torch.equal(lg, le) and not torch.equal(og, before)
    ok = bool(first and second and splits > 1)
    return dict(kernel=kf.kernel, case="CUDA graph of a split call, replayed on new inputs",
                B=B, Sq=Sq, Skv=Skv, Hq=Hq, Hkv=Hkv, splits=splits, ok=ok,
                error=None if ok else f"first replay equal {first}, second {second}, "
                                      f"splits {splits}")


def check_graph_paged(kf, sms):
    """A paged split call captured in a CUDA graph: its replays equal eager
    calls, also after the page table and cache_seqlens change in place
    (the graph reads them at replay)."""
    import torch
    import check_fwd
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(13)
    B, Sq, Hq, Hkv, Skv, ps = 3, 1, 32, 8, 16384, 64
    q = check_fwd.rand((B, Sq, Hq, kf.head_dim), dt, gen)
    # twice the pages the table needs: the second table takes the others
    k, v, table, _, _ = paged_inputs(kf, 2 * B, Hkv, Skv, ps, [Skv] * 2 * B, gen, fill=False)
    table, other = table[:B].clone(), table[B:].clone()
    lens = torch.tensor([5000, 0, Skv], dtype=torch.int32, device="cuda")
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf, num_splits=0, return_softmax_lse=True,
              page_table=table)
    splits = resolved_splits(kf, ("graph", B, Sq, Hq, Hkv, Skv, 0, None, True), sms)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):   # loads the kernel and warms the allocator
        flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        og, lg = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    graph.replay()
    torch.cuda.synchronize()
    oe, le = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    first = torch.equal(og, oe) and torch.equal(lg, le)
    before = og.clone()
    table.copy_(other)
    lens.copy_(torch.tensor([Skv, 17, 1], dtype=torch.int32))
    graph.replay()
    torch.cuda.synchronize()
    oe, le = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, **kw)
    second = torch.equal(og, oe) and torch.equal(lg, le) and not torch.equal(og, before)
    ok = bool(first and second and splits > 1)
    return dict(kernel=kf.kernel, case="CUDA graph of a paged split call, replayed on a new "
                "page table", B=B, Sq=Sq, Skv=Skv, Hq=Hq, Hkv=Hkv, page_size=ps,
                splits=splits, ok=ok,
                error=None if ok else f"first replay equal {first}, second {second}, "
                                      f"splits {splits}")


def check_compiled_paged(kf):
    """torch.compile(fullgraph=True) of a paged flash_attn_with_kvcache
    call (the op takes the page table): equal to eager, no graph break."""
    import torch
    import check_fwd
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(17)
    q = check_fwd.rand((2, 1, 32, kf.head_dim), dt, gen)
    k, v, table, _, _ = paged_inputs(kf, 2, 8, 4096, 64, [4096, 4096], gen, fill=False)
    lens = torch.tensor([1000, 0], dtype=torch.int32, device="cuda")
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)

    def f(q, k, v, lens, table):
        o, lse = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, page_table=table,
                                         num_splits=0, return_softmax_lse=True, **kw)
        o2 = flash_attn_with_kvcache(q, k, v, cache_seqlens=17, page_table=table, num_splits=3,
                                     **kw)
        return o.float() * 2, lse, o2

    torch._dynamo.reset()
    eager = f(q, k, v, lens, table)
    got = torch.compile(f, fullgraph=True)(q, k, v, lens, table)
    torch.cuda.synchronize()
    ok = all(torch.equal(a, b) for a, b in zip(eager, got))
    graph = torch._dynamo.explain(f)(q, k, v, lens, table)
    ok = ok and graph.graph_break_count == 0
    return dict(kernel=kf.kernel, case="paged: torch.compile(fullgraph=True) == eager",
                ok=bool(ok), error=None if ok else f"graph breaks {graph.graph_break_count}")


def check_compiled(kf):
    """torch.compile(fullgraph=True) of a function calling
    flash_attn_with_kvcache (a tensor cache_seqlens and the heuristic's
    splits; an int cache_seqlens and 3 splits): traced as
    torch.ops.fa3.flash_attn_decode_fwd, the same kernels, so the outputs
    equal the eager call's bit for bit; no graph break."""
    import torch
    import check_fwd
    from fa3.torch_api import flash_attn_with_kvcache
    dt = check_fwd.TORCH_DTYPE[kf.dtype]
    gen = torch.Generator(device="cuda").manual_seed(7)
    q = check_fwd.rand((2, 1, 32, kf.head_dim), dt, gen)
    k = check_fwd.rand((2, 4224, 8, kf.head_dim), dt, gen)
    v = check_fwd.rand((2, 4224, 8, kf.head_dim_v), dt, gen)
    lens = torch.tensor([1000, 0], dtype=torch.int32, device="cuda")
    kw = dict(causal=kf.causal, window_size=(kf.window_left, kf.window_right),
              softcap=kf.softcap, kernel=kf)

    def f(q, k, v, lens):
        o, lse = flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, num_splits=0,
                                         return_softmax_lse=True, **kw)
        o2 = flash_attn_with_kvcache(q, k, v, cache_seqlens=17, num_splits=3, **kw)
        return o.float() * 2, lse, o2

    torch._dynamo.reset()
    eager = f(q, k, v, lens)
    got = torch.compile(f, fullgraph=True)(q, k, v, lens)
    torch.cuda.synchronize()
    ok = all(torch.equal(a, b) for a, b in zip(eager, got))
    graph = torch._dynamo.explain(f)(q, k, v, lens)
    ok = ok and graph.graph_break_count == 0
    return dict(kernel=kf.kernel, case="torch.compile(fullgraph=True) == eager", ok=bool(ok),
                error=None if ok else f"graph breaks {graph.graph_break_count}")


def lead_kernel(kernels):
    """The kernel of the once-per-run checks: bf16 head dim 128 where there
    is one."""
    return next((k for k in kernels if k.head_dim == 128 and k.dtype == "bf16"), kernels[0])


def main():
    import torch
    import check_fwd
    import records
    from fa3 import facts as fa3facts
    a = check_fwd.parse_args(__doc__.split("\n\n")[0], "small cases (for compute-sanitizer)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    kernels, skipped = fa3facts.scan_kernel_dir(a.kernel_dir)
    for s in skipped:
        print(f"SKIPPED FILE {s}")
    kernels = [k for k in kernels if k.split_kv and (not a.only or a.only in k.kernel)]
    if not kernels:
        print(f"no decoding kernels (facts split_kv 1: fa3-compile --decode) in {a.kernel_dir}")
        return 1
    # the FP8 decoding kernels (e4m3 caches) take FP8_CASES only
    fp8_kernels = [k for k in kernels if k.dtype == "e4m3"]
    kernels = [k for k in kernels if k.dtype != "e4m3"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"seed {a.seed}; {len(kernels) + len(fp8_kernels)} kernel(s): "
          + ", ".join(k.kernel for k in kernels + fp8_kernels))
    results, sass = [], {}
    t0 = time.time()

    def show(r):
        results.append(r)
        print(("PASS " if r["ok"] else "FAIL ") + f"{r['case']}: "
              + ", ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in r.items() if k not in ("kernel", "case", "ok")),
              flush=True)

    def guarded(kf, label, fn):
        try:
            rs = fn()
        except Exception as e:  # a crash in one case must not hide the others
            traceback.print_exc()
            rs = dict(kernel=kf.kernel, case=label, ok=False, error=f"{type(e).__name__}: {e}")
        for r in rs if isinstance(rs, list) else [rs]:
            show(r)

    for i, kf in enumerate(fp8_kernels):
        print(f"== {kf.describe()}", flush=True)
        for j, case in enumerate(FP8_CASES):
            if a.sanitize and case[0] not in FP8_SANITIZE:
                continue
            guarded(kf, case[0], lambda case=case, j=j, kf=kf: run_fp8_case(
                kf, case, a.seed + 1000 * i + 600 + j, a.kernel_dir, a.sanitize))
        for j, case in enumerate(FP8_ROUTE_CASES if not a.sanitize else []):
            guarded(kf, case[0], lambda case=case, j=j, kf=kf: run_fp8_route_case(
                kf, case, a.seed + 1000 * i + 650 + j, a.kernel_dir))
    lead = lead_kernel(kernels) if kernels else None
    if lead is not None:
        guarded(lead, "paged: table entries outside the pool",
                lambda: check_bad_page_entries(lead, a.seed + 999))
        if copies_small_pages(lead, 8):
            guarded(lead, "paged 8: table entries outside the pool",
                    lambda: check_bad_page_entries(lead, a.seed + 998, ps=8))
    if not a.sanitize and lead is not None:
        print(f"== once per run, on {lead.kernel}", flush=True)
        guarded(lead, "torch.compile", lambda: check_compiled(lead))
        guarded(lead, "CUDA graph", lambda: check_graph(lead, sms))
        guarded(lead, "errors", lambda: check_errors(lead))
        guarded(lead, "paged torch.compile", lambda: check_compiled_paged(lead))
        guarded(lead, "paged CUDA graph", lambda: check_graph_paged(lead, sms))
        for paged in (False, True):
            guarded(lead, "append torch.compile",
                    lambda paged=paged: check_compiled_append(lead, paged))
            guarded(lead, "append CUDA graph",
                    lambda paged=paged: check_graph_append(lead, sms, paged))
    for i, kf in enumerate(kernels):
        print(f"== {kf.describe()}", flush=True)
        for j, case in enumerate(cases(kf.head_dim, kf.dtype, a.sanitize)):
            guarded(kf, case[0], lambda case=case, j=j: run_case(kf, case, a.seed + 1000 * i + j,
                                                                 sms))
        for j, case in enumerate(paged_cases(kf, a.sanitize)):
            guarded(kf, case[0], lambda case=case, j=j: run_paged_case(
                kf, case, a.seed + 1000 * i + 500 + j, sms))
        for j, case in enumerate(append_cases(kf, a.sanitize)):
            guarded(kf, case[0], lambda case=case, j=j: run_append_case(
                kf, case, a.seed + 1000 * i + 800 + j, sms))
        if kf.head_dim == 128 and not a.sanitize:
            for j, case in enumerate(ROTARY_CASES):
                guarded(kf, case[0], lambda case=case, j=j: run_rotary_case(
                    kf, case, a.seed + 1000 * i + 900 + j, sms))
            for j, case in enumerate(BATCH_IDX_CASES):
                guarded(kf, case[0], lambda case=case, j=j: run_batch_idx_case(
                    kf, case, a.seed + 1000 * i + 950 + j, sms))
        # every kernel (small cases, also under compute-sanitizer); once
        # through torch.compile on the lead kernel
        for j, case in enumerate(LEFTPAD_CASES):
            if case[10] and not takes_page_size(kf, case[5]):
                continue   # cache_batch_idx's page: the whole cache, which block_n must fit
            guarded(kf, case[0], lambda case=case, j=j: run_leftpad_case(
                kf, case, a.seed + 1000 * i + 970 + j, sms,
                compiled=kf is lead and j == 3 and not a.sanitize))
        # packed queries: every case on the head dim 128 kernels; the paged
        # ones also at the other head dims whose paged packed-batch kernel
        # copies small pages (64, 96, 256: their copies' row layouts differ)
        packed_paged = kf.paged_copy and kf.dtype != "e4m3"
        if kf.head_dim == 128 or packed_paged:
            for j, case in enumerate(PACKED_Q_CASES):
                if a.sanitize and case[0] not in PACKED_Q_SANITIZE:
                    continue
                if kf.head_dim != 128 and not case[6]:
                    continue
                guarded(kf, case[0], lambda case=case, j=j: run_packed_q_case(
                    kf, case, a.seed + 1000 * i + 990 + j, a.kernel_dir,
                    compiled=kf is lead and bool(case[6]) and not a.sanitize))
            for j, case in enumerate(PACKED_APPEND_CASES):
                if kf.head_dim != 128:
                    break
                if a.sanitize and case[0] not in PACKED_APPEND_SANITIZE:
                    continue
                guarded(kf, case[0], lambda case=case, j=j: run_packed_append_case(
                    kf, case, a.seed + 1000 * i + 970 + j, a.kernel_dir))
        if not a.sanitize:
            sass[kf.kernel] = check_fwd.sass_check(kf)
            print(f"SASS {kf.kernel}: {sass[kf.kernel]}", flush=True)
    nfail = sum(not r["ok"] for r in results) + sum(not s["ok"] for s in sass.values())
    print(f"check_decode: {len(results) - sum(not r['ok'] for r in results)}/{len(results)} "
          f"cases passed, {nfail} failure(s), {time.time() - t0:.1f} s")
    if a.out and not a.sanitize:
        now = datetime.datetime.now()
        meta = check_fwd.run_meta(a, now, sms=sms, seconds=round(time.time() - t0, 1))
        check_fwd.write_report(a.out, records.run_id(now), meta, results, sass,
                               full=not a.only, kind="check_decode")
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
