// attn.flash_attention_grad: it prints and parses back in both forms,
// bufferizes into its memref form, and its verifier names what is wrong
// (the checks it shares with the forward are in invalid.mlir).
// RUN: fa3-opt %s --split-input-file --verify-diagnostics | FileCheck %s
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// CHECK-LABEL: func @memref_form(
// CHECK: attn.flash_attention_grad ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<2x8x?x128xbf16>, memref<2x2x?x128xbf16>, memref<2x2x?x64xbf16>, memref<2x8x?x64xbf16>, memref<2x8x?x64xbf16>, memref<2x8x?xf32>) outs(%{{.*}}, %{{.*}}, %{{.*}} : memref<2x8x?x128xf32>, memref<2x2x?x128xf32>, memref<2x2x?x64xf32>) causal softcap(3.000000e+01){{$}}
func.func @memref_form(%q: memref<2x8x?x128xbf16>, %k: memref<2x2x?x128xbf16>, %v: memref<2x2x?x64xbf16>,
                       %o: memref<2x8x?x64xbf16>, %do: memref<2x8x?x64xbf16>, %lse: memref<2x8x?xf32>,
                       %dq: memref<2x8x?x128xf32>, %dk: memref<2x2x?x128xf32>, %dv: memref<2x2x?x64xf32>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<2x8x?x128xbf16>, memref<2x2x?x128xbf16>, memref<2x2x?x64xbf16>, memref<2x8x?x64xbf16>, memref<2x8x?x64xbf16>, memref<2x8x?xf32>)
      outs(%dq, %dk, %dv : memref<2x8x?x128xf32>, memref<2x2x?x128xf32>, memref<2x2x?x64xf32>) causal softcap(30.0)
  return
}

// -----

// CHECK-LABEL: func @tensor_form(
// CHECK: %{{.*}}:3 = attn.flash_attention_grad ins({{.*}}) outs({{.*}}) window(64, 0) deterministic -> tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>
// BUF-LABEL: func @tensor_form(
// BUF-SAME: %{{[^:]*}}: memref<1x4x32xf32, {{[^>]*}}>>, %[[DQ:[^:]*]]: memref<1x4x32x64xbf16, {{[^>]*}}>>, %[[DK:[^:]*]]: memref<1x4x32x64xbf16, {{[^>]*}}>>, %[[DV:[^:]*]]: memref<1x4x32x64xbf16, {{[^>]*}}>>)
// BUF-NEXT: attn.flash_attention_grad ins({{.*}}) outs(%[[DQ]], %[[DK]], %[[DV]] : {{.*}}) window(64, 0) deterministic{{$}}
// BUF-NEXT: return %[[DQ]], %[[DK]], %[[DV]]
func.func @tensor_form(%q: tensor<1x4x32x64xbf16>, %lse: tensor<1x4x32xf32>,
                       %dq: tensor<1x4x32x64xbf16>, %dk: tensor<1x4x32x64xbf16>, %dv: tensor<1x4x32x64xbf16>)
    -> (tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>) {
  %r:3 = attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32xf32>)
      outs(%dq, %dk, %dv : tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>) window(64, 0) deterministic
      -> tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>
  return %r#0, %r#1, %r#2 : tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>, tensor<1x4x32x64xbf16>
}

// -----

