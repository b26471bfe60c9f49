"""fa3.compile: the C API's one-call compile from Python, on the CPU machine."""
from pathlib import Path

import pytest
from toolkit import have_ptxas

from fa3 import facts as F
from fa3.compile import compile_kernel
from fa3.ir import Fa3Error

HAVE_PTXAS = have_ptxas()
needs_ptxas = pytest.mark.skipif(not HAVE_PTXAS, reason="no ptxas to assemble the cubin")


@needs_ptxas
def test_compile_variant_writes_ptx_cubin_facts(tmp_path):
    files = compile_kernel(tmp_path, head_dim=128, dtype="f16", causal=True,
                           softcap=20.0, scale=0.1)
    assert len(files) == 1
    f = files[0]
    assert f.name == "fa3_fwd_d128_f16_causal_softcap_kernel"
    ptx = f.ptx.read_text()
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor" in ptx and "tanh.approx.f32" in ptx
    assert f.cubin.read_bytes()[:4] == b"\x7fELF"
    k = F.parse_facts(f.facts.read_text(), str(f.facts))
    assert (k.dtype, k.head_dim, k.causal, k.softcap) == ("f16", 128, True, 20.0)
    assert abs(k.scale - 0.1) < 1e-6 and k.persistent


@needs_ptxas
def test_persistent_auto_follows_the_measurements(tmp_path):
    causal = compile_kernel(tmp_path / "a", head_dim=64, causal=True)[0]
    d128 = compile_kernel(tmp_path / "b", head_dim=128)[0]
    d256 = compile_kernel(tmp_path / "c", head_dim=256, causal=True)[0]
    forced = compile_kernel(tmp_path / "d", head_dim=256, persistent="on")[0]
    off = compile_kernel(tmp_path / "e", head_dim=64, persistent="off")[0]
    parse = lambda f: F.parse_facts(f.facts.read_text(), str(f.facts))
    assert parse(causal).persistent and parse(d128).persistent
    assert not parse(d256).persistent and not parse(off).persistent
    assert parse(forced).persistent
    # K/V ring depth per head dim: 4 at 64, 2 above (the facts record it)
    assert "stages 4" in causal.facts.read_text()
    assert "stages 2" in d128.facts.read_text() and "stages 2" in d256.facts.read_text()


def test_kernel_name_is_the_compilers():
    """fa3AttentionSpecName, the base name the C API gives a variant (the
    kernel function is this + "_kernel")."""
    from fa3.compile import kernel_name
    assert kernel_name(128, "f16", causal=True, softcap=20.0) == "fa3_fwd_d128_f16_causal_softcap"
    assert kernel_name(192, head_dim_v=128) == "fa3_fwd_d192v128_bf16"
    assert kernel_name(64, varlen=True) == "fa3_fwd_d64_bf16_varlen"


def test_decode_kernel_default_name():
    """The decoding kernel's default name ends in _decode
    (Fa3AttentionSpec.decode, appended last to the C struct)."""
    from fa3.compile import kernel_name
    assert kernel_name(128, decode=True) == "fa3_fwd_d128_bf16_decode"
    assert kernel_name(64, "f16", causal=True, decode=True) == "fa3_fwd_d64_f16_causal_decode"


def test_decode_kernel_compiles(tmp_path):
    """compile_kernel(decode=True): a split-KV, GQA-packed kernel (facts
    split_kv 1, pack_gqa 1, one CTA per tile, no clusters) with its
    <kernel>_combine in the same module, which fa3rt_fwd launches."""
    f = compile_kernel(tmp_path, head_dim=128, decode=True, emit_cubin=False)[0]
    kf = F.parse_facts(f.facts.read_text(), str(f.facts))
    assert kf.kernel == "fa3_fwd_d128_bf16_decode_kernel" and kf.decode
    assert kf.split_kv and kf.pack_gqa and not kf.persistent and kf.cluster_m == 1
    assert not kf.varlen and not kf.backward
    assert f".entry {kf.kernel}_combine(" in f.ptx.read_text()
    # 64 keys a block, built for two CTAs a SM (an informative facts key)
    ptx = f.ptx.read_text()
    assert kf.block_n == 64 and kf.extra.get("ctas_per_sm") == "2"
    entry = ptx[ptx.index(f".entry {kf.kernel}("):]
    assert ".minnctapersm 2" in entry[:entry.index("{")]


