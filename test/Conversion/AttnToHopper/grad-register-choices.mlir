// Where the backward's consumers spend registers, attn-hopper-config's
// table per head dim, mask and deterministic mode (measured: bench/NOTES.md,
// Log, "LSE and D at use, dS^T by stmatrix"): the queries' LSE and D read
// from the rows ring where each block of columns is used (hopper.grad_probs
// / grad_scores ... columns) or as whole vectors before (load_columns), and
// dS^T (with shared keys P^T too) stored by stmatrix or by 4-byte stores;
// and S^T's mask as a band of keys around each query (hopper.band_mask) or
// per column through the visibility function (hopper.mask ... transposed).
// In every form the LSE comes staged as -LSE log2(e) (lse_neg_log2).
// RUN: fa3-opt %s --split-input-file --attn-hopper-config --attn-tile --convert-attn-to-hopper | FileCheck %s

// Head dim 64 (128-query steps: S^T 64 x 128): LSE and D read where used,
// dS^T by stmatrix.
// CHECK-LABEL: gpu.module @bwd64_causal_kernels
// CHECK: hopper.band_mask {{.*}} hi %{{.*}} : !hopper.frag<64x128xf32>
// CHECK-NOT: hopper.load_columns
// CHECK: hopper.grad_probs %{{.*}}, columns {{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, columns
// CHECK: hopper.store_shared {{.*}} box_bytes 16384 stmatrix :
func.func @bwd64_causal(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
    %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) causal
  return
}

// -----

// Deterministic, head dim 64 with a mask: the vectors before, 4-byte stores.
// CHECK-LABEL: gpu.module @bwd64_causal_det_kernels
// CHECK: hopper.load_columns
// CHECK: hopper.mask {{.*}} transposed
// CHECK: hopper.grad_probs %{{[0-9]+}}, %{{[0-9]+}} scale %{{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} :
// CHECK: hopper.store_shared {{.*}} box_bytes 0 :
func.func @bwd64_causal_det(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
    %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) causal deterministic
  return
}

// -----

// Deterministic, head dim 64 without a mask: as the plain kernel.
// CHECK-LABEL: gpu.module @bwd64_det_kernels
// CHECK-NOT: hopper.load_columns
// CHECK: hopper.grad_probs %{{.*}}, columns {{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, columns
// CHECK: hopper.store_shared {{.*}} box_bytes 0 stmatrix :
func.func @bwd64_det(%q: memref<?x1x?x64xbf16>, %k: memref<?x1x?x64xbf16>, %v: memref<?x1x?x64xbf16>,
    %o: memref<?x1x?x64xbf16>, %do: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>) deterministic
  return
}

// -----

// Head dim 96 without a mask: both at use, stmatrix.
// CHECK-LABEL: gpu.module @bwd96_kernels
// CHECK-NOT: hopper.load_columns
// CHECK: hopper.grad_probs %{{.*}}, columns {{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, columns
// CHECK: hopper.store_shared {{.*}} box_bytes 0 stmatrix :
func.func @bwd96(%q: memref<?x1x?x96xbf16>, %k: memref<?x1x?x96xbf16>, %v: memref<?x1x?x96xbf16>,
    %o: memref<?x1x?x96xbf16>, %do: memref<?x1x?x96xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x96xf32>, %dk: memref<?x1x?x96xbf16>, %dv: memref<?x1x?x96xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x96xf32>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>)
  return
}

// -----

// Head dim 96 with a mask: the vectors before, 4-byte stores.
// CHECK-LABEL: gpu.module @bwd96_causal_kernels
// CHECK: hopper.load_columns
// CHECK: hopper.mask {{.*}} transposed
// CHECK: hopper.grad_probs %{{[0-9]+}}, %{{[0-9]+}} scale %{{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} :
// CHECK: hopper.store_shared {{.*}} box_bytes 0 :
func.func @bwd96_causal(%q: memref<?x1x?x96xbf16>, %k: memref<?x1x?x96xbf16>, %v: memref<?x1x?x96xbf16>,
    %o: memref<?x1x?x96xbf16>, %do: memref<?x1x?x96xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x96xf32>, %dk: memref<?x1x?x96xbf16>, %dv: memref<?x1x?x96xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x96xf32>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>) causal
  return
}

