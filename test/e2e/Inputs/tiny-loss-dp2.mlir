// A linear regression whose loss is scaled down so far that its gradients
// lie below f16's smallest subnormal (2^-24 = 6.0e-8): loss-scale-underflow.test.
// loss = 1e-9 * sum((x w - y)^2) over a 32x4 batch sharded over dp=2. The
// sum stays f32 (the keep-list's reduction) and the final multiply keeps f32
// too (par.precision), so the reported loss is exact; the adjoint of the
// squares, 1e-9 * 1 widened from f16, is what has to be rounded to f16.
par.mesh @mesh ["dp"=2]
#id = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>
#s = affine_map<() -> ()>
func.func @loss(%x: tensor<32x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w: tensor<8x4xf32> {par.param, par.init = #par.init<uniform, 0.5>},
                %y: tensor<32x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<32x4xf32>) -> tensor<32x4xf32>
  %p = linalg.matmul ins(%x, %w : tensor<32x8xf32>, tensor<8x4xf32>) outs(%z : tensor<32x4xf32>) -> tensor<32x4xf32>
  %d = arith.subf %p, %y : tensor<32x4xf32>
  %sq = arith.mulf %d, %d : tensor<32x4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction", "reduction"]}
      ins(%sq : tensor<32x4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %es = tensor.empty() : tensor<f32>
  %l = linalg.generic {indexing_maps = [#s, #s], iterator_types = []}
      ins(%sum : tensor<f32>) outs(%es : tensor<f32>) attrs = {par.precision = "f32"} {
  ^bb0(%v: f32, %o: f32):
    %k = arith.constant 1.0e-9 : f32
    %r = arith.mulf %v, %k : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