def test_decode_paged_copy_facts(tmp_path):
    """The decoding kernels whose producer warps copy small pages say so
    (facts paged_copy 1, cp.async in the PTX); head dim 192's rows, 24
    pieces of 16 bytes, keep TMA boxes (no paged_copy, no cp.async); and
    the key belongs to paged kernels only (fa3rt.c refuses the same)."""
    got = {}
    for d in (128, 192):
        f = compile_kernel(tmp_path / str(d), head_dim=d, decode=True, emit_cubin=False)[0]
        kf = F.parse_facts(f.facts.read_text(), str(f.facts))
        got[d] = (kf.paged_copy, "cp.async.cg.shared.global" in f.ptx.read_text())
    assert got == {128: (True, True), 192: (False, False)}
    text = f.facts.read_text().replace("split_kv 1", "split_kv 0").replace(
        "pack_gqa 1", "pack_gqa 0") + "paged_copy 1\n"
    with pytest.raises(F.FactsError, match="paged_copy 1 needs split_kv 1 or paged_kv 1"):
        F.parse_facts(text)


def test_fp8_decode_copying_transposers(tmp_path):
    """The FP8 decoding kernel: its four producer warps copy small pages and
    transpose V (transpose_warps 4 by default), and its facts ask the
    runtime to copy every page below the tile (copy_rows 64 of block_n
    128); with three transposer warps (warp 0 copying alone) the runtime's
    own limit stands (no copy_rows). copy_rows without paged_copy is
    refused (fa3rt.c likewise)."""
    got = {}
    for tw in (0, 3):
        f = compile_kernel(tmp_path / str(tw), head_dim=128, dtype="e4m3", decode=True,
                           transpose_warps=tw, emit_cubin=False)[0]
        kf = F.parse_facts(f.facts.read_text(), str(f.facts))
        got[tw] = (kf.paged_copy, kf.copy_rows)
        if tw == 0:
            text = f.facts.read_text()
    assert got == {0: (True, 64), 3: (True, 0)}
    assert "copy_rows=64" in F.parse_facts(text).describe()
    with pytest.raises(F.FactsError, match="copy_rows 64 needs paged_copy 1"):
        F.parse_facts(text.replace("paged_copy 1", "paged_copy 0"))
    with pytest.raises(F.FactsError, match="copy_rows"):
        F.parse_facts(text.replace("copy_rows 64", "copy_rows 300"))


def test_paged_varlen_kernel(tmp_path):
    """compile_kernel(varlen=True, paged=True): a packed batch's kernel that
    also takes a page table (Fa3AttentionSpec.pagedKv, appended last; facts
    paged_kv 1, one CTA per tile, named _varlen_paged), whose producer
    loads K and V through the table; paged alone is refused by the spec
    check."""
    from fa3.compile import kernel_name
    assert kernel_name(128, causal=True, varlen=True, paged=True) == \
        "fa3_fwd_d128_bf16_causal_varlen_paged"
    f = compile_kernel(tmp_path, head_dim=128, causal=True, varlen=True, paged=True,
                       emit_cubin=False)
    assert len(f) == 1   # no long-sequence kernel beside it
    kf = F.parse_facts(f[0].facts.read_text(), str(f[0].facts))
    assert kf.paged_kv and kf.varlen and not kf.persistent and not kf.decode
    # its four producer warps copy small pages (cp.async), as the decoding
    # kernel's
    assert kf.paged_copy and "cp.async.cg.shared.global" in f[0].ptx.read_text()
    assert F.matches(kf, "bf16", 128, 128, True, (-1, 0), 0.0, varlen=True, paged=True)
    assert not F.matches(kf, "bf16", 128, 128, True, (-1, 0), 0.0, varlen=True)
    with pytest.raises(Fa3Error, match="pagedKv: only with varlen"):
        compile_kernel(tmp_path, head_dim=128, paged=True, emit_cubin=False)


