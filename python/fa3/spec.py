"""Textual IR for one attention problem: a func wrapping attn.flash_attention
(or its backward, attn.flash_attention_grad).

Everything pasted into the text is checked first (a name or a "number" must
not be able to add IR of its own)."""
import math
import operator
import re

_MLIR_TYPES = {"f32": "f32", "f16": "f16", "bf16": "bf16", "e4m3": "f8E4M3FN"}
# the output's element type where out_dtype is not given: the FP8 kernels'
# o is bf16 (facts dtype e4m3)
_DEFAULT_OUT = {"e4m3": "bf16"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*", re.ASCII)  # MLIR's bare-id


def _int(name, v, lo=0):
    v = operator.index(v)  # TypeError for anything but an integer
    if v < lo:
        raise ValueError("flash_attention_func: %s = %d is out of range (%d or more)"
                         % (name, v, lo))
    return v


def memref_type(shape, dtype):
    if dtype not in _MLIR_TYPES:
        raise ValueError("memref_type: dtype %r is not one of %s" % (dtype, sorted(_MLIR_TYPES)))
    return "memref<%s>" % "x".join([str(_int("shape", s)) for s in shape] + [_MLIR_TYPES[dtype]])


def _check_name(fn, name):
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise ValueError("%s: name %r is not an MLIR identifier "
                         "([A-Za-z_][A-Za-z0-9_$.]*)" % (fn, name))


def _attributes(fn, scale, causal, window, softcap):
    """The attention ops' attribute text, each value checked first."""
    window = tuple(_int("window", w, lo=-2**63) for w in window)
    if len(window) != 2:
        raise ValueError("%s: window must be (left, right), got %r" % (fn, window))
    for what, x in (("scale", scale), ("softcap", softcap)):
        if x is not None and not math.isfinite(float(x)):
            raise ValueError("%s: %s = %r is out of range (finite)" % (fn, what, x))
    attrs = []
    if scale is not None:
        attrs.append("scale(%r)" % float(scale))
    if causal:
        attrs.append("causal")
    if tuple(window) != (-1, -1):
        attrs.append("window(%d, %d)" % tuple(window))
    if softcap:
        attrs.append("softcap(%r)" % float(softcap))
    return " ".join(attrs)


def flash_attention_func(name, b, hq, hkv, sq, skv, d, dv=None, dtype="f32",
                         out_dtype=None, lse=False, scale=None, causal=False,
                         window=(-1, -1), softcap=0.0, descales=None):
    """A func.func @name(q, k, v, [qd, kd, vd,] o[, lse]) in memref form,
    callable from the CPU runner (llvm.emit_c_interface). dtype "e4m3" is
    f8E4M3FN q, k, v with a bf16 o unless out_dtype says otherwise;
    `descales` the shapes of its f32 q, k and v descale operands (() for
    one factor)."""
    _check_name("flash_attention_func", name)
    dv = d if dv is None else dv
    out_dtype = out_dtype or _DEFAULT_OUT.get(dtype, dtype)
    attrs = _attributes("flash_attention_func", scale, causal, window, softcap)
    tq = memref_type((b, hq, sq, d), dtype)
    tk = memref_type((b, hkv, skv, d), dtype)
    tv = memref_type((b, hkv, skv, dv), dtype)
    to = memref_type((b, hq, sq, dv), out_dtype)
    tl = memref_type((b, hq, sq), "f32")
    args = ["%%q: %s" % tq, "%%k: %s" % tk, "%%v: %s" % tv]
    descale = ""
    if descales is not None:
        td = [memref_type(tuple(shape), "f32") for shape in descales]
        args += ["%%%s: %s" % (n, t) for n, t in zip(("qd", "kd", "vd"), td)]
        descale = " descale(%%qd, %%kd, %%vd : %s, %s, %s)" % tuple(td)
    args.append("%%o: %s" % to)
    outs, out_types = "%o", to
    if lse:
        args.append("%%lse: %s" % tl)
        outs, out_types = "%o, %lse", "%s, %s" % (to, tl)
    return (
        "func.func @%s(%s) attributes {llvm.emit_c_interface} {\n"
        "  attn.flash_attention ins(%%q, %%k, %%v : %s, %s, %s)%s outs(%s : %s) %s\n"
        "  return\n}\n" % (name, ", ".join(args), tq, tk, tv, descale, outs,
                          out_types, attrs))


def flash_attention_grad_func(name, b, hq, hkv, sq, skv, d, dv=None, dtype="f32",
                              grad_dtype=None, scale=None, causal=False,
                              window=(-1, -1), softcap=0.0):
    """A func.func @name(q, k, v, o, do, lse, dq, dk, dv) in memref form around
    attn.flash_attention_grad, callable from the CPU runner. q, k, v, o and
    do are `dtype`, lse f32, the gradients `grad_dtype` (default: dtype)."""
    _check_name("flash_attention_grad_func", name)
    dv = d if dv is None else dv
    grad_dtype = grad_dtype or dtype
    attrs = _attributes("flash_attention_grad_func", scale, causal, window, softcap)
    ins = [("q", memref_type((b, hq, sq, d), dtype)),
           ("k", memref_type((b, hkv, skv, d), dtype)),
           ("v", memref_type((b, hkv, skv, dv), dtype)),
           ("o", memref_type((b, hq, sq, dv), dtype)),
           ("do", memref_type((b, hq, sq, dv), dtype)),
           ("lse", memref_type((b, hq, sq), "f32"))]
    outs = [("dq", memref_type((b, hq, sq, d), grad_dtype)),
            ("dk", memref_type((b, hkv, skv, d), grad_dtype)),
            ("dv", memref_type((b, hkv, skv, dv), grad_dtype))]
    args = ", ".join("%%%s: %s" % a for a in ins + outs)
    return (
        "func.func @%s(%s) attributes {llvm.emit_c_interface} {\n"
        "  attn.flash_attention_grad ins(%s : %s) outs(%s : %s) %s\n"
        "  return\n}\n" % (name, args, ", ".join("%" + n for n, _ in ins),
                            ", ".join(t for _, t in ins),
                            ", ".join("%" + n for n, _ in outs),
                            ", ".join(t for _, t in outs), attrs))


def flash_attention_varlen_func(name, nseq, tq, tk, hq, hkv, d, dv=None, dtype="f32",
                                out_dtype=None, lse=False, seqused=False, scale=None,
                                causal=False, window=(-1, -1), softcap=0.0):
    """A func.func @name(q, k, v, cu_q, cu_k[, seqused_k], o[, lse]) in memref
    form around attn.flash_attention_varlen (packed [T, H, D] tensors, i32
    sequence offsets), callable from the CPU runner."""
    _check_name("flash_attention_varlen_func", name)
    dv = d if dv is None else dv
    out_dtype = out_dtype or _DEFAULT_OUT.get(dtype, dtype)
    attrs = _attributes("flash_attention_varlen_func", scale, causal, window, softcap)
    ins = [("q", memref_type((tq, hq, d), dtype)), ("k", memref_type((tk, hkv, d), dtype)),
           ("v", memref_type((tk, hkv, dv), dtype))]
    cu = "memref<%dxi32>" % (_int("nseq", nseq) + 1)
    lens = [("cu_q", cu), ("cu_k", cu)]
    if seqused:
        lens.append(("seqused_k", "memref<%dxi32>" % nseq))
    outs = [("o", memref_type((tq, hq, dv), out_dtype))]
    if lse:
        outs.append(("lse", memref_type((hq, tq), "f32")))

    def group(xs):
        return ", ".join("%" + n for n, _ in xs), ", ".join(t for _, t in xs)
    args = ", ".join("%%%s: %s" % a for a in ins + lens + outs)
    return (
        "func.func @%s(%s) attributes {llvm.emit_c_interface} {\n"
        "  attn.flash_attention_varlen ins(%s : %s) seqlens(%s : %s) outs(%s : %s) %s\n"
        "  return\n}\n" % ((name, args) + group(ins) + group(lens) + group(outs)
                          + (attrs,)))
