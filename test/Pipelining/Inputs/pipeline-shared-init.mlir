// A Megatron MLP pair for pipeline-split.mlir whose two matmuls share one
// zero init, as torch-mlir emits them: the column-parallel %h is split on
// its features over "tp", the row-parallel %y that crosses the stage cut
// is a partial sum, replicated once reduced. Propagated with the init
// shared, %y would take %h's split through it.
par.mesh @mesh ["tp"=2]
func.func @loss(%x: tensor<4x8xf32>,
                %w1: tensor<8x8xf32> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                %w2: tensor<8x8xf32> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                %w3: tensor<8x8xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = math.tanh %y : tensor<4x8xf32>
  %o = linalg.matmul ins(%t, %w3 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%o : tensor<4x8xf32>) outs(%zl : tensor<f32>) dimensions = [0, 1]
    (%p: f32, %acc: f32) {
      %s = arith.addf %p, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
