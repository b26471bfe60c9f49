// What the Hopper kernel does not take is refused with the reason.
// RUN: fa3-opt %s -split-input-file -verify-diagnostics --attn-hopper-config=block-m=128 --attn-tile --convert-attn-to-hopper

func.func @head_dim_80(%q: memref<1x2x64x80xbf16>, %o: memref<1x2x64x80xbf16>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: unsupported head dim 80 (the Hopper kernel takes 64, 96, 128, 192 or 256)}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x80xbf16>, memref<1x2x64x80xbf16>, memref<1x2x64x80xbf16>) outs(%o : memref<1x2x64x80xbf16>)
  return
}

// -----

func.func @f32_inputs(%q: memref<1x2x64x64xf32>, %o: memref<1x2x64x64xf32>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: the Hopper kernel takes bf16, f16 or f8E4M3FN q, k and v, got f32}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xf32>, memref<1x2x64x64xf32>, memref<1x2x64x64xf32>) outs(%o : memref<1x2x64x64xf32>)
  return
}

// -----

// FP8 takes head dim 64, 128 and 256.
func.func @f8_inputs(%q: memref<1x2x64x96xf8E4M3FN>, %o: memref<1x2x64x96xbf16>) {
  // expected-error @+1 {{unsupported head dim 96 in FP8 (the e4m3 kernel takes head dim 64, 128 or 256, value head dim equal)}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x96xf8E4M3FN>, memref<1x2x64x96xf8E4M3FN>, memref<1x2x64x96xf8E4M3FN>) outs(%o : memref<1x2x64x96xbf16>)
  return
}

// -----

// FP8 writes bf16.
func.func @f8_f16_output(%q: memref<1x2x64x128xf8E4M3FN>, %o: memref<1x2x64x128xf16>) {
  // expected-error @+1 {{the FP8 kernel writes o in bf16; o is f16}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>, memref<1x2x64x128xf8E4M3FN>) outs(%o : memref<1x2x64x128xf16>)
  return
}

// -----

func.func @f32_output(%q: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xf32>) {
  // expected-error @+1 {{the kernel writes o in the input element type; o is f32 but q is bf16}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) outs(%o : memref<1x2x64x64xf32>)
  return
}

// -----

func.func @value_head_dim(%q: memref<1x2x64x128xbf16>, %v: memref<1x2x64x80xbf16>, %o: memref<1x2x64x80xbf16>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: unsupported value head dim 80 (the Hopper kernel takes 64, 96, 128, 192 or 256)}}
  attn.flash_attention ins(%q, %q, %v : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x80xbf16>) outs(%o : memref<1x2x64x80xbf16>)
  return
}

// -----

func.func @strided_head_dim(%q: memref<1x2x64x64xbf16, strided<[16384, 8192, 128, 2]>>, %o: memref<1x2x64x64xbf16>) {
  // expected-error @+1 {{the head dim of every operand must be contiguous (stride 1), as TMA requires}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16, strided<[16384, 8192, 128, 2]>>, memref<1x2x64x64xbf16, strided<[16384, 8192, 128, 2]>>, memref<1x2x64x64xbf16, strided<[16384, 8192, 128, 2]>>) outs(%o : memref<1x2x64x64xbf16>)
  return
}

// -----

// Other pairings build from the same tiles but have not been run on the
// GPU: refused, naming the ones that have.
func.func @value_head_dim_pairing(%q: memref<1x2x64x128xbf16>, %v: memref<1x2x64x256xbf16>, %o: memref<1x2x64x256xbf16>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: unsupported value head dim 256 with head dim 128 (the Hopper kernel takes a value head dim equal to the head dim, or 128 with 192: the pairings checked on the GPU)}}
  attn.flash_attention ins(%q, %q, %v : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x256xbf16>) outs(%o : memref<1x2x64x256xbf16>)
  return
}

// -----

// The kernel is named after the function: a name PTX cannot spell is
// refused (LLVM's PTX printer would abort on it).
func.func @"x() {}"(%q: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xbf16>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: its kernel is named after @"x() {}", which is not a C identifier (letters, digits and '_', not starting with a digit) as PTX symbols must be: rename the function}}
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) outs(%o : memref<1x2x64x64xbf16>)
  return
}

// -----

// The kernel's launch takes the function's arguments: a tensor computed in
// the function is refused.
func.func @computed_key(%q: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xbf16>) {
  %k = memref.alloc() : memref<1x2x64x64xbf16>
  // expected-error @+1 {{cannot generate the Hopper kernel: its tensors must be arguments of @computed_key, which the kernel's launch takes; one is computed in the function (of views, the kernel takes only those of a packed variable-length batch)}}
  attn.flash_attention ins(%q, %k, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) outs(%o : memref<1x2x64x64xbf16>)
  return
}

// -----

// The backward's kernels too: named after the function, from its arguments.
func.func @"grad()"(%q: memref<?x1x?x64xbf16>, %o: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: its kernel is named after @"grad()", which is not a C identifier}}
  attn.flash_attention_grad ins(%q, %q, %q, %o, %o, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>)
  return
}

// -----

func.func @grad_computed_out(%q: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>,
    %dq: memref<?x1x?x64xf32>, %dk: memref<?x1x?x64xbf16>, %dv: memref<?x1x?x64xbf16>, %n: index) {
  %o = memref.alloc(%n, %n) : memref<?x1x?x64xbf16>
  // expected-error @+1 {{cannot generate the Hopper kernel: its tensors must be arguments of @grad_computed_out, which the kernel's launch takes; one is computed in the function}}
  attn.flash_attention_grad ins(%q, %q, %q, %o, %o, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%dq, %dk, %dv : memref<?x1x?x64xf32>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>)
  return
}
