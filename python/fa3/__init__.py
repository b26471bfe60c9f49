"""FA3-MLIR from Python: ctypes over libFA3CAPI.so (the compiler) and
libfa3rt.so (the runtime), inside the installed package (fa3/_lib, from
`pip install .`) or a build tree (README: "Installing the Python package").
fa3.torch_api.flash_attn_func runs attention on PyTorch tensors, compiling a
missing variant on first use into the JIT cache (fa3.cache);
flash_attn_varlen_func takes packed variable-length batches and
flash_attn_with_kvcache decodes over a KV cache (split-KV; FA3's
get_scheduler_metadata beside it returns None, which it takes);
flash_attn_qkvpacked_func takes q, k, v stacked in one tensor. These are
also fa3.flash_attn_func etc., imported on first use (torch only when
called). flash_attn_func also takes FP8 (torch.float8_e4m3fn) q, k, v with
their descales; fa3.quantize makes them (quantize_fp8, quantize_qkv_fp8:
block scales and the Hadamard rotation of FlashAttention-3), also exported
here.

    from fa3.ir import Context
    with Context() as ctx:
        mod = ctx.parse(open("examples/attention.mlir").read())
        mod.run_pipeline("attn-tile")
        print(mod)
"""
__version__ = "0.1.0"

from .ir import Context, Fa3Error, Module  # noqa: E402,F401
# FP8 quantization (torch imported when called)
from .quantize import (dequantize_fp8, hadamard_matrix, quantize_fp8,  # noqa: E402,F401
                       quantize_qkv_fp8)

# the PyTorch entry points, imported on first use: `import fa3` stays as
# light as it was (fa3.torch_api reads the kernel ABI's definition)
_TORCH_API = ("flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
              "flash_attn_with_kvcache", "get_scheduler_metadata")


def __getattr__(name):
    if name in _TORCH_API:
        from . import torch_api
        return getattr(torch_api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
