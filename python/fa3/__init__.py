"""FA3-MLIR from Python: ctypes over libFA3CAPI.so (the compiler) and
libfa3rt.so (the runtime), inside the installed package (fa3/_lib, from
`pip install .`) or a build tree (README: "Installing the Python package").
fa3.torch_api.flash_attn_func runs attention on PyTorch tensors, compiling a
missing variant on first use into the JIT cache (fa3.cache).

    from fa3.ir import Context
    with Context() as ctx:
        mod = ctx.parse(open("examples/attention.mlir").read())
        mod.run_pipeline("attn-tile")
        print(mod)
"""
__version__ = "0.1.0"

from .ir import Context, Fa3Error, Module  # noqa: E402,F401
