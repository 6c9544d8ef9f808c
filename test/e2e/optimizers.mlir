// Tests par-optimizer's train steps (SGD, SGD with momentum, AdamW) on the
// MLP of autodiff-mlp.mlir, sharded dp x tp on 4 ranks: each step matches
// the unsharded step, and its updates match PyTorch's formulas recomputed
// from the returned gradient (optimcheck.py).
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=sgd lr=0.1" -o %t.sgd.mlir
// RUN: par-compile %t.sgd.mlir -o %t.sgd
// RUN: par-run -n 4 %t.sgd --entry loss_step --verify | FileCheck %s --check-prefix=SGD
// RUN: %python %S/optimcheck.py par-run %t.sgd loss 1,2 4 sgd 0.1 | FileCheck %s --check-prefix=SGDF
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum lr=0.05" -o %t.mom.mlir
// RUN: par-compile %t.mom.mlir -o %t.mom
// RUN: par-run -n 4 %t.mom --entry loss_step --verify | FileCheck %s --check-prefix=MOM
// RUN: %python %S/optimcheck.py par-run %t.mom loss 1,2 4 momentum 0.05 | FileCheck %s --check-prefix=MOMF
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw lr=0.001" -o %t.adam.mlir
// RUN: par-compile %t.adam.mlir -o %t.adam
// RUN: par-run -n 4 %t.adam --entry loss_step --verify | FileCheck %s --check-prefix=ADAM
// RUN: %python %S/optimcheck.py par-run %t.adam loss 1,2 4 adamw 0.001 | FileCheck %s --check-prefix=ADAMF
// SGD-COUNT-3: f64: max abs error {{.*}} OK
// SGDF: 3 passed, 0 failed
// MOM-COUNT-5: f64: max abs error {{.*}} OK
// MOMF: 5 passed, 0 failed
// ADAM-COUNT-8: f64: max abs error {{.*}} OK
// ADAMF: 8 passed, 0 failed
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
