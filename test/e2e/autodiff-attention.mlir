// Tests par-autodiff end to end on multi-head attention (projections,
// reshapes into heads, transposes, QK^T and PV contractions, softmax) with
// heads split over tp: the generated gradient, partitioned like the
// forward, runs on 2 ranks, matches the unsharded gradient, and matches
// central finite differences of the loss in f64.
// RUN: par-opt %s --par-autodiff -o %t.mlir
// RUN: par-compile %t.mlir -o %t
// RUN: par-run -n 2 %t --entry attention_grad --verify | FileCheck %s --check-prefix=VERIFY
// RUN: %python %S/gradcheck.py par-run %t attention attention_grad 1,2,3,4 2 | FileCheck %s
// VERIFY-COUNT-5: f64: max abs error {{.*}} OK
// CHECK: 16 passed, 0 failed
par.mesh @mesh ["tp"=2]
#qk = affine_map<(h, s, t, d) -> (h, s, d)>
#kk = affine_map<(h, s, t, d) -> (h, t, d)>
#sc = affine_map<(h, s, t, d) -> (h, s, t)>
#pv_p = affine_map<(h, s, d, t) -> (h, s, t)>
#pv_v = affine_map<(h, s, d, t) -> (h, t, d)>
#pv_o = affine_map<(h, s, d, t) -> (h, s, d)>
func.func @attention(%x: tensor<16x32xf64>,
    %wq: tensor<32x32xf64> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %wk: tensor<32x32xf64> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %wv: tensor<32x32xf64> {par.param, par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %wo: tensor<32x32xf64> {par.param, par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<f64> {
  %c0 = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<16x32xf64>
  %z = linalg.fill ins(%c0 : f64) outs(%e : tensor<16x32xf64>) -> tensor<16x32xf64>
  %q = linalg.matmul ins(%x, %wq : tensor<16x32xf64>, tensor<32x32xf64>) outs(%z : tensor<16x32xf64>) -> tensor<16x32xf64>
  %k = linalg.matmul ins(%x, %wk : tensor<16x32xf64>, tensor<32x32xf64>) outs(%z : tensor<16x32xf64>) -> tensor<16x32xf64>
  %v = linalg.matmul ins(%x, %wv : tensor<16x32xf64>, tensor<32x32xf64>) outs(%z : tensor<16x32xf64>) -> tensor<16x32xf64>
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf64> into tensor<16x4x8xf64>
  %k3 = tensor.expand_shape %k [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf64> into tensor<16x4x8xf64>
  %v3 = tensor.expand_shape %v [[0], [1, 2]] output_shape [16, 4, 8] : tensor<16x32xf64> into tensor<16x4x8xf64>
  %eh = tensor.empty() : tensor<4x16x8xf64>
  %qh = linalg.transpose ins(%q3 : tensor<16x4x8xf64>) outs(%eh : tensor<4x16x8xf64>) permutation = [1, 0, 2]
  %kh = linalg.transpose ins(%k3 : tensor<16x4x8xf64>) outs(%eh : tensor<4x16x8xf64>) permutation = [1, 0, 2]
  %vh = linalg.transpose ins(%v3 : tensor<16x4x8xf64>) outs(%eh : tensor<4x16x8xf64>) permutation = [1, 0, 2]
  %es = tensor.empty() : tensor<4x16x16xf64>
  %zs = linalg.fill ins(%c0 : f64) outs(%es : tensor<4x16x16xf64>) -> tensor<4x16x16xf64>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%qh, %kh : tensor<4x16x8xf64>, tensor<4x16x8xf64>) outs(%zs : tensor<4x16x16xf64>) {
  ^bb0(%a: f64, %b: f64, %acc: f64):
    %m = arith.mulf %a, %b : f64
    %r = arith.addf %acc, %m : f64
    linalg.yield %r : f64
  } -> tensor<4x16x16xf64>
  %p = linalg.softmax dimension(2) ins(%s : tensor<4x16x16xf64>) outs(%es : tensor<4x16x16xf64>) -> tensor<4x16x16xf64>
  %zc = linalg.fill ins(%c0 : f64) outs(%eh : tensor<4x16x8xf64>) -> tensor<4x16x8xf64>
  %ctx = linalg.generic {indexing_maps = [#pv_p, #pv_v, #pv_o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %vh : tensor<4x16x16xf64>, tensor<4x16x8xf64>) outs(%zc : tensor<4x16x8xf64>) {
  ^bb0(%a: f64, %b: f64, %acc: f64):
    %m = arith.mulf %a, %b : f64
    %r = arith.addf %acc, %m : f64
    linalg.yield %r : f64
  } -> tensor<4x16x8xf64>
  %eb = tensor.empty() : tensor<16x4x8xf64>
  %cb = linalg.transpose ins(%ctx : tensor<4x16x8xf64>) outs(%eb : tensor<16x4x8xf64>) permutation = [1, 0, 2]
  %c2 = tensor.collapse_shape %cb [[0], [1, 2]] : tensor<16x4x8xf64> into tensor<16x32xf64>
  %o = linalg.matmul ins(%c2, %wo : tensor<16x32xf64>, tensor<32x32xf64>) outs(%z : tensor<16x32xf64>) -> tensor<16x32xf64>
  %el = tensor.empty() : tensor<f64>
  %zl = linalg.fill ins(%c0 : f64) outs(%el : tensor<f64>) -> tensor<f64>
  %l = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%o : tensor<16x32xf64>) outs(%zl : tensor<f64>) {
  ^bb0(%ov: f64, %acc: f64):
    %t = math.tanh %ov : f64
    %sq = arith.mulf %t, %t : f64
    %r = arith.addf %acc, %sq : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  return %l : tensor<f64>
}

