// The train step of ef-step.mlir without gradient compression: no
// error-feedback buffer, no par.compression. Its reference program is the
// one par-run verifies ef-step.mlir's sharded step against.
par.mesh @mesh ["dp"=2]
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#v = affine_map<(j) -> (j)>
#s = affine_map<(j) -> ()>
func.func @train_step(%w: tensor<4xf32> {par.init = #par.init<ones>},
                %x: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<f32>, tensor<4xf32>)
    attributes {par.feedback = array<i64: 1, 0>} {
  %c0 = arith.constant 0.0 : f32
  %eg = tensor.empty() : tensor<4xf32>
  %zg = linalg.fill ins(%c0 : f32) outs(%eg : tensor<4xf32>) -> tensor<4xf32>
  %g = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<8x4xf32>) outs(%zg : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#v, #v, #s], iterator_types = ["reduction"]}
      ins(%g, %w : tensor<4xf32>, tensor<4xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %lr = arith.constant dense<0.01> : tensor<4xf32>
  %d = arith.mulf %g, %lr : tensor<4xf32>
  %w2 = arith.subf %w, %d : tensor<4xf32>
  return %l, %w2 : tensor<f32>, tensor<4xf32>
}
