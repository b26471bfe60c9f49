// Every verifier error of the attn ops, one per split.
// RUN: fa3-opt %s -split-input-file -verify-diagnostics

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: tensor<2x8x128x64xbf16>) {
  // expected-error @+1 {{mixes tensor and memref operands: query is a memref but o is not}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : tensor<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{memref form has no results, got 1}}
  %r = attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>)  -> tensor<2x8x128x64xbf16>
  return
}

// -----

func.func @f(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x2x256x64xbf16>, %v: tensor<2x2x256x64xbf16>, %o: tensor<2x8x128x64xbf16>) {
  // expected-error @+1 {{result type 'tensor<2x8x128x64xf16>' differs from its output operand type 'tensor<2x8x128x64xbf16>'}}
  %r = attn.flash_attention ins(%q, %k, %v : tensor<2x8x128x64xbf16>, tensor<2x2x256x64xbf16>, tensor<2x2x256x64xbf16>) outs(%o : tensor<2x8x128x64xbf16>)  -> tensor<2x8x128x64xf16>
  return
}

// -----

func.func @f(%q: memref<8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{query must have rank 4 [B, Hq, Sq, D], got rank 3}}
  attn.flash_attention ins(%q, %k, %v : memref<8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{key must have rank 4 [B, Hkv, Skv, D], got rank 3}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>, %l: memref<2x8x128x1xf32>) {
  // expected-error @+1 {{lse must have rank 3 [B, Hq, Sq], got rank 4}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o, %l : memref<2x8x128x64xbf16>, memref<2x8x128x1xf32>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xi8>, %k: memref<2x2x256x64xi8>, %v: memref<2x2x256x64xi8>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{query element type must be f16, bf16, f32 or f8E4M3FN, got 'i8'}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xi8>, memref<2x2x256x64xi8>, memref<2x2x256x64xi8>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{query, key and value must have one element type, got 'bf16', 'f16', 'bf16'}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xf8E4M3FN>) {
  // expected-error @+1 {{o element type must be f16, bf16 or f32, got 'f8E4M3FN'}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xf8E4M3FN>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>, %l: memref<2x8x128xbf16>) {
  // expected-error @+1 {{lse element type must be f32, got 'bf16'}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o, %l : memref<2x8x128x64xbf16>, memref<2x8x128xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<3x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{batch mismatch: query has 2 but key has 3}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<3x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x4x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{kv heads mismatch: key has 2 but value has 4}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x4x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x4x128x64xbf16>) {
  // expected-error @+1 {{query heads mismatch: query has 8 but o has 4}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x4x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x100x64xbf16>) {
  // expected-error @+1 {{query length mismatch: query has 128 but o has 100}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x100x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x200x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{kv length mismatch: key has 256 but value has 200}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x200x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x128xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{head dim mismatch: query has 64 but key has 128}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x128xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x32xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{value head dim mismatch: value has 32 but o has 64}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x32xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>, %l: memref<2x8x100xf32>) {
  // expected-error @+1 {{query length mismatch: query has 128 but lse has 100}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o, %l : memref<2x8x128x64xbf16>, memref<2x8x100xf32>) 
  return
}

// -----

func.func @f(%q: memref<2x?x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x?x128x64xbf16>) {
  // expected-error @+1 {{query heads (dim 1 of query) must be static}}
  attn.flash_attention ins(%q, %k, %v : memref<2x?x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x?x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x?xbf16>, %k: memref<2x2x256x?xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{head dim (dim 3 of query) must be static}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x?xbf16>, memref<2x2x256x?xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x3x256x64xbf16>, %v: memref<2x3x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{query heads (8) must be a multiple of kv heads (3) for GQA/MQA}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x3x256x64xbf16>, memref<2x3x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x260xbf16>, %k: memref<2x2x256x260xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{head dim 260 is unsupported: it must be a multiple of 8 between 8 and 256}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x260xbf16>, memref<2x2x256x260xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x12xbf16>, %o: memref<2x8x128x12xbf16>) {
  // expected-error @+1 {{value head dim 12 is unsupported: it must be a multiple of 8 between 8 and 256}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x12xbf16>) outs(%o : memref<2x8x128x12xbf16>) 
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{scale must be > 0 and at most 1e30, got -1}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) scale(-1.0)
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{window entries must be -1 (unbounded) or 0 to 2147483647, got [-2, 0]}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) window(-2, 0)
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{causal attention has window right = 0; got window right = 4 (drop `causal` or set right to 0 or -1)}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) causal window(16, 4)
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{softcap must be 0 (off) or 1e-6 to 1e30, got -1}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) softcap(-1.0)
  return
}

