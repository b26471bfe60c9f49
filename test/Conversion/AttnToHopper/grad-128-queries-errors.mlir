// The backward takes 128-query steps only at head dim 64 with 128 keys
// and not in the deterministic mode (its turns are per 64-row dQ tile);
// anything else with block-m 128 is refused by name.
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper

func.func @bwd128_m128(%q: memref<?x1x?x128xbf16>, %lse: memref<?x1x?xf32>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: unsupported block-m 128 for the backward (64: the queries of dQaccum's tiles; 128 at head dim 64 with block-n 128, not deterministic)}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?xf32>)
      outs(%q, %q, %q : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>)
  return
}

// -----

func.func @bwd64_m128_det(%q: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: unsupported block-m 128 for the backward (64: the queries of dQaccum's tiles; 128 at head dim 64 with block-n 128, not deterministic)}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%q, %q, %q : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) deterministic
  return
}

