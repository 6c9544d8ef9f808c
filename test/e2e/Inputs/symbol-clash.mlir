#id = affine_map<(d0) -> (d0)>
// step(x) = exp(x) with exp(x) = 2x + 1: two functions named like C
// library symbols.
func.func @exp(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %d = arith.addf %a, %a : f32
    %s = arith.addf %d, %one : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