// -----

// Generic form without its operand segments: refused, not a crash.
func.func @f(%q: memref<1x1x8x8xf32>) {
  // expected-error @+1 {{'attn.flash_attention' op operand count (3) does not match with the total size (0) specified in attribute 'operandSegmentSizes'}}
  "attn.flash_attention"(%q, %q, %q) : (memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<1x1x8x8xf32>) -> ()
  return
}

// -----

func.func @f(%q: memref<1x1x8x8xf32>) {
  // expected-error @+1 {{expects outs(o) or outs(o, lse), got 0 output operands}}
  "attn.flash_attention"(%q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<1x1x8x8xf32>) -> ()
  return
}

// -----

func.func @f(%q: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{tensor form needs one result per output operand (1), got 0}}
  "attn.flash_attention"(%q, %q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>}> : (tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> ()
  return
}

// -----

func.func @f(%q: memref<1x1x8x8xf32>) {
  // expected-error @+1 {{window must have two entries [left, right], got 3}}
  "attn.flash_attention"(%q, %q, %q, %q) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>, window = array<i64: 1, 2, 3>}> : (memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<1x1x8x8xf32>) -> ()
  return
}

// -----

func.func @f(%q: memref<1x1x8x8xf32>, %i: index) {
  %m = memref.alloca() : memref<32xf32>
  %acc = memref.alloca() : memref<32x8xf32>
  // expected-error @+1 {{state buffers must have block_m = 64 rows}}
  attn.tile_update %q, %q, %q [%i, %i, %i] rows %i cols %i state(%m, %m, %acc)
    {block_m = 64 : i64, block_n = 32 : i64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>}
    : memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<32xf32>, memref<32xf32>, memref<32x8xf32>
  return
}

// -----

func.func @f(%q: memref<1x1x8x8xf32>, %i: index) {
  %m = memref.alloca() : memref<32xf16>
  %acc = memref.alloca() : memref<32x8xf32>
  // expected-error @+1 {{state must be f32 buffers [block_m], [block_m], [block_m, Dv]}}
  attn.tile_finalize state(%m, %m, %acc) to %q [%i, %i] rows %i {block_m = 32 : i64}
    : memref<32xf16>, memref<32xf16>, memref<32x8xf32>, memref<1x1x8x8xf32>
  return
}

// -----

func.func @f(%q: memref<1x1x8x8xf32>, %i: index) {
  %m = memref.alloca() : memref<32xf32>
  %acc = memref.alloca() : memref<32x8xf32>
  // expected-error @+1 {{block sizes must be 1 to 1024, got 32 x 0}}
  attn.tile_update %q, %q, %q [%i, %i, %i] rows %i cols %i state(%m, %m, %acc)
    {block_m = 32 : i64, block_n = 0 : i64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>}
    : memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<1x1x8x8xf32>, memref<32xf32>, memref<32xf32>, memref<32x8xf32>
  return
}

// -----

// Bounds that keep the folded f32 constants finite and the index math in
// range (a scale of 3e38 used to give scale_log2 = +inf, all NaN).
func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{scale must be > 0 and at most 1e30, got 3.000000e+38}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) scale(3.0e38)
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{softcap must be 0 (off) or 1e-6 to 1e30, got 3.000000e+38}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) softcap(3.0e38)
  return
}

// -----

func.func @f(%q: memref<2x8x128x64xbf16>, %k: memref<2x2x256x64xbf16>, %v: memref<2x2x256x64xbf16>, %o: memref<2x8x128x64xbf16>) {
  // expected-error @+1 {{window entries must be -1 (unbounded) or 0 to 2147483647, got [0, 9223372036854775807]}}
  attn.flash_attention ins(%q, %k, %v : memref<2x8x128x64xbf16>, memref<2x2x256x64xbf16>, memref<2x2x256x64xbf16>) outs(%o : memref<2x8x128x64xbf16>) window(0, 9223372036854775807)
  return
}

// -----

func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{scale_log2 must be finite and positive, got INF}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 0x7F800000 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

// The lowerings scale a row's max, not each score: the scale must be > 0.
func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{scale_log2 must be finite and positive, got -1.000000e+00}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = -1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