// -----

// Deterministic, head dim 96: the vectors before, 4-byte stores.
// CHECK-LABEL: gpu.module @bwd96_det_kernels
// CHECK: hopper.load_columns
// CHECK: hopper.grad_probs %{{[0-9]+}}, %{{[0-9]+}} scale %{{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} :
// CHECK: hopper.store_shared {{.*}} box_bytes 0 :
func.func @bwd96_det(%q: memref<?x1x?x96xbf16>, %k: memref<?x1x?x96xbf16>, %v: memref<?x1x?x96xbf16>,
    %o: memref<?x1x?x96xbf16>, %do: memref<?x1x?x96xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x96xf32>, %dk: memref<?x1x?x96xbf16>, %dv: memref<?x1x?x96xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x96xf32>, memref<?x1x?x96xbf16>, memref<?x1x?x96xbf16>) deterministic
  return
}

// -----

// Head dim 128 without a mask: both at use, stmatrix.
// CHECK-LABEL: gpu.module @bwd128_kernels
// CHECK-NOT: hopper.load_columns
// CHECK: hopper.grad_probs %{{.*}}, columns {{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{.*}}, %{{.*}}, columns
// CHECK: hopper.store_shared {{.*}} box_bytes 0 stmatrix :
func.func @bwd128(%q: memref<?x1x?x128xf16>, %k: memref<?x1x?x128xf16>, %v: memref<?x1x?x128xf16>,
    %o: memref<?x1x?x128xf16>, %do: memref<?x1x?x128xf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x128xf32>, %dk: memref<?x1x?x128xf16>, %dv: memref<?x1x?x128xf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x128xf16>, memref<?x1x?x128xf16>, memref<?x1x?x128xf16>, memref<?x1x?x128xf16>, memref<?x1x?x128xf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x128xf32>, memref<?x1x?x128xf16>, memref<?x1x?x128xf16>)
  return
}

// -----

// Head dim 128 with a mask (a window), deterministic: LSE at use, D before.
// CHECK-LABEL: gpu.module @bwd128_window_det_kernels
// CHECK: hopper.mask {{.*}} left_bounded transposed
// CHECK: hopper.grad_probs %{{.*}}, columns {{.*}} lse_neg_log2 :
// CHECK: hopper.load_columns
// CHECK: hopper.grad_scores %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} :
// CHECK: hopper.store_shared {{.*}} box_bytes 0 stmatrix :
func.func @bwd128_window_det(%q: memref<?x1x?x128xbf16>, %k: memref<?x1x?x128xbf16>, %v: memref<?x1x?x128xbf16>,
    %o: memref<?x1x?x128xbf16>, %do: memref<?x1x?x128xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x128xf32>, %dk: memref<?x1x?x128xbf16>, %dv: memref<?x1x?x128xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x128xf32>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>) window(64, 0) deterministic
  return
}

// -----

// Head dim 192: the vectors before, 4-byte stores (dS^T and P^T).
// CHECK-LABEL: gpu.module @bwd192_kernels
// CHECK: hopper.load_columns
// CHECK: hopper.band_mask {{.*}} hi %{{.*}} : !hopper.frag<64x32xf32>
// CHECK: hopper.grad_probs %{{[0-9]+}}, %{{[0-9]+}} scale %{{.*}} lse_neg_log2 :
// CHECK: hopper.grad_scores %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} :
// CHECK-COUNT-2: hopper.store_shared {{.*}} box_bytes 0 :
func.func @bwd192(%q: memref<?x1x?x192xbf16>, %k: memref<?x1x?x192xbf16>, %v: memref<?x1x?x192xbf16>,
    %o: memref<?x1x?x192xbf16>, %do: memref<?x1x?x192xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x192xf32>, %dk: memref<?x1x?x192xbf16>, %dv: memref<?x1x?x192xbf16>) {
  attn.flash_attention_grad ins(%q, %k, %v, %o, %do, %lse : memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x192xf32>, memref<?x1x?x192xbf16>, memref<?x1x?x192xbf16>) causal
  return
}