def test_backward_kernel_default_name():
    """The backward kernel's default name: fa3_bwd_d<D>_<dtype>[_causal]
    (Fa3AttentionSpec.backward, appended last to the C struct)."""
    from fa3.compile import kernel_name
    assert kernel_name(128, causal=True, backward=True) == "fa3_bwd_d128_bf16_causal"
    assert kernel_name(64, "f16", backward=True) == "fa3_bwd_d64_f16"


def test_backward_kernel_compiles(tmp_path):
    """compile_kernel(backward=True): the facts of a backward kernel
    (backward 1, its parameter list, one CTA per kv block, cluster_m 1)."""
    f = compile_kernel(tmp_path, head_dim=64, causal=True, backward=True, emit_cubin=False)[0]
    kf = F.parse_facts(f.facts.read_text(), str(f.facts))
    assert f.name == kf.kernel == "fa3_bwd_d64_bf16_causal_kernel"
    assert kf.backward and not kf.varlen and not kf.persistent and kf.cluster_m == 1
    # (head dim 64: steps of 128 queries, the table's)
    assert (kf.head_dim, kf.head_dim_v, kf.causal, kf.block_m, kf.block_n, kf.threads) == \
        (64, 64, True, 128, 128, 384)
    # head dim 256: both consumer warpgroups on the same 64 keys, one stage
    # (dQ's bulk reductions)
    f = compile_kernel(tmp_path / "h", head_dim=256, backward=True, emit_cubin=False)[0]
    kf = F.parse_facts(f.facts.read_text(), str(f.facts))
    assert (kf.head_dim, kf.block_m, kf.block_n, kf.threads) == (256, 64, 64, 384)
    assert "stages 1" in f.facts.read_text().splitlines()
    # head dims 96 and 192: the blocks of 128 and 256 (docs/design.md,
    # "The backward kernel")
    for d, block_n in ((96, 128), (192, 64)):
        f = compile_kernel(tmp_path / f"d{d}", head_dim=d, backward=True, emit_cubin=False)[0]
        kf = F.parse_facts(f.facts.read_text(), str(f.facts))
        assert (kf.head_dim, kf.head_dim_v, kf.block_n, kf.threads) == (d, d, block_n, 384)
    # other head dims, and Dv != D, have no backward kernel
    with pytest.raises(Fa3Error, match="head dim 80"):
        compile_kernel(tmp_path / "b", head_dim=80, backward=True, emit_cubin=False)
    with pytest.raises(Fa3Error, match="Dv = D"):
        compile_kernel(tmp_path / "v", head_dim=128, head_dim_v=64, window=(100, 50),
                       backward=True, emit_cubin=False)


def test_backward_kernel_with_window_and_softcap(tmp_path):
    """compile_kernel(backward=True) with a sliding window and a softcap:
    named as the forward's variants (_w<L>_<R>, _softcap, then _det), facts
    window_left, window_right and softcap as the forward's, which the
    backward lookup (fa3.facts.matches) then takes."""
    from fa3.compile import kernel_name
    assert kernel_name(128, causal=True, window=(256, 0), backward=True) == \
        "fa3_bwd_d128_bf16_causal_w256_0"
    assert kernel_name(64, "f16", window=(100, 50), softcap=30.0, backward=True,
                       deterministic=True) == "fa3_bwd_d64_f16_w100_50_softcap_det"
    f = compile_kernel(tmp_path, head_dim=64, dtype="f16", window=(100, 50), softcap=30.0,
                       backward=True, emit_cubin=False)[0]
    kf = F.parse_facts(f.facts.read_text(), str(f.facts))
    assert f.name == kf.kernel == "fa3_bwd_d64_f16_w100_50_softcap_kernel"
    assert kf.backward and not kf.deterministic and not kf.causal
    assert (kf.window_left, kf.window_right, kf.softcap) == (100, 50, 30.0)
    assert F.matches(kf, "f16", 64, 64, False, (100, 50), 30.0, backward=True)
    assert not F.matches(kf, "f16", 64, 64, False, (100, 50), 0.0, backward=True)
    d = compile_kernel(tmp_path / "d", head_dim=128, causal=True, window=(256, 0),
                       backward=True, deterministic=True, emit_cubin=False)[0]
    kd = F.parse_facts(d.facts.read_text(), str(d.facts))
    assert d.name == kd.kernel == "fa3_bwd_d128_bf16_causal_w256_0_det_kernel"
    assert kd.backward and kd.deterministic and kd.softcap == 0
    assert F.normalize_window(kd.causal, kd.window_left, kd.window_right) == (256, 0)
    assert F.matches(kd, "bf16", 128, 128, True, (256, 0), 0.0, backward=True,
                     deterministic=True)