// FP8 descales: q's, k's and v's together.
func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xf8E4M3FN>, %d: memref<f32>, %i: index) {
  // expected-error @+1 {{takes three descales (q, k, v) or none, got 2}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) descale(%d, %d : memref<f32>, memref<f32>) {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xf8E4M3FN>, memref<1x1x128x64xf8E4M3FN>, memref<1x1x128x64xf8E4M3FN>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xf8E4M3FN>, %d: memref<f32>, %r: memref<4xf32>, %i: index) {
  // expected-error @+1 {{descales must be f32 memrefs of rank 0, 2 or 3, got 'memref<4xf32>'}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) descale(%d, %r, %d : memref<f32>, memref<4xf32>, memref<f32>) {block_m = 128 : i64, block_n = 128 : i64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xf8E4M3FN>, memref<1x1x128x64xf8E4M3FN>, memref<1x1x128x64xf8E4M3FN>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

// The rescale threshold of lazy rescaling: log2 units, 0 to 15 (the
// kernel's bound: p <= 2^threshold fits f16), an f64.
func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{rescale_threshold must be 0 to 15 (log2 units), got 15.5}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 15.5 : f64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{rescale_threshold must be 0 to 15 (log2 units), got -1}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = -1.0 : f64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{rescale_threshold must be 0 to 15 (log2 units), got nan}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 0x7FF8000000000000 : f64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{rescale_threshold must be 0 to 15 (log2 units), got inf}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 0x7FF0000000000000 : f64, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

func.func @f(%m: memref<128xf32>, %l: memref<128xf32>, %acc: memref<128x64xf32>, %q: memref<1x1x128x64xbf16>, %i: index) {
  // expected-error @+1 {{'attn.tile_update' op attribute 'rescale_threshold' failed to satisfy constraint: 64-bit float attribute}}
  attn.tile_update %q, %q, %q[%i, %i, %i] rows %i cols %i state(%m, %l, %acc) {block_m = 128 : i64, block_n = 128 : i64, rescale_threshold = 8.0 : f32, scale_log2 = 1.0 : f32, softcap = 0.0 : f32, window = array<i64: -1, -1>} : memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<1x1x128x64xbf16>, memref<128xf32>, memref<128xf32>, memref<128x64xf32>
  return
}

// -----

// Layouts and memory spaces no lowering handles (upstream passes used to
// print an error and exit 0).
func.func @f(%q: memref<1x1x16x8xf32, #gpu.address_space<workgroup>>, %o: memref<1x1x16x8xf32>) {
  // expected-error @+1 {{query must be in the default memory space, got #gpu.address_space<workgroup>}}
  attn.flash_attention ins(%q, %q, %q : memref<1x1x16x8xf32, #gpu.address_space<workgroup>>, memref<1x1x16x8xf32, #gpu.address_space<workgroup>>, memref<1x1x16x8xf32, #gpu.address_space<workgroup>>) outs(%o : memref<1x1x16x8xf32>)
  return
}

// -----

func.func @f(%q: memref<1x1x16x8xf32>, %o: memref<1x1x16x8xf32, affine_map<(a, b, c, d) -> (d, c, b, a floordiv 2)>>) {
  // expected-error @+1 {{o must have a strided layout (identity or strided<...>), got affine_map}}
  attn.flash_attention ins(%q, %q, %q : memref<1x1x16x8xf32>, memref<1x1x16x8xf32>, memref<1x1x16x8xf32>) outs(%o : memref<1x1x16x8xf32, affine_map<(a, b, c, d) -> (d, c, b, a floordiv 2)>>)
  return
}

// -----

// #attn.hopper_config: each value's domain, and where it may stand.
func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: stages must be 1 to 8, got 9}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 9, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>}
  return
}

// -----

func.func @split_persistent(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: split_kv and pack_gqa take one CTA per tile (persistent = false, cluster_m = 1)}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = false, split_kv = true>}
  return
}

// -----

func.func @paged_persistent(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: paged_kv takes one CTA per tile (persistent = false, cluster_m = 1) and no split_kv or pack_gqa (the decoding kernel reads its page table without it)}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = false, paged_kv = true>}
  return
}

// -----

func.func @paged_split(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: paged_kv takes one CTA per tile}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 64, block_n = 128, stages = 2, persistent = false, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = false, tma_store = false, split_kv = true, pack_gqa = true, paged_kv = true>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: block sizes must be 1 to 1024, got 0 x 128}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 0, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: q_buffers must be 1 or 2, got 3}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 3, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: cluster_m must be 1 or 2, got 4}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 4, pingpong = true, tma_store = true>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: ctas_per_sm must be 1 or 2, got 3}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true, ctas_per_sm = 3>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: min_seqlen_q must be 0 to 2147483647, got -5}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true, min_seqlen_q = -5>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{hopper_config: rescale_threshold must be 0 to 15 (log2 units), got 16}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 16.0, cluster_m = 1, pingpong = true, tma_store = true>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+2 {{expected 'true' or 'false'}}
  // expected-error @+1 {{failed to parse Attn_HopperConfigAttr parameter 'persistent'}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = 1, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>}
  return
}

