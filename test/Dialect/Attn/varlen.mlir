// attn.flash_attention_varlen: it prints and parses back in both forms
// (with and without seqused_k), bufferizes into its memref form, and its
// verifier names what is wrong.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// CHECK-LABEL: func @memref_form(
// CHECK: attn.flash_attention_varlen ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<?x8x128xbf16>, memref<?x2x128xbf16>, memref<?x2x128xbf16>) seqlens(%{{.*}}, %{{.*}}, %{{.*}} : memref<?xi32>, memref<?xi32>, memref<?xi32>) outs(%{{.*}}, %{{.*}} : memref<?x8x128xbf16>, memref<8x?xf32>) causal{{$}}
func.func @memref_form(%q: memref<?x8x128xbf16>, %k: memref<?x2x128xbf16>, %v: memref<?x2x128xbf16>,
                       %cq: memref<?xi32>, %ck: memref<?xi32>, %used: memref<?xi32>,
                       %o: memref<?x8x128xbf16>, %lse: memref<8x?xf32>) {
  attn.flash_attention_varlen ins(%q, %k, %v : memref<?x8x128xbf16>, memref<?x2x128xbf16>, memref<?x2x128xbf16>)
      seqlens(%cq, %ck, %used : memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x8x128xbf16>, memref<8x?xf32>) causal
  return
}

// -----

// CHECK-LABEL: func @tensor_form(
// CHECK: attn.flash_attention_varlen ins({{.*}}) seqlens(%{{.*}}, %{{.*}} : tensor<5xi32>, tensor<5xi32>) outs(%{{.*}} : tensor<100x4x64xf16>) softcap(2.000000e+01) -> tensor<100x4x64xf16>
// BUF-LABEL: func @tensor_form(
// BUF: attn.flash_attention_varlen ins({{.*}}) seqlens({{.*}}) outs(%[[O:[^ ]*]] : memref<100x4x64xf16, {{[^>]*}}>>) softcap(2.000000e+01){{$}}
// BUF-NEXT: return %[[O]]
func.func @tensor_form(%q: tensor<100x4x64xf16>, %k: tensor<300x4x64xf16>, %c: tensor<5xi32>,
                       %o: tensor<100x4x64xf16>) -> tensor<100x4x64xf16> {
  %r = attn.flash_attention_varlen ins(%q, %k, %k : tensor<100x4x64xf16>, tensor<300x4x64xf16>, tensor<300x4x64xf16>)
      seqlens(%c, %c : tensor<5xi32>, tensor<5xi32>) outs(%o : tensor<100x4x64xf16>) softcap(20.0) -> tensor<100x4x64xf16>
  return %r : tensor<100x4x64xf16>
}

// -----

func.func @rank(%q: memref<1x100x4x64xf16>, %k: memref<300x4x64xf16>, %c: memref<5xi32>, %o: memref<100x4x64xf16>) {
  // expected-error @+1 {{query must have rank 3 [Tq, Hq, D], got rank 4}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<1x100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%c, %c : memref<5xi32>, memref<5xi32>) outs(%o : memref<100x4x64xf16>)
  return
}

// -----

func.func @cu_type(%q: memref<100x4x64xf16>, %k: memref<300x4x64xf16>, %c: memref<5xi64>, %o: memref<100x4x64xf16>) {
  // expected-error @+1 {{cu_seqlens_q element type must be i32 (as FlashAttention's), got 'i64'}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%c, %c : memref<5xi64>, memref<5xi64>) outs(%o : memref<100x4x64xf16>)
  return
}

// -----

func.func @cu_sizes(%q: memref<100x4x64xf16>, %k: memref<300x4x64xf16>, %cq: memref<5xi32>, %ck: memref<4xi32>, %o: memref<100x4x64xf16>) {
  // expected-error @+1 {{sequence count + 1 mismatch: cu_seqlens_q has 5 but cu_seqlens_k has 4}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%cq, %ck : memref<5xi32>, memref<4xi32>) outs(%o : memref<100x4x64xf16>)
  return
}

// -----

func.func @cu_empty(%q: memref<100x4x64xf16>, %k: memref<300x4x64xf16>, %c: memref<0xi32>, %o: memref<100x4x64xf16>) {
  // expected-error @+1 {{cu_seqlens_q must have B + 1 >= 1 entries, got 0}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%c, %c : memref<0xi32>, memref<0xi32>) outs(%o : memref<100x4x64xf16>)
  return
}

// -----

func.func @seqused(%q: memref<100x4x64xf16>, %k: memref<300x4x64xf16>, %c: memref<5xi32>, %u: memref<5xi32>, %o: memref<100x4x64xf16>) {
  // expected-error @+1 {{seqused_k must have B = 4 entries (one fewer than cu_seqlens_q), got 5}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%c, %c, %u : memref<5xi32>, memref<5xi32>, memref<5xi32>) outs(%o : memref<100x4x64xf16>)
  return
}

// -----

func.func @lse_layout(%q: memref<100x4x64xf16>, %k: memref<300x4x64xf16>, %c: memref<5xi32>, %o: memref<100x4x64xf16>, %l: memref<100x4xf32>) {
  // expected-error @+1 {{query heads mismatch: query has 4 but lse has 100}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%c, %c : memref<5xi32>, memref<5xi32>) outs(%o, %l : memref<100x4x64xf16>, memref<100x4xf32>)
  return
}

// -----

func.func @tokens(%q: memref<100x4x64xf16>, %k: memref<300x4x64xf16>, %c: memref<5xi32>, %o: memref<99x4x64xf16>) {
  // expected-error @+1 {{query tokens mismatch: query has 100 but o has 99}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x4x64xf16>, memref<300x4x64xf16>, memref<300x4x64xf16>)
      seqlens(%c, %c : memref<5xi32>, memref<5xi32>) outs(%o : memref<99x4x64xf16>)
  return
}

// -----

func.func @gqa(%q: memref<100x3x64xf16>, %k: memref<300x2x64xf16>, %c: memref<5xi32>, %o: memref<100x3x64xf16>) {
  // expected-error @+1 {{query heads (3) must be a multiple of kv heads (2) for GQA/MQA}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x3x64xf16>, memref<300x2x64xf16>, memref<300x2x64xf16>)
      seqlens(%c, %c : memref<5xi32>, memref<5xi32>) outs(%o : memref<100x3x64xf16>)
  return
}

// -----

func.func @dynamic_heads(%q: memref<100x?x64xf16>, %k: memref<300x2x64xf16>, %c: memref<5xi32>, %o: memref<100x?x64xf16>) {
  // expected-error @+1 {{query heads (dim 1 of query) must be static}}
  attn.flash_attention_varlen ins(%q, %k, %k : memref<100x?x64xf16>, memref<300x2x64xf16>, memref<300x2x64xf16>)
      seqlens(%c, %c : memref<5xi32>, memref<5xi32>) outs(%o : memref<100x?x64xf16>)
  return
}
