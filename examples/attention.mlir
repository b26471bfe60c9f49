// A realistic attention layer, as an ML compiler would hand it to us: a
// Llama-style GQA block (32 query heads sharing 8 kv heads, head dim 128),
// causal, bf16, batch 2 with a dynamic sequence length, with the LSE output
// that the backward pass needs.
func.func @attention(%q: tensor<2x32x?x128xbf16>, %k: tensor<2x8x?x128xbf16>,
                     %v: tensor<2x8x?x128xbf16>, %o: tensor<2x32x?x128xbf16>,
                     %lse: tensor<2x32x?xf32>) -> (tensor<2x32x?x128xbf16>, tensor<2x32x?xf32>) {
  %r:2 = attn.flash_attention ins(%q, %k, %v : tensor<2x32x?x128xbf16>, tensor<2x8x?x128xbf16>, tensor<2x8x?x128xbf16>)
           outs(%o, %lse : tensor<2x32x?x128xbf16>, tensor<2x32x?xf32>) causal
           -> tensor<2x32x?x128xbf16>, tensor<2x32x?xf32>
  return %r#0, %r#1 : tensor<2x32x?x128xbf16>, tensor<2x32x?xf32>
}
