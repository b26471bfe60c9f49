"""Textual IR for one attention problem: a func wrapping attn.flash_attention."""

_MLIR_TYPES = {"f32": "f32", "f16": "f16", "bf16": "bf16"}


def memref_type(shape, dtype):
    return "memref<%s>" % "x".join([str(s) for s in shape] + [_MLIR_TYPES[dtype]])


def flash_attention_func(name, b, hq, hkv, sq, skv, d, dv=None, dtype="f32",
                         out_dtype=None, lse=False, scale=None, causal=False,
                         window=(-1, -1), softcap=0.0):
    """A func.func @name(q, k, v, o[, lse]) in memref form, callable from the
    CPU runner (llvm.emit_c_interface)."""
    dv = d if dv is None else dv
    out_dtype = out_dtype or dtype
    tq = memref_type((b, hq, sq, d), dtype)
    tk = memref_type((b, hkv, skv, d), dtype)
    tv = memref_type((b, hkv, skv, dv), dtype)
    to = memref_type((b, hq, sq, dv), out_dtype)
    tl = memref_type((b, hq, sq), "f32")
    args = ["%%q: %s" % tq, "%%k: %s" % tk, "%%v: %s" % tv, "%%o: %s" % to]
    outs, out_types = "%o", to
    if lse:
        args.append("%%lse: %s" % tl)
        outs, out_types = "%o, %lse", "%s, %s" % (to, tl)
    attrs = []
    if scale is not None:
        attrs.append("scale(%r)" % float(scale))
    if causal:
        attrs.append("causal")
    if tuple(window) != (-1, -1):
        attrs.append("window(%d, %d)" % tuple(window))
    if softcap:
        attrs.append("softcap(%r)" % float(softcap))
    return (
        "func.func @%s(%s) attributes {llvm.emit_c_interface} {\n"
        "  attn.flash_attention ins(%%q, %%k, %%v : %s, %s, %s) outs(%s : %s) %s\n"
        "  return\n}\n" % (name, ", ".join(args), tq, tk, tv, outs, out_types,
                          " ".join(attrs)))
