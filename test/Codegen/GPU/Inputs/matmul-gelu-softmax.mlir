// A matmul, a tanh GELU and a row softmax: the kernels the cuda target
// makes of them (par-lower-gpu).
func.func @mgs(%x: tensor<64x128xf32>, %w: tensor<128x256xf32>) -> tensor<64x256xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x256xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<64x256xf32>) -> tensor<64x256xf32>
  %y = linalg.matmul ins(%x, %w : tensor<64x128xf32>, tensor<128x256xf32>)
                     outs(%z : tensor<64x256xf32>) -> tensor<64x256xf32>
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %k0 = arith.constant 0.7978845608 : f32
  %k1 = arith.constant 0.044715 : f32
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%v: f32, %o: f32):
    %v2 = arith.mulf %v, %v : f32
    %v3 = arith.mulf %v2, %v : f32
    %a = arith.mulf %k1, %v3 : f32
    %b = arith.addf %v, %a : f32
    %c = arith.mulf %k0, %b : f32
    %t = math.tanh %c : f32
    %d = arith.addf %one, %t : f32
    %h = arith.mulf %half, %v : f32
    %r = arith.mulf %h, %d : f32
    linalg.yield %r : f32
  } -> tensor<64x256xf32>
  %s = linalg.softmax dimension(1) ins(%g : tensor<64x256xf32>)
                     outs(%e : tensor<64x256xf32>) -> tensor<64x256xf32>
  return %s : tensor<64x256xf32>
}

// The same in bf16 storage with f32 arithmetic inside (what
// par-mixed-precision writes) and one bf16 add.
func.func @mgs_bf16(%x: tensor<64x256xbf16>, %y: tensor<64x256xbf16>) -> tensor<64x256xbf16> {
  %e = tensor.empty() : tensor<64x256xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x256xbf16>, tensor<64x256xbf16>) outs(%e : tensor<64x256xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %s = arith.addf %a, %b : bf16
    %w = arith.extf %s : bf16 to f32
    %t = math.exp %w : f32
    %n = arith.truncf %t : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<64x256xbf16>
  return %r : tensor<64x256xbf16>
}
