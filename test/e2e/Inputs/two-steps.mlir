par.mesh @mesh ["dp"=2, "tp"=2]
#id = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>
func.func @scale(%x: tensor<8x4xf64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf64> {
  %y = arith.addf %x, %x : tensor<8x4xf64>
  return %y : tensor<8x4xf64>
}
func.func @loss(%x: tensor<8x4xf64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w1: tensor<4x16xf64> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                %w2: tensor<16x2xf64> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                %t: tensor<8x2xf64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f64> {
  %c0 = arith.constant 0.0 : f64
  %e1 = tensor.empty() : tensor<8x16xf64>
  %z1 = linalg.fill ins(%c0 : f64) outs(%e1 : tensor<8x16xf64>) -> tensor<8x16xf64>
  %a = linalg.matmul ins(%x, %w1 : tensor<8x4xf64>, tensor<4x16xf64>) outs(%z1 : tensor<8x16xf64>) -> tensor<8x16xf64>
  %h = math.tanh %a : tensor<8x16xf64>
  %e2 = tensor.empty() : tensor<8x2xf64>
  %z2 = linalg.fill ins(%c0 : f64) outs(%e2 : tensor<8x2xf64>) -> tensor<8x2xf64>
  %y = linalg.matmul ins(%h, %w2 : tensor<8x16xf64>, tensor<16x2xf64>) outs(%z2 : tensor<8x2xf64>) -> tensor<8x2xf64>
  %d = arith.subf %y, %t : tensor<8x2xf64>
  %el = tensor.empty() : tensor<f64>
  %zl = linalg.fill ins(%c0 : f64) outs(%el : tensor<f64>) -> tensor<f64>
  %l = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction", "reduction"]}
      ins(%d : tensor<8x2xf64>) outs(%zl : tensor<f64>) {
  ^bb0(%v: f64, %acc: f64):
    %sq = arith.mulf %v, %v : f64
    %half = arith.constant 0.5 : f64
    %s = arith.mulf %sq, %half : f64
    %r = arith.addf %acc, %s : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  return %l : tensor<f64>
}
func.func @other(%x: tensor<8x4xf64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w1: tensor<4x16xf64> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                %w2: tensor<16x2xf64> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                %t: tensor<8x2xf64> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f64> {
  %c0 = arith.constant 0.0 : f64
  %e1 = tensor.empty() : tensor<8x16xf64>
  %z1 = linalg.fill ins(%c0 : f64) outs(%e1 : tensor<8x16xf64>) -> tensor<8x16xf64>
  %a = linalg.matmul ins(%x, %w1 : tensor<8x4xf64>, tensor<4x16xf64>) outs(%z1 : tensor<8x16xf64>) -> tensor<8x16xf64>
  %h = math.tanh %a : tensor<8x16xf64>
  %e2 = tensor.empty() : tensor<8x2xf64>
  %z2 = linalg.fill ins(%c0 : f64) outs(%e2 : tensor<8x2xf64>) -> tensor<8x2xf64>
  %y = linalg.matmul ins(%h, %w2 : tensor<8x16xf64>, tensor<16x2xf64>) outs(%z2 : tensor<8x2xf64>) -> tensor<8x2xf64>
  %d = arith.subf %y, %t : tensor<8x2xf64>
  %el = tensor.empty() : tensor<f64>
  %zl = linalg.fill ins(%c0 : f64) outs(%el : tensor<f64>) -> tensor<f64>
  %l = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction", "reduction"]}
      ins(%d : tensor<8x2xf64>) outs(%zl : tensor<f64>) {
  ^bb0(%v: f64, %acc: f64):
    %sq = arith.mulf %v, %v : f64
    %half = arith.constant 0.5 : f64
    %s = arith.mulf %sq, %half : f64
    %r = arith.addf %acc, %s : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  return %l : tensor<f64>
}