// -----

func.func @f(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  // expected-error @+1 {{'attn.hopper_config' must be a #attn.hopper_config, got {block_m = 128 : i64}}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>) {attn.hopper_config = {block_m = 128}}
  return
}

// -----

// expected-error @+1 {{'attn.hopper_config' belongs on attn.flash_attention(_varlen, _grad), attn.kv_range or attn.q_range, not on 'func.func'}}
func.func @f() attributes {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>} {
  return
}

// -----

func.func @f(%i: index) {
  // expected-error @+1 {{'attn.kv_range' op tiles 128 x 64 differ from its attn.hopper_config's 128 x 128}}
  %lo, %hi, %ilo, %ihi = attn.kv_range rows %i seq(%i, %i) {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>, block_m = 128 : i64, block_n = 64 : i64, window = array<i64: -1, -1>}
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %y: memref<1x2x100x64xbf16>, %d: memref<1x2xf32>) {
  // expected-error @+1 {{'attn.quantize' op output must be f8E4M3FN, got 'bf16'}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) outs(%y, %d : memref<1x2x100x64xbf16>, memref<1x2xf32>)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xi8>, %y: memref<1x2x100x64xf8E4M3FN>, %d: memref<1x2xf32>) {
  // expected-error @+1 {{'attn.quantize' op input must be f16, bf16 or f32, got 'i8'}}
  attn.quantize ins(%x : memref<1x2x100x64xi8>) outs(%y, %d : memref<1x2x100x64xf8E4M3FN>, memref<1x2xf32>)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %y: memref<1x2x100x64xf8E4M3FN>, %d: memref<1x2x3xf32>) {
  // expected-error @+1 {{'attn.quantize' op descale has 3 blocks but input's 100 rows in blocks of 64 make 2}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) outs(%y, %d : memref<1x2x100x64xf8E4M3FN>, memref<1x2x3xf32>) block(64)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %y: memref<1x2x100x64xf8E4M3FN>, %d: memref<1x2x1xf32>) {
  // expected-error @+1 {{'attn.quantize' op descale must have rank 2 [B, H] (one per head, without block), got rank 3}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) outs(%y, %d : memref<1x2x100x64xf8E4M3FN>, memref<1x2x1xf32>)
  return
}

// -----

func.func @f(%x: memref<1x2x100x96xbf16>, %s: memref<96xf32>, %y: memref<1x2x100x96xf8E4M3FN>, %d: memref<1x2xf32>) {
  // expected-error @+1 {{'attn.quantize' op rotate needs a static head dim that is a power of two (a Sylvester Hadamard matrix), got 96}}
  attn.quantize ins(%x : memref<1x2x100x96xbf16>) rotate(%s : memref<96xf32>) outs(%y, %d : memref<1x2x100x96xf8E4M3FN>, memref<1x2xf32>)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %s: memref<32xf32>, %y: memref<1x2x100x64xf8E4M3FN>, %d: memref<1x2xf32>) {
  // expected-error @+1 {{'attn.quantize' op head dim mismatch: input has 64 but signs has 32}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) rotate(%s : memref<32xf32>) outs(%y, %d : memref<1x2x100x64xf8E4M3FN>, memref<1x2xf32>)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %y: memref<1x2x100x64xf8E4M3FN>, %d: memref<1x2x100xf32>) {
  // expected-error @+1 {{'attn.quantize' op block must be 1 to 2147483647 rows, got 0}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) outs(%y, %d : memref<1x2x100x64xf8E4M3FN>, memref<1x2x100xf32>) block(0)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %y: memref<1x2x99x64xf8E4M3FN>, %d: memref<1x2xf32>) {
  // expected-error @+1 {{'attn.quantize' op rows mismatch: input has 100 but output has 99}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) outs(%y, %d : memref<1x2x99x64xf8E4M3FN>, memref<1x2xf32>)
  return
}

// -----

