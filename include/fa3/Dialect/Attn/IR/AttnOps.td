//===- AttnOps.td - the attn dialect and its ops -------------*- tablegen -*-===//
//
// Two levels live here:
//  * the user level, `attn.flash_attention`, its packed variable-length
//    form `attn.flash_attention_varlen` and its backward
//    `attn.flash_attention_grad`, in tensor or memref form;
//  * the tile level that `attn-tile` produces: `attn.tile_update` and
//    `attn.tile_finalize`, one FlashAttention step on a (block_m x block_n)
//    tile and the epilogue of an m-block. The schedule around them (grid,
//    kv-block range, which blocks need the mask) is plain scf/arith IR, so it
//    is the single truth both the CPU and the Hopper lowerings consume;
//  * `#attn.hopper_config`, the Hopper kernel's configuration, which
//    `attn-hopper-config` records on the op and `attn-tile` carries to the
//    tile level.
//
//===----------------------------------------------------------------------===//

#ifndef FA3_ATTN_OPS
#define FA3_ATTN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::fa3::attn";
  let summary = "Fused attention for FlashAttention-3-class kernel generation";
  let description = [{
    The `attn` dialect models fused scaled-dot-product attention as one op,
    `attn.flash_attention`, and the tile-level steps of the FlashAttention
    algorithm that the compiler lowers it through.
  }];
  let useDefaultAttributePrinterParser = 1;
  // Checks `attn.hopper_config` wherever it is attached.
  let hasOperationAttrVerify = 1;
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Attn_BoolParameter : AttrParameter<"bool", "true or false"> {
  let parser = [{ ::fa3::attn::parseBoolKeyword($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

// A bool that is false unless written (and then not printed).
def Attn_FlagParameter : AttrParameter<"bool", "true or false (default)"> {
  let parser = [{ ::fa3::attn::parseBoolKeyword($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
  let defaultValue = "false";
}

def Attn_F64Parameter : APFloatParameter<"an f64 value"> {
  let parser = [{ ::fa3::attn::parseF64($_parser) }];
  let printer = [{ $_printer.printFloat($_self) }];
}

def Attn_HopperConfigAttr : AttrDef<Attn_Dialect, "HopperConfig"> {
  let mnemonic = "hopper_config";
  let summary = "the configuration of an attention's Hopper kernel";
  let description = [{
    What `attn-hopper-config` chose for one attention (its table of measured
    defaults and the user's overrides), recorded under the name
    `attn.hopper_config` on the `attn.flash_attention` op. `attn-tile` tiles
    by its block sizes and carries it to the `attn.kv_range` of the tiled
    grid, where `convert-attn-to-hopper` reads it; the launch facts come
    from it.

    ```mlir
    attn.flash_attention ... {attn.hopper_config = #attn.hopper_config<
        block_m = 128, block_n = 128, stages = 2, persistent = true,
        q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0,
        cluster_m = 1, pingpong = true, tma_store = true>}
    ```

    * `block_m`, `block_n`: query rows and kv rows per tile;
    * `stages`: depth of the K/V shared-memory ring;
    * `persistent`: CTAs loop over tiles (else one CTA per tile);
    * `q_buffers`: Q tiles in shared memory (2: the next tile's Q loads
      during this one);
    * `lazy_rescale`, `rescale_threshold`: O *= alpha only where a row's
      running max rose by more than the threshold (log2 units);
    * `cluster_m`: CTAs per cluster (2: K/V shared by TMA multicast);
    * `pingpong`: the two consumer warpgroups take turns issuing GEMMs;
    * `tma_store`: O is staged in shared memory and stored by TMA (a
      persistent packed batch's kernel: copied out by its threads);
    * `split_kv` (optional, false): the decoding kernel's split of each
      tile's kv blocks over a launch-time number of CTAs, whose partial O
      and LSE a generated `<kernel>_combine` merges;
    * `pack_gqa` (optional, false): a tile's rows are (query, q head) pairs
      of one kv head;
    * `ctas_per_sm` (optional, 1): CTAs resident on an SM together, which
      the kernel is built for (nvvm.minctasm): 2 halves each CTA's
      registers at launch and its shared memory;
    * `min_seqlen_q` (optional, 0): the table chose this configuration for
      calls with at least this many query rows (`attn-hopper-config
      min-seqlen-q`); the launch facts carry it, so that a launcher holding
      kernels of one attention for different lengths picks by Sq. 0: any;
    * `transpose_warps` (optional, 3): FP8's V transposer, warps 1 .. 3 of
      the producer warpgroup, or 4: warp 0 too, its transpose of each slot
      one fill behind its loads (FlashAttention-3's; a persistent kernel's,
      and a decoding kernel's, whose four warps also copy small pages:
      `hopper-producer-warp-transpose`);
    * `paged_kv` (optional, false): a packed variable-length batch's kernel
      that also reads k and v through a launch-time page table (a paged KV
      cache), one CTA per tile (its producer thread's 24 registers
      cannot hold the page walk beside a persistent tile loop).

    The verifier checks each value's domain; whether the kernel can take the
    combination for a given attention (head dim, mask, shared memory) is
    checked by the passes that choose and read it.
  }];
  let parameters = (ins
    "int64_t":$block_m,
    "int64_t":$block_n,
    "int64_t":$stages,
    Attn_BoolParameter:$persistent,
    "int64_t":$q_buffers,
    Attn_BoolParameter:$lazy_rescale,
    Attn_F64Parameter:$rescale_threshold,
    "int64_t":$cluster_m,
    Attn_BoolParameter:$pingpong,
    Attn_BoolParameter:$tma_store,
    Attn_FlagParameter:$split_kv,
    Attn_FlagParameter:$pack_gqa,
    DefaultValuedParameter<"int64_t", "1">:$ctas_per_sm,
    DefaultValuedParameter<"int64_t", "0">:$min_seqlen_q,
    DefaultValuedParameter<"int64_t", "3">:$transpose_warps,
    Attn_FlagParameter:$paged_kv
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name under which the configuration is attached to an op.
    static constexpr ::llvm::StringLiteral kAttrName = "attn.hopper_config";
    /// The deepest K/V ring: the kernel is unrolled over the stages.
    static constexpr int64_t kMaxStages = 8;
    /// P = exp2(s - m) <= 2^threshold must fit f16 (max 65504).
    static constexpr double kMaxRescaleThreshold = 15.0;
  }];
}

def Attn_ShapedOperand : AnyTypeOf<[AnyRankedTensor, AnyMemRef]>;

def Attn_FlashAttentionOp : Attn_Op<"flash_attention", [
    DestinationStyleOpInterface, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "fused attention: softmax(scale * Q K^T + mask) V";
  let description = [{
    Computes, for every batch b, query head h, query row i:

      s[j]   = scale * dot(q[b,h,i,:], k[b,h/g,j,:])          g = Hq / Hkv
      s[j]   = softcap * tanh(s[j] / softcap)                 if softcap > 0
      s[j]   = -inf where key j is not visible to query i
      o[b,h,i,:] = sum_j softmax(s)[j] * v[b,h/g,j,:]
      lse[b,h,i] = log(sum_j exp(s[j]))                       (natural log)

    Visibility (as FlashAttention-2/3 define it, aligned to the bottom right
    when Sq != Skv): with off = Skv - Sq, key j is visible to query i iff
    `j >= i + off - left` (when left >= 0) and `j <= i + off + right` (when
    right >= 0), where `window = [left, right]` and -1 means unbounded.
    `causal` is the window [left, 0]. A row that sees no key gives o = 0 and
    lse = -inf.

    Logical shapes: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv],
    o [B, Hq, Sq, Dv], lse [B, Hq, Sq] (f32). The memref form's strides carry
    the physical layout, so BSHD (FA3, PyTorch varlen) and BHSD (SDPA) tensors
    are both described by a strided memref in this logical order.

    Tensor form (value semantics, destination-passing like linalg):

    ```mlir
    %o = attn.flash_attention ins(%q, %k, %v : tensor<...>, tensor<...>, tensor<...>)
           outs(%o0 : tensor<...>) causal softcap(30.0) -> tensor<...>
    ```

    Memref form (no results; writes `outs`):

    ```mlir
    attn.flash_attention ins(%q, %k, %v : memref<...>, memref<...>, memref<...>)
           outs(%o, %lse : memref<...>, memref<...>) window(128, 0)
    ```

    FP8 (f8E4M3FN q, k, v; FlashAttention-3's q_descale, k_descale,
    v_descale): `descale(%qd, %kd, %vd : ...)`, f32 factors of the
    quantized inputs, with which

      s[j] = scale * qd(b, h, i) * kd(b, h / g, j) * dot(q[b,h,i,:], k[b,h/g,j,:])
      o[b,h,i,:] = vd(b, h / g) * sum_j softmax(s)[j] * v[b,h/g,j,:]

    (without them every factor is 1). Each is rank 0 (one factor) or per
    (batch, head): qd [B, Hq] or [B, Hkv] (FA3's, a kv head's factor for
    its group of q heads), kd and vd [B, Hkv]; qd and kd may also be one
    per block of 128 rows (block quantization, attn.quantize's block(128)):
    qd [B, Hq, ceil(Sq / 128)], kd [B, Hkv, ceil(Skv / 128)]. The Hopper
    kernel reads them at launch (fa3rt_abi.def's qDescale ...), so they do
    not change its code.
  }];

  let arguments = (ins
    Attn_ShapedOperand:$query,
    Attn_ShapedOperand:$key,
    Attn_ShapedOperand:$value,
    Variadic<Attn_ShapedOperand>:$descales,
    Variadic<Attn_ShapedOperand>:$outputs,
    OptionalAttr<F32Attr>:$scale,
    UnitAttr:$causal,
    DefaultValuedOptionalAttr<DenseI64ArrayAttr, "{-1, -1}">:$window,
    DefaultValuedOptionalAttr<F32Attr, "0.0f">:$softcap
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`
    (`descale` `(` $descales^ `:` type($descales) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    oilist(`scale` `(` $scale `)`
         | `causal` $causal
         | `window` `(` custom<Window>($window) `)`
         | `softcap` `(` $softcap `)`)
    attr-dict (`->` type($results)^)?
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    /// The descale operands (FP8), or null where the op has none.
    ::mlir::Value getQueryDescale() {
      return getDescales().empty() ? ::mlir::Value() : getDescales()[0];
    }
    ::mlir::Value getKeyDescale() {
      return getDescales().empty() ? ::mlir::Value() : getDescales()[1];
    }
    ::mlir::Value getValueDescale() {
      return getDescales().empty() ? ::mlir::Value() : getDescales()[2];
    }
    /// Rows of a block descale.
    static constexpr int64_t kDescaleBlock = 128;
    /// The output operand o.
    ::mlir::Value getOut() { return getOutputs()[0]; }
    /// The optional LSE output operand, or null.
    ::mlir::Value getLse() {
      return getOutputs().size() > 1 ? getOutputs()[1] : ::mlir::Value();
    }
    /// The softmax scale in effect: the attribute, or 1/sqrt(D).
    float getEffectiveScale();
    /// Window bounds in effect (causal folded in); -1 means unbounded.
    int64_t getWindowLeft();
    int64_t getWindowRight();
    /// True for the memref (destination-writing) form.
    bool hasBufferSemantics() {
      return ::llvm::isa<::mlir::MemRefType>(getQuery().getType());
    }
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
  }];
}

def Attn_FlashAttentionVarlenOp : Attn_Op<"flash_attention_varlen", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "attention over a packed batch of sequences of different lengths";
  let description = [{
    `attn.flash_attention` for B sequences of their own lengths packed along
    one token axis, as FlashAttention's `flash_attn_varlen_func` takes them:
    q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv], o [Tq, Hq, Dv], optional
    lse [Hq, Tq] (f32, natural log). Sequence b holds the query tokens
    `cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1` and the keys
    `cu_seqlens_k[b] .. cu_seqlens_k[b] + Skv_b - 1`, where Skv_b is
    `seqused_k[b]` when given (a KV cache filled to that length) and
    `cu_seqlens_k[b+1] - cu_seqlens_k[b]` otherwise. Each sequence is an
    attention of its own (scale, causal, window and softcap as the
    forward's, bottom-right aligned per sequence: off = Skv_b - Sq_b);
    lengths 0 and 1 are allowed, a query row that sees no key gives o = 0,
    lse = -inf, and query tokens outside every sequence are not written.
    `cu_seqlens_q`, `cu_seqlens_k` [B + 1] and `seqused_k` [B] are i32, as
    FlashAttention's; they must be non-decreasing, start at 0 and stay
    within Tq and Tk (and seqused_k[b] <= cu_seqlens_k[b+1] -
    cu_seqlens_k[b]): the verifier checks their shapes; values outside
    these bounds are the caller's contract, as in FlashAttention (the
    runtime does not read them on the host). A `seqused_k[b]` outside 0 ..
    the sequence's keys is clamped to it, by the CPU oracle and the Hopper
    kernel alike (`clampUsedKeys`); other violations are undefined.

    ```mlir
    attn.flash_attention_varlen ins(%q, %k, %v : memref<?x8x128xbf16>, memref<?x2x128xbf16>, memref<?x2x128xbf16>)
        seqlens(%cu_q, %cu_k : memref<?xi32>, memref<?xi32>)
        outs(%o, %lse : memref<?x8x128xbf16>, memref<8x?xf32>) causal
    ```
  }];

  let arguments = (ins
    Attn_ShapedOperand:$query,
    Attn_ShapedOperand:$key,
    Attn_ShapedOperand:$value,
    Attn_ShapedOperand:$cu_seqlens_q,
    Attn_ShapedOperand:$cu_seqlens_k,
    Optional<Attn_ShapedOperand>:$seqused_k,
    Variadic<Attn_ShapedOperand>:$outputs,
    OptionalAttr<F32Attr>:$scale,
    UnitAttr:$causal,
    DefaultValuedOptionalAttr<DenseI64ArrayAttr, "{-1, -1}">:$window,
    DefaultValuedOptionalAttr<F32Attr, "0.0f">:$softcap
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `:` type($query) `,` type($key) `,` type($value) `)`
    `seqlens` `(` $cu_seqlens_q `,` $cu_seqlens_k (`,` $seqused_k^)? `:`
      type($cu_seqlens_q) `,` type($cu_seqlens_k) (`,` type($seqused_k)^)? `)`
    `outs` `(` $outputs `:` type($outputs) `)`
    oilist(`scale` `(` $scale `)`
         | `causal` $causal
         | `window` `(` custom<Window>($window) `)`
         | `softcap` `(` $softcap `)`)
    attr-dict (`->` type($results)^)?
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    /// The output operand o.
    ::mlir::Value getOut() { return getOutputs()[0]; }
    /// The optional LSE output operand, or null.
    ::mlir::Value getLse() {
      return getOutputs().size() > 1 ? getOutputs()[1] : ::mlir::Value();
    }
    /// The softmax scale in effect: the attribute, or 1/sqrt(D).
    float getEffectiveScale();
    /// Window bounds in effect (causal folded in); -1 means unbounded.
    int64_t getWindowLeft();
    int64_t getWindowRight();
    /// True for the memref (destination-writing) form.
    bool hasBufferSemantics() {
      return ::llvm::isa<::mlir::MemRefType>(getQuery().getType());
    }
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
  }];
}

def Attn_FlashAttentionGradOp : Attn_Op<"flash_attention_grad", [
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "gradients of attn.flash_attention: dQ, dK, dV from dO";
  let description = [{
    The backward of `attn.flash_attention` with the same attributes (scale,
    causal, window, softcap; GQA by head counts): given the forward's
    inputs q, k, v, its output o, the gradient of the loss with respect to o
    (`grad_out`, dO) and the forward's natural-log `lse`, computes for every
    batch b, query head h (kv head h / g), query row i and key j:

      x[j]  = scale * dot(q_i, k_j)
      s[j]  = softcap * tanh(x[j] / softcap)  if softcap > 0, else x[j]
      p[j]  = exp(s[j] - lse_i) where key j is visible to query i, else 0
      D_i   = dot(dO_i, o_i)
      ds[j] = p[j] * (dot(dO_i, v_j) - D_i)
      dx[j] = ds[j] * (1 - (s[j] / softcap)^2)  if softcap > 0, else ds[j]
      dq_i  = scale * sum_j dx[j] k_j
      dk_j  = scale * sum over (h, i) of the group of dx[j] q_i
      dv_j  = sum over (h, i) of the group of p[j] dO_i

    (FlashAttention-2/3's backward; dK and dV are summed over the query
    heads that share a kv head.) A row whose lse is -inf (it saw no key)
    contributes nothing.

    Logical shapes: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv],
    o and grad_out [B, Hq, Sq, Dv], lse [B, Hq, Sq] (f32); q, k, v, o and
    grad_out of one element type (f16, bf16 or f32); outs dq, dk, dv shaped
    as q, k and v (f16, bf16 or f32: the sums are taken in f32).
    Tensor form (one result per output) or memref form (no results):

    `deterministic` (FlashAttention's deterministic=True) asks that dq be
    bitwise the same from run to run: the Hopper kernel then adds each
    64-query tile's dQ in the order of the kv blocks (dK and dV are summed
    inside one CTA, in a fixed order, either way); the CPU forms always
    are deterministic.

    ```mlir
    attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : ...)
        outs(%dq, %dk, %dv : ...) causal deterministic
    ```
  }];

  let arguments = (ins
    Attn_ShapedOperand:$query,
    Attn_ShapedOperand:$key,
    Attn_ShapedOperand:$value,
    Attn_ShapedOperand:$out,
    Attn_ShapedOperand:$grad_out,
    Attn_ShapedOperand:$lse,
    Variadic<Attn_ShapedOperand>:$outputs,
    OptionalAttr<F32Attr>:$scale,
    UnitAttr:$causal,
    DefaultValuedOptionalAttr<DenseI64ArrayAttr, "{-1, -1}">:$window,
    DefaultValuedOptionalAttr<F32Attr, "0.0f">:$softcap,
    UnitAttr:$deterministic
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $out `,` $grad_out `,` $lse `:`
      type($query) `,` type($key) `,` type($value) `,` type($out) `,`
      type($grad_out) `,` type($lse) `)`
    `outs` `(` $outputs `:` type($outputs) `)`
    oilist(`scale` `(` $scale `)`
         | `causal` $causal
         | `window` `(` custom<Window>($window) `)`
         | `softcap` `(` $softcap `)`
         | `deterministic` $deterministic)
    attr-dict (`->` type($results)^)?
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::Value getGradQuery() { return getOutputs()[0]; }
    ::mlir::Value getGradKey() { return getOutputs()[1]; }
    ::mlir::Value getGradValue() { return getOutputs()[2]; }
    /// The softmax scale in effect: the attribute, or 1/sqrt(D).
    float getEffectiveScale();
    /// Window bounds in effect (causal folded in); -1 means unbounded.
    int64_t getWindowLeft();
    int64_t getWindowRight();
    /// True for the memref (destination-writing) form.
    bool hasBufferSemantics() {
      return ::llvm::isa<::mlir::MemRefType>(getQuery().getType());
    }
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
  }];
}

def Attn_QuantizeOp : Attn_Op<"quantize", [
    DestinationStyleOpInterface, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "FP8 (e4m3) quantization with block scales and an optional Hadamard rotation";
  let description = [{
    What an FP8 attention's q, k and v go through first (FlashAttention-3,
    section 3.3): for every batch b, head h and group of rows that shares
    a scale (`block(N)`: rows N t .. N t + N - 1 of the head, the last
    group shorter; without it, the whole head),

      x'[i, :] = x[b, h, i, :]                                 no `rotate`
      x'[i, :] = x[b, h, i, :] H_D diag(signs) / sqrt(D)       `rotate(%signs)`
      amax     = max |x'| over the group's rows and columns
      descale  = amax / 448, scale = 448 / amax     if amax >= 448 * 2^-126
      descale  = scale = 1                          otherwise (0, tiny, NaN)
      y[b, h, i, :] = e4m3(clamp(x'[i, :] * scale, -448, 448))

    with H_D the Sylvester Hadamard matrix (H_1 = [1], H_2n = [[H, H], [H,
    -H]]; D a power of two), the divisions and products in f32, e4m3
    rounding to nearest even (448 is its largest finite value; NaN stays
    NaN). Rotating q and k by the same signs leaves Q K^T unchanged in exact
    arithmetic while spreading an outlier over the head dim; v is not
    rotated.

    Logical shapes: input [B, H, S, D] (f16, bf16 or f32), signs [D] (f32),
    output [B, H, S, D] (f8E4M3FN), descale [B, H, ceil(S / N)] with
    `block(N)` or [B, H] without (f32), each as in attn.flash_attention
    (a strided memref carries BSHD storage). The attention kernels read q's
    and k's descales per 128 rows and v's per head. Tensor form (one result
    per output) or memref form (no results):

    ```mlir
    attn.quantize ins(%q : memref<2x8x1000x128xbf16>) rotate(%signs : memref<128xf32>)
        outs(%q8, %qd : memref<2x8x1000x128xf8E4M3FN>, memref<2x8x8xf32>) block(128)
    ```

    Its CPU form is `attn-lower-to-loops`; its GPU form the
    `<kernel>_quantize` every FP8 attention kernel carries (fa3rt_quantize).
  }];

  let arguments = (ins
    Attn_ShapedOperand:$input,
    Optional<Attn_ShapedOperand>:$signs,
    Variadic<Attn_ShapedOperand>:$outputs,
    OptionalAttr<I64Attr>:$block
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);

  let assemblyFormat = [{
    `ins` `(` $input `:` type($input) `)`
    (`rotate` `(` $signs^ `:` type($signs) `)`)?
    `outs` `(` $outputs `:` type($outputs) `)`
    (`block` `(` $block^ `)`)?
    attr-dict (`->` type($results)^)?
  }];

  let hasVerifier = 1;

  let extraClassDeclaration = [{
    ::mlir::Value getOutput() { return getOutputs()[0]; }
    ::mlir::Value getDescale() { return getOutputs()[1]; }
    /// True for the memref (destination-writing) form.
    bool hasBufferSemantics() {
      return ::llvm::isa<::mlir::MemRefType>(getInput().getType());
    }
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    /// e4m3's largest finite value, and the smallest amax given a scale of
    /// its own (448 x f32's smallest normal: descale normal, scale finite).
    static constexpr double kE4M3Max = 448.0;
    static constexpr double kAmaxMin = 448.0 * 1.1754943508222875e-38;
  }];
}

def Attn_KvRangeOp : Attn_Op<"kv_range", [Pure]> {
  let summary = "the kv-blocks an m-block visits, and which of them need the mask";
  let description = [{
    For the query rows `row0 .. min(row0 + block_m, Sq) - 1` and the window
    [left, right] (causal folded in; -1 = unbounded), with off = Skv - Sq:

    * `[lo, hi)`: the kv-blocks (of `block_n` keys) that hold at least one
      key visible to some row of the m-block (empty when none is);
    * `[interiorLo, interiorHi)`: the kv-blocks whose every key is visible to
      every row of the m-block and lies below Skv. Blocks of `[lo, hi)`
      outside this range are the boundary blocks that need the mask.

    This op is the one place where the schedule is decided; the CPU and the
    Hopper lowerings both expand it with the same builder. For the Hopper
    lowering it also carries the attention's `attn.hopper_config`, copied
    from the `attn.flash_attention` by `attn-tile`; its tiles must be this
    op's.
  }];
  let arguments = (ins Index:$row0, Index:$seqQ, Index:$seqKv,
                       I64Attr:$block_m, I64Attr:$block_n,
                       DenseI64ArrayAttr:$window);
  let results = (outs Index:$lo, Index:$hi, Index:$interiorLo, Index:$interiorHi);
  let assemblyFormat = [{
    `rows` $row0 `seq` `(` $seqQ `,` $seqKv `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Attn_QRangeOp : Attn_Op<"q_range", [Pure]> {
  let summary = "the m-blocks that see a kv-block, and which of them need the mask";
  let description = [{
    The backward's schedule, the transpose of `attn.kv_range`: for the keys
    `col0 .. min(col0 + block_n, Skv) - 1` and the window [left, right]
    (causal folded in; -1 = unbounded), with off = Skv - Sq:

    * `[lo, hi)`: the m-blocks (of `block_m` query rows) holding a row
      below Sq that sees at least one of these keys (empty when none does);
    * `[interiorLo, interiorHi)`: the m-blocks whose every row lies below Sq
      and sees every key of a kv-block that lies wholly below Skv. Blocks of
      `[lo, hi)` outside this range are the boundary blocks that need the
      mask.

    FlashAttention's backward walks, per kv-block (K and V resident), the
    q-blocks of this range; the CPU expansion and a kernel build it with
    the same builder (`buildQRange`).
  }];
  let arguments = (ins Index:$col0, Index:$seqQ, Index:$seqKv,
                       I64Attr:$block_m, I64Attr:$block_n,
                       DenseI64ArrayAttr:$window);
  let results = (outs Index:$lo, Index:$hi, Index:$interiorLo, Index:$interiorHi);
  let assemblyFormat = [{
    `cols` $col0 `seq` `(` $seqQ `,` $seqKv `)` attr-dict
  }];
  let hasVerifier = 1;
}

def Attn_TileUpdateOp : Attn_Op<"tile_update", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "one FlashAttention step on a (block_m x block_n) tile";
  let description = [{
    For the rows `row0 .. row0 + block_m - 1` (those < Sq) of query head
    `qhead` and the key/value rows `col0 .. col0 + block_n - 1` of kv head
    `kvhead`, in batch `batch`:

      s    = scale_log2 * Q K^T       (scores in the log2 domain; with softcap
                                       s = softcap_log2 * tanh(qk * scale / softcap))
      s    = -inf where masked        (only when `masked`: columns >= Skv and
                                       keys outside the causal/window band)
      m'   = max(m, rowmax(s))        (exact)
      m'   = rowmax(s) > m + tau ? rowmax(s) : m
                                      (lazy: `rescale_threshold` tau > 0)
      mu   = m' == -inf ? 0 : m'      (no NaN from -inf - -inf)
      a    = exp2(m - mu), or 1 where lazy did not raise m
      p    = exp2(s - mu)
      l    = l * a + rowsum(p)
      acc  = acc * a + p V

    The state (m, l, acc) lives in `state` buffers of shape [block_m],
    [block_m], [block_m, Dv] (f32). Without `masked`, the schedule guarantees
    that every key of the tile is visible to every row, so no mask is applied.
    `rescale_threshold` (log2 units, 0 to 15; absent or 0: exact) is the
    Hopper kernel's lazy rescaling: m only rises when a block's max exceeds
    it by more than tau, so acc is rarely rescaled while p <= 2^tau; acc / l
    is unchanged. The kernel then rescales acc only where a row of the
    warpgroup raised m (a branch). attn-tile sets it from the attention's
    attn.hopper_config (where it rescales lazily with tau > 0) or its own
    option, so that the CPU expansion runs the kernel's rule and
    convert-attn-to-hopper lowers it.

    FP8: `descale(%qd, %kd, %vd)`, the attention's descale operands (f32,
    rank 0, [B, H'] or [B, H', blocks of 128 rows]): qk is multiplied by
    the row's q factor and the key's k factor before anything else, and
    each V element by the kv head's v factor (the product P V then carries
    it, as the kernel's output scale does).
  }];
  let arguments = (ins
    AnyMemRef:$query, AnyMemRef:$key, AnyMemRef:$value,
    AnyMemRef:$rowMax, AnyMemRef:$rowSum, AnyMemRef:$acc,
    Index:$batch, Index:$qhead, Index:$kvhead, Index:$row0, Index:$col0,
    Variadic<AnyMemRef>:$descales,
    I64Attr:$block_m, I64Attr:$block_n,
    F32Attr:$scale_log2, F32Attr:$softcap,
    DenseI64ArrayAttr:$window,
    UnitAttr:$masked,
    OptionalAttr<F64Attr>:$rescale_threshold);
  let assemblyFormat = [{
    $query `,` $key `,` $value `[` $batch `,` $qhead `,` $kvhead `]`
    `rows` $row0 `cols` $col0
    `state` `(` $rowMax `,` $rowSum `,` $acc `)`
    (`descale` `(` $descales^ `:` type($descales) `)`)?
    (`masked` $masked^)? attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,`
    type($rowMax) `,` type($rowSum) `,` type($acc)
  }];
  let hasVerifier = 1;
}

def Attn_TileFinalizeOp : Attn_Op<"tile_finalize", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "epilogue of one m-block: o = acc / l, lse = (m + log2 l) ln 2";
  let description = [{
    Writes rows `row0 .. row0 + block_m - 1` (those < Sq) of query head
    `qhead`: o = acc / l converted to o's element type, and, when given,
    lse = (m + log2(l)) * ln(2). Rows that saw no key (l = 0) get o = 0 and
    lse = -inf.
  }];
  let arguments = (ins
    AnyMemRef:$rowMax, AnyMemRef:$rowSum, AnyMemRef:$acc,
    AnyMemRef:$out, Optional<AnyMemRef>:$lse,
    Index:$batch, Index:$qhead, Index:$row0,
    I64Attr:$block_m);
  let assemblyFormat = [{
    `state` `(` $rowMax `,` $rowSum `,` $acc `)` `to` $out (`,` $lse^)?
    `[` $batch `,` $qhead `]` `rows` $row0 attr-dict `:`
    type($rowMax) `,` type($rowSum) `,` type($acc) `,` type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The backward's tile level (attn-tile on attn.flash_attention_grad)
//===----------------------------------------------------------------------===//

def Attn_GradPreprocessOp : Attn_Op<"grad_preprocess", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "the backward's first pass: D = rowsum(dO o), dQ's sums zeroed";
  let description = [{
    FlashAttention's backward preprocess: for every query row,
    `delta[b, h, i] = sum_d dO[b, h, i, d] * o[b, h, i, d]` (f32 sums of the
    converted elements), and the f32 accumulator of dQ (`dq_acc`, the shape
    of q) set to zero, since the tiles of every kv-block add into it.
  }];
  let arguments = (ins AnyMemRef:$out, AnyMemRef:$gradOut, AnyMemRef:$delta,
                       AnyMemRef:$dqAcc);
  let assemblyFormat = [{
    $out `,` $gradOut `to` $delta `,` $dqAcc attr-dict `:`
    type($out) `,` type($gradOut) `,` type($delta) `,` type($dqAcc)
  }];
  let hasVerifier = 1;
}

def Attn_TileGradUpdateOp : Attn_Op<"tile_grad_update", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "one backward step on a (block_m x block_n) tile";
  let description = [{
    For the query rows `row0 .. row0 + block_m - 1` (those < Sq) of query
    head `qhead` and the keys `col0 .. col0 + block_n - 1` of kv head
    `kvhead`, in batch `batch`, FlashAttention's backward step, each score
    recomputed:

      s   = scale * q k^T              (with softcap: softcap * tanh(s / softcap))
      p   = exp(s - lse)               (0 where masked, or where lse = -inf)
      dp  = dO v^T
      ds  = p (dp - delta)             (times 1 - (s / softcap)^2 with softcap)
      dV_acc += p^T dO,  dK_acc += scale ds^T q,  dq_acc += scale ds k

    `dk_acc` [block_n, D] and `dv_acc` [block_n, Dv] are the kv-block's f32
    sums (over the m-blocks and, with GQA, the q heads of the kv head);
    `dq_acc` is the f32 dQ of the whole problem (the shape of q), which the
    tiles of every kv-block add into: its additions are atomic, since the
    cells of the grid that hold them run in parallel; with `deterministic`
    (the grad op's) each tile's additions come in the order of the
    kv-blocks, so that dq's rounding is the same from run to run. `delta` is
    `attn.grad_preprocess`'s. Without `masked` the schedule
    (`attn.q_range`) guarantees that every key of the tile lies below Skv
    and is visible to every row below Sq, so no mask is applied.
  }];
  let arguments = (ins
    AnyMemRef:$query, AnyMemRef:$key, AnyMemRef:$value, AnyMemRef:$gradOut,
    AnyMemRef:$lse, AnyMemRef:$delta,
    AnyMemRef:$dqAcc, AnyMemRef:$dkAcc, AnyMemRef:$dvAcc,
    Index:$batch, Index:$qhead, Index:$kvhead, Index:$row0, Index:$col0,
    I64Attr:$block_m, I64Attr:$block_n,
    F32Attr:$scale, F32Attr:$softcap,
    DenseI64ArrayAttr:$window,
    UnitAttr:$masked, UnitAttr:$deterministic);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $gradOut `,` $lse `,` $delta
    `[` $batch `,` $qhead `,` $kvhead `]`
    `rows` $row0 `cols` $col0
    `acc` `(` $dqAcc `,` $dkAcc `,` $dvAcc `)`
    (`masked` $masked^)? (`deterministic` $deterministic^)? attr-dict `:`
    type($query) `,` type($key) `,` type($value) `,` type($gradOut) `,`
    type($lse) `,` type($delta) `,` type($dqAcc) `,` type($dkAcc) `,`
    type($dvAcc)
  }];
  let hasVerifier = 1;
}

def Attn_TileGradFinalizeOp : Attn_Op<"tile_grad_finalize", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "epilogue of one kv-block: dK and dV from their f32 sums";
  let description = [{
    Writes rows `col0 .. col0 + block_n - 1` (those < Skv) of kv head
    `kvhead`: dk = dk_acc and dv = dv_acc, converted to their element types.
  }];
  let arguments = (ins AnyMemRef:$dkAcc, AnyMemRef:$dvAcc,
                       AnyMemRef:$gradKey, AnyMemRef:$gradValue,
                       Index:$batch, Index:$kvhead, Index:$col0,
                       I64Attr:$block_n);
  let assemblyFormat = [{
    `acc` `(` $dkAcc `,` $dvAcc `)` `to` $gradKey `,` $gradValue
    `[` $batch `,` $kvhead `]` `cols` $col0 attr-dict `:`
    type($dkAcc) `,` type($dvAcc) `,` type($gradKey) `,` type($gradValue)
  }];
  let hasVerifier = 1;
}

def Attn_GradPostprocessOp : Attn_Op<"grad_postprocess", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "the backward's last pass: dQ from its f32 sums";
  let description = [{
    dq = dq_acc converted to dq's element type (the softmax scale is already
    in the sums).
  }];
  let arguments = (ins AnyMemRef:$dqAcc, AnyMemRef:$gradQuery);
  let assemblyFormat = [{
    $dqAcc `to` $gradQuery attr-dict `:` type($dqAcc) `,` type($gradQuery)
  }];
  let hasVerifier = 1;
}

#endif // FA3_ATTN_OPS
