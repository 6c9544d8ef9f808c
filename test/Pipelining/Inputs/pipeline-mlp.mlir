// A three-layer tanh MLP with a squared loss over a dp x pp mesh, for the
// pipeline pass tests.
par.mesh @mesh ["dp"=2, "pp"=2]
func.func @loss(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w1: tensor<16x16xf32> {par.param}, %w2: tensor<16x16xf32> {par.param},
                %t: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w3: tensor<16x64xf32> {par.param}, %w4: tensor<64x4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e16 = tensor.empty() : tensor<8x16xf32>
  %z16 = linalg.fill ins(%c0 : f32) outs(%e16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ta = math.tanh %a : tensor<8x16xf32>
  %b = linalg.matmul ins(%ta, %w2 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%z16 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %tb = math.tanh %b : tensor<8x16xf32>
  %e64 = tensor.empty() : tensor<8x64xf32>
  %z64 = linalg.fill ins(%c0 : f32) outs(%e64 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %c = linalg.matmul ins(%tb, %w3 : tensor<8x16xf32>, tensor<16x64xf32>) outs(%z64 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %tc = math.tanh %c : tensor<8x64xf32>
  %e4 = tensor.empty() : tensor<8x4xf32>
  %z4 = linalg.fill ins(%c0 : f32) outs(%e4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %d = linalg.matmul ins(%tc, %w4 : tensor<8x64xf32>, tensor<64x4xf32>) outs(%z4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%d, %t : tensor<8x4xf32>, tensor<8x4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %df = arith.subf %p, %q : f32
    %sq = arith.mulf %df, %df : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