def test_deterministic_backward_kernel(tmp_path):
    """compile_kernel(backward=True, deterministic=True): the backward kernel
    whose dq is bitwise reproducible (Fa3AttentionSpec.deterministic,
    appended last to the C struct): named ..._det, facts deterministic 1;
    refused without backward and with the atomic dQ path (tma_store=False)."""
    from fa3.compile import kernel_name
    assert kernel_name(128, causal=True, backward=True, deterministic=True) == \
        "fa3_bwd_d128_bf16_causal_det"
    assert kernel_name(64, "f16", backward=True, deterministic=True) == "fa3_bwd_d64_f16_det"
    f = compile_kernel(tmp_path, head_dim=128, causal=True, backward=True, deterministic=True,
                       emit_cubin=False)[0]
    kf = F.parse_facts(f.facts.read_text(), str(f.facts))
    assert f.name == kf.kernel == "fa3_bwd_d128_bf16_causal_det_kernel"
    assert kf.deterministic and kf.backward and kf.causal and kf.head_dim == 128
    plain = compile_kernel(tmp_path / "p", head_dim=128, causal=True, backward=True,
                           emit_cubin=False)[0]
    assert not F.parse_facts(plain.facts.read_text()).deterministic
    with pytest.raises(Fa3Error, match="deterministic: only with backward"):
        compile_kernel(tmp_path / "f", head_dim=128, deterministic=True, emit_cubin=False)
    with pytest.raises(Fa3Error, match="unsupported deterministic backward with tma-store=false"):
        compile_kernel(tmp_path / "t", head_dim=128, backward=True, deterministic=True,
                       tma_store=False, emit_cubin=False)


def test_unsupported_variant_reports_why(tmp_path):
    with pytest.raises(Fa3Error) as e:
        compile_kernel(tmp_path, head_dim=80)
    assert "head dim 80 (the Hopper kernel takes 64, 96, 128, 192 or 256)" in str(e.value)


def test_bad_option_is_refused(tmp_path):
    with pytest.raises(ValueError):
        compile_kernel(tmp_path, persistent="sometimes")
    with pytest.raises(ValueError):
        compile_kernel(tmp_path, lazy_rescale="sometimes")
    with pytest.raises(ValueError):
        compile_kernel(tmp_path, kv_multicast="sometimes")
    with pytest.raises(Fa3Error) as e:
        compile_kernel(tmp_path, rescale_threshold=16.0)
    assert "rescale-threshold must be 0 to 15 (log2 units), got 16" in str(e.value)