func.func @f(%x: tensor<1x2x100x64xbf16>, %y: memref<1x2x100x64xf8E4M3FN>, %d: memref<1x2xf32>) {
  // expected-error @+1 {{'attn.quantize' op mixes tensor and memref operands: input is a tensor but output is not}}
  attn.quantize ins(%x : tensor<1x2x100x64xbf16>) outs(%y, %d : memref<1x2x100x64xf8E4M3FN>, memref<1x2xf32>)
  return
}

// -----

func.func @f(%x: memref<1x2x100x64xbf16>, %y: memref<1x2x100x64xf8E4M3FN>) {
  // expected-error @+1 {{'attn.quantize' op expects outs(output, descale), got 1 output operands}}
  attn.quantize ins(%x : memref<1x2x100x64xbf16>) outs(%y : memref<1x2x100x64xf8E4M3FN>)
  return
}

// -----

func.func @f(%q: memref<1x2x64x64xbf16>, %d: memref<f32>, %o: memref<1x2x64x64xbf16>) {
  // expected-error @+1 {{'attn.flash_attention' op descale factors belong to f8E4M3FN (FP8) inputs, got 'bf16'}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) descale(%d, %d, %d : memref<f32>, memref<f32>, memref<f32>) outs(%o : memref<1x2x64x64xbf16>)
  return
}

// -----

func.func @f(%q: memref<1x2x64x64xf8E4M3FN>, %d: memref<f32>, %o: memref<1x2x64x64xbf16>) {
  // expected-error @+1 {{'attn.flash_attention' op expects descale(q_descale, k_descale, v_descale), got 2 operands}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>) descale(%d, %d : memref<f32>, memref<f32>) outs(%o : memref<1x2x64x64xbf16>)
  return
}

// -----

func.func @f(%q: memref<1x8x300x64xf8E4M3FN>, %k: memref<1x2x300x64xf8E4M3FN>, %d: memref<f32>, %kd: memref<1x2x2xf32>, %o: memref<1x8x300x64xbf16>) {
  // expected-error @+1 {{'attn.flash_attention' op k_descale must be [], [B, Hkv] or [B, Hkv, ceil(Skv / 128)], got 'memref<1x2x2xf32>'}}
  attn.flash_attention ins(%q, %k, %k : memref<1x8x300x64xf8E4M3FN>, memref<1x2x300x64xf8E4M3FN>, memref<1x2x300x64xf8E4M3FN>) descale(%d, %kd, %d : memref<f32>, memref<1x2x2xf32>, memref<f32>) outs(%o : memref<1x8x300x64xbf16>)
  return
}

// -----

func.func @f(%q: memref<1x8x300x64xf8E4M3FN>, %k: memref<1x2x300x64xf8E4M3FN>, %d: memref<f32>, %vd: memref<1x2x3xf32>, %o: memref<1x8x300x64xbf16>) {
  // expected-error @+1 {{'attn.flash_attention' op v_descale must be [] or [B, Hkv], got 'memref<1x2x3xf32>'}}
  attn.flash_attention ins(%q, %k, %k : memref<1x8x300x64xf8E4M3FN>, memref<1x2x300x64xf8E4M3FN>, memref<1x2x300x64xf8E4M3FN>) descale(%d, %d, %vd : memref<f32>, memref<f32>, memref<1x2x3xf32>) outs(%o : memref<1x8x300x64xbf16>)
  return
}

// -----

func.func @f(%q: memref<1x8x300x64xf8E4M3FN>, %k: memref<1x2x300x64xf8E4M3FN>, %d: memref<f32>, %qd: memref<1x4xf32>, %o: memref<1x8x300x64xbf16>) {
  // expected-error @+1 {{'attn.flash_attention' op q_descale must be [], [B, Hq], [B, Hkv] or [B, Hq, ceil(Sq / 128)], got 'memref<1x4xf32>'}}
  attn.flash_attention ins(%q, %k, %k : memref<1x8x300x64xf8E4M3FN>, memref<1x2x300x64xf8E4M3FN>, memref<1x2x300x64xf8E4M3FN>) descale(%qd, %d, %d : memref<1x4xf32>, memref<f32>, memref<f32>) outs(%o : memref<1x8x300x64xbf16>)
  return
}

// -----

func.func @f(%q: memref<1x2x64x64xf8E4M3FN>, %d: memref<f64>, %o: memref<1x2x64x64xbf16>) {
  // expected-error @+1 {{'attn.flash_attention' op q_descale must be f32, got 'f64'}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>, memref<1x2x64x64xf8E4M3FN>) descale(%d, %d, %d : memref<f64>, memref<f64>, memref<f64>) outs(%o : memref<1x2x64x64xbf16>)
  return
}
