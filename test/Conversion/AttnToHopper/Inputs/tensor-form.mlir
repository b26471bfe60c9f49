func.func @attn(%q: tensor<1x2x64x128xbf16>, %o: tensor<1x2x64x128xbf16>) -> tensor<1x2x64x128xbf16> {
  %r = attn.flash_attention ins(%q, %q, %q : tensor<1x2x64x128xbf16>, tensor<1x2x64x128xbf16>, tensor<1x2x64x128xbf16>) outs(%o : tensor<1x2x64x128xbf16>) -> tensor<1x2x64x128xbf16>
  return %r : tensor<1x2x64x128xbf16>
}
