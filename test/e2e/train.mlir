// Tests training on real ranks: the MLP's momentum train step, iterated 30
// times by par-run (new parameters and momentum fed back each step) on a
// dp x tp mesh of 4 ranks, lowers the loss, and the whole 30-step
// trajectory follows the unsharded run's, and the last step, run by the
// unsharded program from the sharded run's state before it, gives the same
// parameters and momentum elementwise at f64's one-step tolerance.
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum lr=0.02" -o %t.mlir
// RUN: par-compile %t.mlir -o %t
// RUN: par-run -n 4 %t --entry loss_step --steps 30 --verify --loss-csv %t.csv | FileCheck %s
// RUN: %python -c "import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); a,b=float(r[0]['loss']),float(r[-1]['loss']); print('first %%g last %%g' %% (a,b)); assert len(r)==30 and b < a/5" %t.csv
// CHECK: step 1/30  loss
// CHECK: step 30/30  loss
// CHECK: loss trajectory over 30 steps: {{.*}} OK
// CHECK: the results of step 30 against the reference's step from the same state, elementwise
// CHECK-COUNT-5: f64: max abs error {{.*}} (tolerance 1e-12 rel) OK
// CHECK: drift from the reference run of all 30 steps (not checked)
// A function that is not a train step cannot be iterated.
// RUN: not par-run -n 4 %t --entry loss --steps 3 2>&1 | FileCheck %s --check-prefix=NOTSTEP
// NOTSTEP: 'loss' is not a train step
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
