// A small f32 MLP (dp=2 x tp=2) for the non-finite tests: x and t are the
// data, w1 and w2 the named parameters (par.name).
par.mesh @mesh ["dp"=2, "tp"=2]
#id = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>
func.func @loss(%x: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w1: tensor<4x16xf32> {par.name = "fc1.weight", par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                %w2: tensor<16x2xf32> {par.name = "fc2.weight", par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                %t: tensor<8x2xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x16xf32>
  %z1 = linalg.fill ins(%c0 : f32) outs(%e1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<8x4xf32>, tensor<4x16xf32>) outs(%z1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %h = math.tanh %a : tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8x2xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x2xf32>) -> tensor<8x2xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<8x16xf32>, tensor<16x2xf32>) outs(%z2 : tensor<8x2xf32>) -> tensor<8x2xf32>
  %d = arith.subf %y, %t : tensor<8x2xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction", "reduction"]}
      ins(%d : tensor<8x2xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %half = arith.constant 0.5 : f32
    %s = arith.mulf %sq, %half : f32
    %r = arith.addf %acc, %s : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
