func.func @mixed(%q: memref<1x2x64x64xbf16>, %o: memref<1x2x64x64xbf16>, %p: memref<4xf32>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>, memref<1x2x64x64xbf16>) outs(%o : memref<1x2x64x64xbf16>)
  %c0 = arith.constant 0 : index
  %x = arith.constant 1.0 : f32
  memref.store %x, %p[%c0] : memref<4xf32>
  return
}