def test_kernels_by_length(tmp_path):
    """Head dim 64 causal: the kernel for any length and the table's for long
    sequences (192 rows from 6144, facts min_seqlen_q), FP8 head dim 128
    too (192 keys from 8192); options that fix the
    rows or the length give one kernel, the option's; a length out of range
    is refused by name (C API) or before the call (ctypes)."""
    both = compile_kernel(tmp_path / "a", head_dim=64, causal=True, emit_cubin=False)
    assert [f.name for f in both] == ["fa3_fwd_d64_bf16_causal_kernel",
                                      "fa3_fwd_d64_bf16_causal_long_kernel"]
    short, long = (F.parse_facts(f.facts.read_text()) for f in both)
    assert (short.block_m, short.min_seqlen_q) == (128, 0)
    assert (long.block_m, long.min_seqlen_q, long.causal) == (192, 6144, True)
    assert "min_seqlen_q" not in both[0].facts.read_text()
    rows = compile_kernel(tmp_path / "b", head_dim=64, causal=True, block_m=128, emit_cubin=False)
    assert [f.name for f in rows] == ["fa3_fwd_d64_bf16_causal_kernel"]
    # a ring that fits 128 rows but not 192 (O would take Q's second buffer):
    # the options fix the tile, so no second kernel, and no failure for it
    ring = compile_kernel(tmp_path / "g", head_dim=64, causal=True, stages=5, q_buffers=2,
                          emit_cubin=False)
    assert [f.name for f in ring] == ["fa3_fwd_d64_bf16_causal_kernel"]
    asked = compile_kernel(tmp_path / "c", head_dim=64, causal=True, min_seqlen_q=20000,
                           emit_cubin=False)
    assert len(asked) == 1
    k = F.parse_facts(asked[0].facts.read_text())
    assert (k.block_m, k.min_seqlen_q) == (192, 20000)
    # no entry for long sequences: the option changes nothing
    d128 = compile_kernel(tmp_path / "d", head_dim=128, causal=True, min_seqlen_q=20000,
                          emit_cubin=False)
    assert len(d128) == 1 and "min_seqlen_q" not in d128[0].facts.read_text()
    # a packed batch's kernel too (its launcher's length: the batch's mean)
    packed = compile_kernel(tmp_path / "e", head_dim=64, causal=True, varlen=True,
                            emit_cubin=False)
    assert [f.name for f in packed] == ["fa3_fwd_d64_bf16_causal_varlen_kernel",
                                        "fa3_fwd_d64_bf16_causal_varlen_long_kernel"]
    k = F.parse_facts(packed[1].facts.read_text())
    assert (k.block_m, k.min_seqlen_q, k.varlen) == (192, 6144, True)
    # FP8 head dim 128, full or causal: 192-key tiles on two stages from
    # 8192; windows and other head dims have no entry
    for causal in (False, True):
        fp8 = compile_kernel(tmp_path / f"h{int(causal)}", head_dim=128, dtype="e4m3",
                             causal=causal, emit_cubin=False)
        assert [f.name for f in fp8] == [f"fa3_fwd_d128_e4m3{'_causal' if causal else ''}"
                                         f"{sfx}_kernel" for sfx in ("", "_long")]
        short, long = (dict(l.split(" ", 1) for l in f.facts.read_text().splitlines())
                       for f in fp8)
        key = ("block_m", "block_n", "stages", "min_seqlen_q")
        assert [short.get(k) for k in key] == ["128", "128", "2", None]
        assert [long.get(k) for k in key] == ["128", "192", "2", "8192"]
    for kw in (dict(head_dim=128, window=(256, 0)), dict(head_dim=256, causal=True),
               dict(head_dim=64, causal=True)):
        one = compile_kernel(tmp_path / "i", dtype="e4m3", emit_cubin=False, **kw)
        assert len(one) == 1 and "min_seqlen_q" not in one[0].facts.read_text(), kw
    with pytest.raises(Fa3Error, match="minSeqlenQ must be 0 .any length. to 2147483647, got -1"):
        compile_kernel(tmp_path / "f", head_dim=64, min_seqlen_q=-1, emit_cubin=False)
    with pytest.raises(ValueError, match="min_seqlen_q"):
        compile_kernel(tmp_path / "f", head_dim=64, min_seqlen_q=2**64, emit_cubin=False)


def test_lazy_rescale_reaches_the_kernel(tmp_path):
    facts = lambda f: dict(l.split(" ", 1) for l in f.facts.read_text().splitlines())
    ptx = lambda f: f.ptx.read_text()
    auto = compile_kernel(tmp_path / "a", head_dim=128)[0]
    off = compile_kernel(tmp_path / "b", head_dim=128, lazy_rescale="off")[0]
    assert facts(auto)["lazy_rescale"] == "1" and "vote.sync.any" in ptx(auto)
    assert facts(off)["lazy_rescale"] == "0" and "vote.sync.any" not in ptx(off)


