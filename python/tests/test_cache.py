"""fa3.cache, the JIT compile cache, on the CPU machine: keys, concurrent
processes, corrupt entries, $FA3_CACHE_DIR, the fallback of
fa3.torch_api.select_kernel, a package without the compiler, and the per-call
lookup overhead (printed: pytest -s)."""
import hashlib
import multiprocessing
import os
import shutil
import subprocess
import sys
import textwrap
import time
import timeit
from pathlib import Path

import pytest
from toolkit import have_ptxas

from fa3 import cache, torch_api
from fa3 import facts as F
from fa3.ir import Fa3Error

ROOT = Path(__file__).resolve().parents[2]
needs_ptxas = pytest.mark.skipif(not have_ptxas(), reason="no ptxas to assemble the cubin")
PTX = dict(emit_cubin=False)   # PTX and facts only: no ptxas, 0.4 s a compile


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh $FA3_CACHE_DIR and no lookups remembered from other tests."""
    d = tmp_path / "cache"
    monkeypatch.setenv("FA3_CACHE_DIR", str(d))
    monkeypatch.delenv("FA3_KERNEL_DIR", raising=False)
    monkeypatch.delenv("FA3_JIT", raising=False)
    torch_api.clear_caches()
    yield d
    torch_api.clear_caches()


@pytest.fixture
def count_compiles(monkeypatch):
    """Wraps cache._compile; returns the list of compiled variants."""
    calls = []
    real = cache._compile

    def counting(out_dir, variant):
        calls.append(variant)
        return real(out_dir, variant)
    monkeypatch.setattr(cache, "_compile", counting)
    return calls


def _key(*a, version="v1", **kw):
    return cache.variant_key(cache.make_variant(*a, **kw), version)


def test_keys():
    base = _key("bf16", 128)
    # the same variant, written differently: the same key
    assert _key("bf16", 128, 128) == base
    assert _key("bf16", 128, window=(-5, -3)) == base        # negative = unbounded
    assert _key("bf16", 128, block_n=0, persistent="auto") == base   # defaults spelled out
    assert _key("bf16", 128, causal=True) == _key("bf16", 128, window=(-1, 0))
    assert _key("bf16", 128, causal=True, window=(-1, 7)) == _key("bf16", 128, causal=True)
    assert _key("bf16", 128, softcap=None) == _key("bf16", 128, softcap=0)
    # another variant, option or compiler: another key
    others = [_key("f16", 128), _key("bf16", 64), _key("bf16", 128, 64),
              _key("bf16", 128, causal=True), _key("bf16", 128, window=(256, 0)),
              _key("bf16", 128, window=(256, -1)), _key("bf16", 128, softcap=30.0),
              _key("bf16", 128, softcap=30.5), _key("bf16", 128, block_n=64),
              _key("bf16", 128, persistent="off"), _key("bf16", 128, emit_cubin=False),
              _key("bf16", 128, rescale_threshold=4.0), _key("bf16", 128, version="v2")]
    assert len(set(others + [base])) == len(others) + 1
    # a key is a pure function of its inputs: another process computes the same
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from fa3 import cache; "
            "print(cache.variant_key(cache.make_variant('bf16', 128, softcap=30.0), 'v1'))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "python")],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == _key("bf16", 128, softcap=30.0)
    with pytest.raises(TypeError, match="unknown compile option.*blok_n"):
        cache.make_variant("bf16", 128, blok_n=64)


def test_backward_is_its_own_key():
    """The backward kernel of a variant is keyed apart from its forward (and
    its entry directory says so)."""
    fwd = cache.make_variant("bf16", 128, causal=True)
    bwd = cache.make_variant("bf16", 128, causal=True, backward=True)
    assert dict(fwd.options)["backward"] is False and dict(bwd.options)["backward"] is True
    assert cache.variant_key(fwd, "v1") != cache.variant_key(bwd, "v1")
    assert cache.entry_name(bwd, "k").startswith("bf16-d128-bwd-")
    assert cache.entry_name(fwd, "k") == "bf16-d128-k"
    kf = F.parse_facts("fa3-kernel-facts 1\nkernel b\ndtype bf16\n"
                       "head_dim 128\nhead_dim_v 128\nblock_m 64\nblock_n 128\nthreads 384\n"
                       "dynamic_smem 1\ncausal 1\nwindow_left -1\nwindow_right 0\nsoftcap 0\n"
                       f"scale 0.1\nparams {F.BWD_KERNEL_PARAMS}\ngrid tiles\nbackward 1\n")
    assert cache._matches(kf, bwd) and not cache._matches(kf, fwd)


def test_deterministic_is_its_own_key():
    """The deterministic backward kernel of a variant is keyed and named
    apart from the plain one, and each matches only its own facts."""
    bwd = cache.make_variant("bf16", 128, causal=True, backward=True)
    det = cache.make_variant("bf16", 128, causal=True, backward=True, deterministic=True)
    assert dict(bwd.options)["deterministic"] is False
    assert dict(det.options)["deterministic"] is True
    assert cache.variant_key(bwd, "v1") != cache.variant_key(det, "v1")
    assert cache.entry_name(det, "k") == "bf16-d128-bwd-det-k"
    assert cache.entry_name(bwd, "k") == "bf16-d128-bwd-k"
    text = ("fa3-kernel-facts 1\nkernel b\ndtype bf16\n"
            "head_dim 128\nhead_dim_v 128\nblock_m 64\nblock_n 128\nthreads 384\n"
            "dynamic_smem 1\ncausal 1\nwindow_left -1\nwindow_right 0\nsoftcap 0\n"
            f"scale 0.1\nparams {F.BWD_KERNEL_PARAMS}\ngrid tiles\nbackward 1\n")
    kf, plain = F.parse_facts(text + "deterministic 1\n"), F.parse_facts(text)
    assert cache._matches(kf, det) and not cache._matches(kf, bwd)
    assert cache._matches(plain, bwd) and not cache._matches(plain, det)


def test_paged_varlen_is_its_own_key():
    """A paged varlen kernel (paged_kv) is keyed and named apart from the
    plain varlen one, and only a paged_kv kernel matches it."""
    vl = cache.make_variant("bf16", 128, varlen=True)
    pg = cache.make_variant("bf16", 128, varlen=True, paged=True)
    assert cache.variant_key(vl, "v1") != cache.variant_key(pg, "v1")
    assert cache.entry_name(pg, "k") == "bf16-d128-paged-k"
    text = ("fa3-kernel-facts 1\nkernel d\ndtype bf16\nhead_dim 128\nhead_dim_v 128\n"
            "block_m 128\nblock_n 128\nthreads 384\ndynamic_smem 1\ncausal 0\nwindow_left -1\n"
            f"window_right -1\nsoftcap 0\nscale 0.1\nparams {F.KERNEL_PARAMS}\ngrid tiles\n"
            "varlen 1\n")
    kf = F.parse_facts(text + "paged_kv 1\n")
    assert kf.paged_kv and cache._matches(kf, pg) and not cache._matches(kf, vl)
    # paged_kv's facts: a varlen kernel of one CTA per tile (fa3rt.c's rule)
    with pytest.raises(F.FactsError, match="paged_kv 1 needs varlen 1"):
        F.parse_facts(text.replace("varlen 1", "varlen 0") + "paged_kv 1\n")
    with pytest.raises(F.FactsError, match="paged_kv 1 needs grid tiles"):
        F.parse_facts(text.replace("grid tiles", "grid persistent") + "paged_kv 1\n")
    plain = F.parse_facts(text)
    assert cache._matches(plain, vl) and not cache._matches(plain, pg)


def test_decode_is_its_own_key():
    """The decoding kernel of a variant (split-KV, GQA packing) is keyed and
    named apart from its forward, and only a split_kv / pack_gqa kernel
    matches it."""
    fwd = cache.make_variant("bf16", 128)
    dec = cache.make_variant("bf16", 128, decode=True)
    assert dict(fwd.options)["decode"] is False and dict(dec.options)["decode"] is True
    assert cache.variant_key(fwd, "v1") != cache.variant_key(dec, "v1")
    assert cache.entry_name(dec, "k") == "bf16-d128-dec-k"
    text = ("fa3-kernel-facts 1\nkernel d\ndtype bf16\nhead_dim 128\nhead_dim_v 128\n"
            "block_m 64\nblock_n 128\nthreads 256\ndynamic_smem 1\ncausal 0\nwindow_left -1\n"
            f"window_right -1\nsoftcap 0\nscale 0.1\nparams {F.KERNEL_PARAMS}\ngrid tiles\n")
    kf = F.parse_facts(text + "split_kv 1\npack_gqa 1\n")
    assert cache._matches(kf, dec) and not cache._matches(kf, fwd)
    plain = F.parse_facts(text)
    assert cache._matches(plain, fwd) and not cache._matches(plain, dec)


def test_compiler_version_names_what_compiles():
    v = cache.compiler_version()
    assert v.startswith("fa3 ") and "libFA3CAPI.so sha256 " in v and "ptxas " in v
    assert "libMLIR" in v
    assert cache.compiler_version() is v   # once per process


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FA3_CACHE_DIR", str(tmp_path / "a"))
    assert cache.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("FA3_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "fa3"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "fa3"


def test_compile_once_then_memory_then_disk(cache_dir, count_compiles):
    kf = cache.get_kernel("bf16", 64, causal=True, **PTX)
    assert len(count_compiles) == 1
    entry = cache.entry_dir(kf)
    assert entry.parent == cache_dir and entry.name.startswith("bf16-d64-")  # FA3_CACHE_DIR
    assert (kf.dtype, kf.head_dim, kf.causal) == ("bf16", 64, True)
    # the variant's kernel, and beside it the table's for long sequences
    # (compile_kernel, min_seqlen_q); get_kernel returns the one for any length
    assert sorted(p.name for p in entry.iterdir()) == [
        "entry.json", "fa3_fwd_d64_bf16_causal_winf_0_kernel.facts",
        "fa3_fwd_d64_bf16_causal_winf_0_kernel.ptx",
        "fa3_fwd_d64_bf16_causal_winf_0_long_kernel.facts",
        "fa3_fwd_d64_bf16_causal_winf_0_long_kernel.ptx"]
    assert kf.kernel == "fa3_fwd_d64_bf16_causal_winf_0_kernel" and kf.min_seqlen_q == 0
    assert cache.get_kernel("bf16", 64, causal=True, **PTX) is kf   # memory
    cache.clear_memory()
    again = cache.get_kernel("bf16", 64, window=(-1, 0), **PTX)      # disk, same key
    assert again == kf and len(count_compiles) == 1
    # no temporary directories left behind
    assert [p.name for p in cache_dir.iterdir() if p.name.startswith(".")] == []


def _worker(cache_root, marker, start, results):
    """One process of test_concurrent_processes: counts its compiles in
    `marker` and reports what it got."""
    real = cache._compile

    def counting(out_dir, variant):
        with open(marker, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.5)    # widen the window in which the others miss too
        return real(out_dir, variant)
    cache._compile = counting
    os.environ["FA3_CACHE_DIR"] = cache_root
    cache.compiler_version()   # load the compiler before the race
    start.wait(timeout=300)    # all at once
    try:
        kf = cache.get_kernel("f16", 128, window=(128, 0), softcap=12.5, **PTX)
        d = cache.entry_dir(kf)
        results.put((str(d), {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                              for p in sorted(d.iterdir())}))
    except BaseException as e:   # reported, not a hang of the test
        results.put(("error", repr(e)))


def test_concurrent_processes(cache_dir, tmp_path):
    """Processes that miss the same key together compile it once and all get
    the same files."""
    ctx = multiprocessing.get_context("spawn")   # no fork of a process holding MLIR
    n = 4
    start, results = ctx.Barrier(n), ctx.Queue()
    marker = tmp_path / "compiles"
    procs = [ctx.Process(target=_worker, args=(str(cache_dir), str(marker), start, results))
             for _ in range(n)]
    for p in procs:
        p.start()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(marker.read_text().split()) == 1, marker.read_text()
    assert all(g == got[0] for g in got), got
    assert [p for p in cache_dir.iterdir() if p.is_dir()] == [Path(got[0][0])]


def _entry(cache_dir):
    [d] = [p for p in cache_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return d


@pytest.mark.parametrize("damage", ["truncated ptx", "no entry.json", "garbage facts",
                                    "facts of another variant", "wrong key",
                                    "file instead of entry", "empty entry dir"])
def test_corrupt_entries_are_rebuilt(cache_dir, count_compiles, damage):
    kf = cache.get_kernel("bf16", 128, **PTX)
    d = cache.entry_dir(kf)
    facts = Path(kf.facts_path)
    if damage == "truncated ptx":
        p = next(d.glob("*.ptx"))
        p.write_bytes(p.read_bytes()[:100])
    elif damage == "no entry.json":      # as a crashed writer without rename would leave it
        (d / cache.ENTRY_FILE).unlink()
    elif damage == "garbage facts":
        facts.write_bytes(b"\x00garbage")
    elif damage == "facts of another variant":
        facts.write_text(facts.read_text().replace("causal 0", "causal 1")
                         .replace("window_right -1", "window_right 0"))
    elif damage == "wrong key":
        e = d / cache.ENTRY_FILE
        e.write_text(e.read_text().replace(d.name.rsplit("-", 1)[1], "0" * 32))
    elif damage == "file instead of entry":
        shutil.rmtree(d)
        d.write_text("not a directory")
    elif damage == "empty entry dir":
        shutil.rmtree(d)
        d.mkdir()
    cache.clear_memory()
    again = cache.get_kernel("bf16", 128, **PTX)
    assert len(count_compiles) == 2, damage
    assert cache.entry_dir(again) == d and d.is_dir()
    assert F.load_facts(again.facts_path) == again
    assert [p.name for p in cache_dir.iterdir() if p.name.startswith(".")] == []
    cache.clear_memory()
    cache.get_kernel("bf16", 128, **PTX)    # and now it is good
    assert len(count_compiles) == 2


def test_stale_temporaries_are_swept(cache_dir, count_compiles):
    cache_dir.mkdir(parents=True)
    old, fresh = cache_dir / ".tmp-x-dead", cache_dir / ".tmp-y-alive"
    for p in (old, fresh):
        p.mkdir()
        (p / "k.ptx").write_text("partial")
    t = time.time() - 2 * cache.STALE_SECONDS
    os.utime(old, (t, t))
    cache.get_kernel("bf16", 64, **PTX)
    assert not old.exists() and fresh.exists()   # another process may be compiling there


def test_failed_compile_is_remembered(cache_dir, count_compiles):
    with pytest.raises(Fa3Error, match="head dim 80"):
        cache.get_kernel("bf16", 80, **PTX)
    with pytest.raises(Fa3Error, match="head dim 80"):
        cache.get_kernel("bf16", 80, **PTX)
    assert len(count_compiles) == 1
    assert [p for p in cache_dir.iterdir() if p.is_dir()] == []   # nothing half-made
    with pytest.raises(Fa3Error, match="value head dim 72"):
        cache.get_kernel("bf16", 128, 72, **PTX)
    assert len(count_compiles) == 2


def test_value_head_dim_is_its_own_entry(cache_dir, count_compiles):
    """D = 192 with Dv = 128 (DeepSeek's) is compiled as such, into an entry
    of its own beside D = Dv = 192."""
    kf = cache.get_kernel("bf16", 192, 128, **PTX)
    assert (kf.head_dim, kf.head_dim_v) == (192, 128)
    same = cache.get_kernel("bf16", 192, **PTX)
    assert (same.head_dim, same.head_dim_v) == (192, 192)
    assert cache.entry_dir(kf) != cache.entry_dir(same)
    assert len(count_compiles) == 2


def test_varlen_is_its_own_entry(cache_dir, count_compiles):
    """The packed variable-length kernel of a variant is cached beside the
    fixed-length one, each found again by its own request."""
    kf = cache.get_kernel("bf16", 64, causal=True, varlen=True, **PTX)
    same = cache.get_kernel("bf16", 64, causal=True, **PTX)
    assert kf.varlen and not same.varlen
    assert cache.entry_dir(kf) != cache.entry_dir(same)
    assert cache.get_kernel("bf16", 64, causal=True, varlen=True, **PTX) == kf
    assert len(count_compiles) == 2


def _write_kernel(d: Path, name: str, **kw):
    """A precompiled kernel (facts + placeholder cubin) as test_runtime writes."""
    v = dict(dtype="bf16", head_dim=128, head_dim_v=128, causal=1, window_left=-1,
             window_right=0, softcap=0)
    v.update(kw)
    lines = ["fa3-kernel-facts 1", f"kernel {name}", "block_m 128", "block_n 128",
             "threads 384", "dynamic_smem 1000", "scale 0.088", f"params {F.KERNEL_PARAMS}",
             "grid tiles"] + [f"{k} {val}" for k, val in v.items()]
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.facts").write_text("\n".join(lines) + "\n")
    (d / f"{name}.cubin").write_bytes(b"cubin")


@needs_ptxas
def test_select_kernel_falls_back_to_the_jit(cache_dir, tmp_path, count_compiles, monkeypatch):
    kdir = tmp_path / "kernels"
    _write_kernel(kdir, "pre_causal")
    # precompiled first
    assert torch_api.select_kernel("bf16", 128, 128, causal=True, kernel_dir=kdir).kernel == \
        "pre_causal"
    assert count_compiles == []
    # not there: compiled into the cache (with its cubin), not into kernel_dir
    kf = torch_api.select_kernel("bf16", 128, 128, softcap=7.0, kernel_dir=kdir)
    assert len(count_compiles) == 1 and cache.entry_dir(kf).parent == cache_dir
    assert kf.softcap == 7.0 and Path(kf.cubin_path).read_bytes()[:4] == b"\x7fELF"
    assert sorted(p.name for p in kdir.iterdir()) == ["pre_causal.cubin", "pre_causal.facts"]
    # no directory at all: the JIT too; the same variant is found, not compiled
    assert torch_api.select_kernel("bf16", 128, 128, softcap=7.0) == kf
    assert len(count_compiles) == 1
    # jit=False / FA3_JIT=0: the directory's answer
    with pytest.raises(LookupError, match="Available:"):
        torch_api.select_kernel("bf16", 128, 128, softcap=7.0, kernel_dir=kdir, jit=False)
    monkeypatch.setenv("FA3_JIT", "0")   # the environment is read on a miss only:
    assert torch_api.select_kernel("bf16", 128, 128, softcap=7.0) == kf
    torch_api.clear_caches()
    with pytest.raises(ValueError, match="FA3_KERNEL_DIR"):
        torch_api.select_kernel("bf16", 128, 128, softcap=7.0)
    monkeypatch.delenv("FA3_JIT")
    # a variant the compiler refuses: a LookupError that says why
    with pytest.raises(LookupError, match="JIT compile failed.*head dim 80"):
        torch_api.select_kernel("bf16", 80, 80, kernel_dir=kdir)


@needs_ptxas
def test_jit_selects_by_length(cache_dir, count_compiles):
    """The JIT's entry holds the variant's kernels for every length the
    compiler configured it for (head dim 64 causal: 192 rows from 6144),
    compiled once; select_kernel picks by the call's Sq."""
    short = torch_api.select_kernel("bf16", 64, 64, causal=True, seqlen_q=6143)
    long = torch_api.select_kernel("bf16", 64, 64, causal=True, seqlen_q=6144)
    assert len(count_compiles) == 1 and cache.entry_dir(short) == cache.entry_dir(long)
    assert (short.block_m, short.min_seqlen_q) == (128, 0)
    assert (long.block_m, long.min_seqlen_q, long.threads) == (192, 6144, 512)
    # one configuration for every length elsewhere
    full = torch_api.select_kernel("bf16", 64, 64, seqlen_q=1 << 20)
    assert (full.block_m, full.min_seqlen_q) == (192, 0) and len(count_compiles) == 2


@needs_ptxas
def test_deterministic_backward_through_the_jit(cache_dir, count_compiles):
    """select_kernel(backward=True, deterministic=True) without a directory
    compiles the deterministic backward kernel into its own cache entry; the
    plain request compiles the plain one apart."""
    det = torch_api.select_kernel("bf16", 64, 64, causal=True, backward=True,
                                  deterministic=True)
    assert det.deterministic and det.backward and det.kernel.endswith("_det_kernel")
    assert cache.entry_dir(det).name.startswith("bf16-d64-bwd-det-")
    plain = torch_api.select_kernel("bf16", 64, 64, causal=True, backward=True)
    assert not plain.deterministic and cache.entry_dir(plain).name.startswith("bf16-d64-bwd-")
    assert len(count_compiles) == 2 and cache.entry_dir(plain) != cache.entry_dir(det)


def test_without_the_compiler(tmp_path):
    """The package without libFA3CAPI.so (as a runtime-only install): it
    imports, precompiled kernels are found, compiling names the missing
    library."""
    pkg = tmp_path / "site"
    shutil.copytree(ROOT / "python" / "fa3", pkg / "fa3",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # every install carries the kernel ABI beside the package (the wheel's
    # cmake/PythonPackage.cmake puts it there)
    shutil.copy(ROOT / "runtime" / "include" / "fa3rt_abi.def", pkg / "fa3")
    _write_kernel(tmp_path / "kernels", "pre_causal")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pkg)!r})
        import fa3, fa3.torch_api as T, fa3.cache, fa3.compile
        from fa3._capi import LibraryNotFoundError
        assert fa3.__file__.startswith({str(pkg)!r})
        kd = {str(tmp_path / 'kernels')!r}
        assert T.select_kernel('bf16', 128, 128, causal=True, kernel_dir=kd).kernel == 'pre_causal'
        for f in (lambda: fa3.compile.compile_kernel({str(tmp_path / 'out')!r}),
                  lambda: fa3.cache.get_kernel('bf16', 128)):
            try:
                f()
                raise SystemExit('no error')
            except LibraryNotFoundError as e:
                assert 'libFA3CAPI.so' in str(e) and 'runtime-only' in str(e), e
        try:
            T.select_kernel('bf16', 128, 128, kernel_dir=kd)
            raise SystemExit('no error')
        except LookupError as e:
            assert 'Available:' in str(e) and 'No JIT compile either' in str(e), e
            assert 'libFA3CAPI.so' in str(e), e
        print('ok')
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("FA3_BUILD_DIR", "FA3_LIBRARY", "FA3_KERNEL_DIR", "FA3_JIT")}
    env["FA3_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    assert not (tmp_path / "cache").exists()


def test_lookup_overhead(cache_dir, tmp_path, monkeypatch):
    """The per-call cost of finding the kernel, warm (printed, not asserted:
    run with -s). flash_attn_func's own lookup is _launchable_kernel."""
    kdir = tmp_path / "kernels"
    _write_kernel(kdir, "pre_causal")
    for i in range(8):   # a directory with some kernels in it
        _write_kernel(kdir, f"other{i}", head_dim=64, head_dim_v=64)
    monkeypatch.setattr(torch_api, "_load", lambda kf, dev, device=None: ("kernel", kf))
    args = (None, "bf16", 128, 128, True, (-1, -1), 0.0, kdir, None, 0, None)
    assert torch_api._launchable_kernel(*args)[1].kernel == "pre_causal"

    def per_call(stmt):
        t = timeit.Timer(stmt)
        number, _ = t.autorange()
        return min(t.repeat(3, number)) / number * 1e6

    launch = per_call(lambda: torch_api._launchable_kernel(*args))
    select = per_call(lambda: torch_api.select_kernel("bf16", 128, 128, True, (-1, -1), 0.0,
                                                      kdir))
    # what each call did before the memo: resolve the directory, stat it,
    # match the kernels, stat the cubin
    d = torch_api._resolve_dir(kdir)

    def before():
        ks, sk = torch_api.available_kernels(torch_api._resolve_dir(kdir))
        kf = F.select_kernel(ks, "bf16", 128, 128, True, (-1, -1), 0.0, kernel_dir=d, skipped=sk)
        os.stat(kf.cubin_path)
    old = per_call(before)
    kf = cache.get_kernel("bf16", 128, causal=True, **PTX)
    mem = per_call(lambda: cache.get_kernel("bf16", 128, causal=True, **PTX))
    # a new process: load the compiler, hash it, validate the entry
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); t = time.perf_counter(); "
            "from fa3 import cache; kf = cache.get_kernel('bf16', 128, causal=True, "
            "emit_cubin=False); print((time.perf_counter() - t) * 1e3)")
    cold = float(subprocess.run([sys.executable, "-c", code, str(ROOT / "python")],
                                capture_output=True, text=True, check=True).stdout)
    print(f"\nlookup per call, warm: flash_attn_func's {launch:.2f} us, "
          f"select_kernel {select:.2f} us, cache.get_kernel {mem:.2f} us; "
          f"before the memo (scan cache, stats) {old:.2f} us; "
          f"first lookup in a new process from the disk cache {cold:.0f} ms")
    assert kf.head_dim == 128
