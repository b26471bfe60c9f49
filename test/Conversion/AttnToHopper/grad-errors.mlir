// What the Hopper backward cannot take is refused by name where the
// configuration is chosen (attn-hopper-config), and by the kernel pass for
// tiled IR that lost its configuration or holds other work.
// (Tiles without a configuration: test/Dialect/Attn/tile-grad.mlir.)
// RUN: fa3-opt %s --split-input-file --verify-diagnostics --attn-hopper-config --attn-tile --convert-attn-to-hopper

func.func @hd80(%q: memref<?x1x?x80xbf16>, %lse: memref<?x1x?xf32>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: unsupported head dim 80 for the backward (the Hopper backward takes 64, 96, 128, 192 or 256)}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : memref<?x1x?x80xbf16>, memref<?x1x?x80xbf16>, memref<?x1x?x80xbf16>, memref<?x1x?x80xbf16>, memref<?x1x?x80xbf16>, memref<?x1x?xf32>)
      outs(%q, %q, %q : memref<?x1x?x80xbf16>, memref<?x1x?x80xbf16>, memref<?x1x?x80xbf16>)
  return
}

// -----

func.func @dk_f32(%q: memref<?x1x?x128xbf16>, %lse: memref<?x1x?xf32>, %g: memref<?x1x?x128xf32>) {
  // expected-error @+1 {{cannot generate the Hopper kernel: the backward writes dK and dV in the inputs' element type bf16}}
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?x128xbf16>, memref<?x1x?xf32>)
      outs(%g, %g, %g : memref<?x1x?x128xf32>, memref<?x1x?x128xf32>, memref<?x1x?x128xf32>)
  return
}

// -----

// The launcher computes D and dQ around the kernel, nothing else: other
// work in the function would be lost.
func.func @more(%q: memref<?x1x?x64xbf16>, %lse: memref<?x1x?xf32>, %x: memref<1xf32>) {
  attn.flash_attention_grad ins(%q, %q, %q, %q, %q, %lse : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?xf32>)
      outs(%q, %q, %q : memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>, memref<?x1x?x64xbf16>)
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  // expected-error @+1 {{'memref.store' op would be lost: convert-attn-to-hopper replaces @more by its backward kernels, which compute D and dQ (attn.grad_preprocess and attn.grad_postprocess of the grid's buffers) and nothing else; keep other work out of that function}}
  memref.store %one, %x[%c0] : memref<1xf32>
  return
}
