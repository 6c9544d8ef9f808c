// Tests par-autodiff end to end on a two-layer MLP with a squared-error
// loss, sharded dp x tp on 4 ranks: the gradient's data-parallel
// all_reduces appear by propagation alone, the sharded gradient equals the
// unsharded one, and both equal central finite differences in f64.
// RUN: par-opt %s --par-autodiff -o %t.mlir
// RUN: par-opt %t.mlir --par-spmd=report=true -o /dev/null | FileCheck %s --check-prefix=COMM
// RUN: par-compile %t.mlir -o %t
// RUN: par-run -n 4 %t --entry loss_grad --verify | FileCheck %s --check-prefix=VERIFY
// RUN: %python %S/gradcheck.py par-run %t loss loss_grad 1,2 4 | FileCheck %s
// The data-parallel reductions of the loss and of the two gradients (8 +
// 128 + 256 bytes of f64) travel as one bucket: one message of 392 bytes
// (2(n-1)/n = 1 on n=2); with the tensor-parallel one, 2 collectives
// instead of 4, the same 456 bytes.
// COMM-LABEL: par-comm-report: @loss_grad
// COMM-DAG:   par.bucket_all_reduce axes=["dp"] n=2 f64 3 tensors: 392 bytes
// COMM-DAG:   par.all_reduce axes=["tp"] n=2 f64 tensor<4x2xf64>: 64 bytes
// COMM:       total: 2 collectives, 456 bytes per device
// VERIFY-COUNT-3: f64: max abs error {{.*}} OK
// CHECK: 8 passed, 0 failed
par.mesh @mesh ["dp"=2, "tp"=2]
#id = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>
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
