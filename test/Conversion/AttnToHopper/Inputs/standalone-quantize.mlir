func.func @q(%x: tensor<1x2x100x128xbf16>, %y: tensor<1x2x100x128xf8E4M3FN>, %d: tensor<1x2x1xf32>) -> (tensor<1x2x100x128xf8E4M3FN>, tensor<1x2x1xf32>) {
  %r:2 = attn.quantize ins(%x : tensor<1x2x100x128xbf16>) outs(%y, %d : tensor<1x2x100x128xf8E4M3FN>, tensor<1x2x1xf32>) block(128) -> tensor<1x2x100x128xf8E4M3FN>, tensor<1x2x1xf32>
  return %r#0, %r#1 : tensor<1x2x100x128xf8E4M3FN>, tensor<1x2x1xf32>
}
