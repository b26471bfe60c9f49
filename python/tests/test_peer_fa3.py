"""bench/peer_fa3.py's pieces that need no GPU: FlashAttention-3's
backward kernels told apart by name (bench/breakdown_bwd.py), and the
benchmarks' --no-fa3."""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import peer_fa3  # noqa: E402

# as ncu and torch.profiler print them (FA3 0251105a, hopper/)
_MAIN = ("void cutlass::device_kernel<flash::enable_sm90<flash::FlashAttnBwdSm90<"
         "flash::CollectiveMainloopBwdSm90<2, 2, 2, cute::tuple<cute::C<1>, cute::C<1>, "
         "cute::C<1>>, cute::tuple<cute::C<128>, cute::C<128>, cute::C<64>>, "
         "cutlass::bfloat16_t, float, cutlass::arch::Sm90, false>>>>(T1::Params)")
_PRE = ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<"
        "cute::C<64>, cute::C<64>>, cutlass::bfloat16_t, float, cutlass::arch::Sm90, "
        "true, false>>(T1::Params)")
_POST = ("void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<"
         "cute::tuple<cute::C<64>, cute::C<64>>, cutlass::bfloat16_t, float, "
         "cutlass::arch::Sm90, 256, false, false, 1>>(T1::Params)")


def test_backward_roles():
    assert peer_fa3.backward_role(_PRE) == "pre"
    assert peer_fa3.backward_role(_MAIN) == "main"
    assert peer_fa3.backward_role(_POST) == "post"


def test_other_kernels_have_no_role():
    # ours, cuDNN's, torch's fills
    for name in ("fa3_bwd_d128_bf16_kernel", "cudnn_generated_fort_native_sdpa_sm90",
                 "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>",
                 "void cutlass::device_kernel<flash::FlashAttnFwdSm90<...>>(T1::Params)"):
        assert peer_fa3.backward_role(name) is None


def test_left_out_without_cuda():
    ap = argparse.ArgumentParser()
    peer_fa3.add_option(ap)
    assert ap.parse_args(["--no-fa3"]).no_fa3
    fai, why = peer_fa3.load(leave_out="--no-fa3", dtype=object())
    assert fai is None and why == "left out (--no-fa3)"
