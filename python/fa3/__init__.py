"""FA3-MLIR from Python: ctypes over libFA3CAPI.so.

    from fa3.ir import Context
    with Context() as ctx:
        mod = ctx.parse(open("examples/attention.mlir").read())
        mod.run_pipeline("attn-tile")
        print(mod)
"""
__version__ = "0.1.0"

from .ir import Context, Fa3Error, Module  # noqa: E402,F401