def test_kv_multicast_where_it_applies(tmp_path):
    parse = lambda f: F.parse_facts(f.facts.read_text(), str(f.facts))
    ptx = lambda f: f.ptx.read_text()
    # auto: persistent kernels with a full mask (head dim 128)
    auto = compile_kernel(tmp_path / "a", head_dim=128)[0]
    assert parse(auto).cluster_m == 2
    assert ".reqnctapercluster 2, 1, 1" in ptx(auto) and ".multicast::cluster" in ptx(auto)
    assert "mapa.shared::cluster" in ptx(auto)
    off = compile_kernel(tmp_path / "b", head_dim=128, kv_multicast="off")[0]
    assert parse(off).cluster_m == 1 and "reqnctapercluster" not in ptx(off)
    # not where the two CTAs of a pair would visit different kv blocks, nor
    # at head dim 64 (one 64-column box per tile: nothing to split)
    for i, kw in enumerate([dict(causal=True), dict(window=(256, -1)), dict(head_dim=64)]):
        f = compile_kernel(tmp_path / f"c{i}", **{"head_dim": 128, **kw}, kv_multicast="on")[0]
        assert parse(f).cluster_m == 1 and "multicast" not in ptx(f), kw
    # on: also one CTA per tile (head dim 256)
    d256 = compile_kernel(tmp_path / "d", head_dim=256, kv_multicast="on")[0]
    assert parse(d256).cluster_m == 2 and not parse(d256).persistent
    assert parse(compile_kernel(tmp_path / "e", head_dim=256)[0]).cluster_m == 1


def test_varlen_kernel(tmp_path):
    """A packed variable-length kernel: no clusters whatever the options say
    (they choose among the fixed-length kernels' alternatives), persistent
    where the fixed-length kernel is, then with O staged in shared memory
    and copied out by the consumers (16-byte stores, no TMA store); with one
    CTA per tile O is stored by TMA inside a sequence and directly at its
    end; its name and facts say varlen."""
    parse = lambda f: F.parse_facts(f.facts.read_text(), str(f.facts))
    f = compile_kernel(tmp_path, head_dim=128, varlen=True, kv_multicast="on",
                       tma_store=True, emit_cubin=False)[0]
    kf = parse(f)
    assert kf.kernel == "fa3_fwd_d128_bf16_varlen_kernel" and kf.varlen
    assert kf.persistent and kf.cluster_m == 1 and kf.extra["o_store"] == "staged"
    ptx = f.ptx.read_text()
    # TMA loads, O staged (stmatrix) and copied out in 16-byte units, no
    # cluster; the dynamic scheduler
    assert "cp.async.bulk.tensor.4d.shared::cluster.global" in ptx
    assert "cp.async.bulk.tensor.4d.global.shared" not in ptx and "stmatrix" in ptx
    assert "ld.shared.v4.b32" in ptx and "st.global.v4.b32" in ptx
    assert "reqnctapercluster" not in ptx and "atom.global.add" in ptx
    # the sequence arrays (cuSeqlensQ/K, seqUsedK: parameters 16-18) are read
    assert "ld.global" in ptx
    assert all(f"{kf.kernel}_param_{i}];" in ptx for i in (16, 17, 18))
    fixed_files = compile_kernel(tmp_path / "b", head_dim=128, emit_cubin=False)[0]
    fixed = parse(fixed_files)
    assert not fixed.varlen and fixed.persistent and fixed.cluster_m == 2
    assert "ld.global" not in fixed_files.ptx.read_text()
    tiles_files = compile_kernel(tmp_path / "c", head_dim=128, varlen=True, persistent="off",
                                 emit_cubin=False)[0]
    tiles = parse(tiles_files)
    assert tiles.varlen and not tiles.persistent and tiles.extra["o_store"] == "tma"
    ptx = tiles_files.ptx.read_text()
    assert "cp.async.bulk.tensor.4d.global.shared" in ptx and "st.global.b32" in ptx


def test_q_buffers_default_and_override(tmp_path):
    parse = lambda f: F.parse_facts(f.facts.read_text(), str(f.facts))
    two = parse(compile_kernel(tmp_path / "a", head_dim=64)[0])
    one = parse(compile_kernel(tmp_path / "b", head_dim=64, q_buffers=1)[0])
    # the default double-buffers Q at head dim 64: one more 192 x 64 bf16 tile
    # (24 KiB; 192 query rows with a full mask), plus one more pair of Q
    # barriers and tile slot (32 bytes)
    assert two.block_m == 192 and two.threads == 512
    assert two.dynamic_smem - one.dynamic_smem == 192 * 64 * 2 + 32
    with pytest.raises(Fa3Error) as e:
        compile_kernel(tmp_path / "c", head_dim=256, q_buffers=2)
    assert "two Q buffers" in str(e.value)