func.func @two_outs(%q: memref<1x2x8x16xf32>, %l: memref<1x2x8xf32>) {
  // expected-error @+1 {{expects outs(dq, dk, dv), got 2 output operands}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8xf32>)
      outs(%q, %q : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @mixed(%q: memref<1x2x8x16xf32>, %l: memref<1x2x8xf32>, %t: tensor<1x2x8x16xf32>) {
  // expected-error @+1 {{mixes tensor and memref operands: query is a memref but dk is not}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8xf32>)
      outs(%q, %t, %q : memref<1x2x8x16xf32>, tensor<1x2x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @do_rank(%q: memref<1x2x8x16xf32>, %do: memref<2x8x16xf32>, %l: memref<1x2x8xf32>) {
  // expected-error @+1 {{grad_out must have rank 4 [B, Hq, Sq, Dv], got rank 3}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %do, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<2x8x16xf32>, memref<1x2x8xf32>)
      outs(%q, %q, %q : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @lse_type(%q: memref<1x2x8x16xf32>, %l: memref<1x2x8xf16>) {
  // expected-error @+1 {{lse element type must be f32, got 'f16'}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8xf16>)
      outs(%q, %q, %q : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @fp8(%q: memref<1x2x8x16xf8E4M3FN>, %o: memref<1x2x8x16xbf16>, %l: memref<1x2x8xf32>, %g: memref<1x2x8x16xf32>) {
  // expected-error @+1 {{has no f8E4M3FN form (FP8 attention is inference only): give f16, bf16 or f32 inputs}}
  attn.flash_attention_grad ins(%q, %q, %q, %o, %o, %l : memref<1x2x8x16xf8E4M3FN>, memref<1x2x8x16xf8E4M3FN>, memref<1x2x8x16xf8E4M3FN>, memref<1x2x8x16xbf16>, memref<1x2x8x16xbf16>, memref<1x2x8xf32>)
      outs(%g, %g, %g : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @do_type(%q: memref<1x2x8x16xbf16>, %do: memref<1x2x8x16xf32>, %l: memref<1x2x8xf32>) {
  // expected-error @+1 {{o and grad_out must have the element type of query ('bf16'), got 'bf16' and 'f32'}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %do, %l : memref<1x2x8x16xbf16>, memref<1x2x8x16xbf16>, memref<1x2x8x16xbf16>, memref<1x2x8x16xbf16>, memref<1x2x8x16xf32>, memref<1x2x8xf32>)
      outs(%q, %q, %q : memref<1x2x8x16xbf16>, memref<1x2x8x16xbf16>, memref<1x2x8x16xbf16>)
  return
}

// -----

func.func @dk_type(%q: memref<1x2x8x16xf32>, %l: memref<1x2x8xf32>, %dk: memref<1x2x8x16xi32>) {
  // expected-error @+1 {{dk element type must be f16, bf16 or f32, got 'i32'}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8xf32>)
      outs(%q, %dk, %q : memref<1x2x8x16xf32>, memref<1x2x8x16xi32>, memref<1x2x8x16xf32>)
  return
}

// -----

// GQA: dk has the kv heads of key, not the query heads.
func.func @dk_heads(%q: memref<1x4x8x16xf32>, %k: memref<1x2x8x16xf32>, %l: memref<1x4x8xf32>) {
  // expected-error @+1 {{kv heads mismatch: key has 2 but dk has 4}}
  attn.flash_attention_grad ins(%q, %k, %k, %q, %q, %l : memref<1x4x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x4x8x16xf32>, memref<1x4x8x16xf32>, memref<1x4x8xf32>)
      outs(%q, %q, %k : memref<1x4x8x16xf32>, memref<1x4x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @do_length(%q: memref<1x2x8x16xf32>, %do: memref<1x2x9x16xf32>, %l: memref<1x2x8xf32>) {
  // expected-error @+1 {{query length mismatch: o has 8 but grad_out has 9}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %do, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x9x16xf32>, memref<1x2x8xf32>)
      outs(%q, %q, %q : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>)
  return
}

// -----

func.func @causal_window(%q: memref<1x2x8x16xf32>, %l: memref<1x2x8xf32>) {
  // expected-error @+1 {{causal attention has window right = 0; got window right = 4 (drop `causal` or set right to 0 or -1)}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %l : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8xf32>)
      outs(%q, %q, %q : memref<1x2x8x16xf32>, memref<1x2x8x16xf32>, memref<1x2x8x16xf32>) causal window(-1, 4)
  return
}
