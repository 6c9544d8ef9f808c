// A loss whose only data argument is a scalar: there is no batch to split
// into micro-batches (optimizer-invalid.mlir).
func.func @loss(%s: tensor<f32>, %w: tensor<4xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%w : tensor<4xf32>) outs(%zl : tensor<f32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %x = arith.addf %a, %acc : f32
      linalg.yield %x : f32
    }
  return %l : tensor<f32>
}
