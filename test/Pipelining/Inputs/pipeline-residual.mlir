// A residual block for pipeline-split.mlir: %a feeds both the second matmul
// and the add, so no stage boundary may fall between them.
func.func @loss(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32> {par.param}, %w2: tensor<8x8xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = linalg.matmul ins(%x, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = linalg.matmul ins(%a, %w2 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = arith.addf %a, %b : tensor<4x8xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%c : tensor<4x8xf32>) outs(%zl : tensor<f32>) dimensions = [0, 1]
    (%p: f32, %acc: f32) {
      %s = arith.addf %p, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