def test_find_ptxas_is_the_compilers_lookup(tmp_path):
    from fa3.compile import find_ptxas
    assert find_ptxas(str(tmp_path / "no-toolkit")) is None
    found = find_ptxas()
    assert (found is not None) == HAVE_PTXAS
    if found:
        assert Path(found).name == "ptxas" and Path(found).exists()


def _fake_toolkit(root: Path, script: str) -> Path:
    """A toolkit whose bin/ptxas is `script` (a POSIX shell script)."""
    exe = root / "bin" / "ptxas"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return root


def test_a_ptxas_that_writes_garbage_is_an_error(tmp_path):
    # It used to yield an 8-byte "cubin" that only the driver refused.
    tk = _fake_toolkit(tmp_path / "tk", 'while [ "$1" != -o ]; do shift; done\n'
                                       'printf garbage! > "$2"\n')
    with pytest.raises(Fa3Error, match="wrote 8 bytes that are not a CUDA ELF"):
        compile_kernel(tmp_path / "out", head_dim=64, toolkit=str(tk))


def test_transpose_warps(tmp_path):
    """FP8's transposer on four warps reaches the kernel (warp 0's part of
    it: more ldmatrix in the PTX than with three), and is the default at
    head dim 256; other counts, and four where the kernel cannot take it,
    are the compiler's errors."""
    three = compile_kernel(tmp_path / "w3", head_dim=256, dtype="e4m3", emit_cubin=False,
                           transpose_warps=3)
    four = compile_kernel(tmp_path / "w4", head_dim=256, dtype="e4m3", emit_cubin=False,
                          transpose_warps=4)
    default = compile_kernel(tmp_path / "w0", head_dim=256, dtype="e4m3", emit_cubin=False)
    n3 = three[0].ptx.read_text().count("ldmatrix")
    n4 = four[0].ptx.read_text().count("ldmatrix")
    assert n4 > n3 > 0
    assert default[0].ptx.read_text() == four[0].ptx.read_text()
    at128 = compile_kernel(tmp_path / "d128", head_dim=128, dtype="e4m3", emit_cubin=False)
    three128 = compile_kernel(tmp_path / "t128", head_dim=128, dtype="e4m3", emit_cubin=False,
                              transpose_warps=3)
    assert at128[0].ptx.read_text() == three128[0].ptx.read_text()
    with pytest.raises(Fa3Error, match=r"transposeWarps must be 0 \(the table\), 3 or 4, got 5"):
        compile_kernel(tmp_path / "x", head_dim=256, dtype="e4m3", emit_cubin=False,
                       transpose_warps=5)
    with pytest.raises(Fa3Error, match="transpose_warps 4 without FP8"):
        compile_kernel(tmp_path / "x", head_dim=128, emit_cubin=False, transpose_warps=4)


def test_a_failing_ptxas_is_an_error_with_its_messages(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", 'echo "ptxas fatal: out of cheese" >&2\nexit 3\n')
    with pytest.raises(Fa3Error, match=r"failed \(exit status 3\):\s+ptxas fatal: out of cheese"):
        compile_kernel(tmp_path / "out", head_dim=64, toolkit=str(tk))


def test_a_hanging_ptxas_is_stopped_at_the_time_limit(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", "exec sleep 60\n")
    with pytest.raises(Fa3Error, match=r"did not finish \(.*limit 1 s\)"):
        compile_kernel(tmp_path / "out", head_dim=64, toolkit=str(tk), ptxas_timeout=1)
    with pytest.raises(ValueError, match="ptxas_timeout"):
        compile_kernel(tmp_path / "out", head_dim=64, ptxas_timeout=2**64)
    with pytest.raises(Fa3Error, match="ptxasTimeoutSeconds must be 0 .default. to 86400, got -1"):
        compile_kernel(tmp_path / "out", head_dim=64, ptxas_timeout=-1)
