// RUN: par-opt %s --par-autodiff --par-recompute | FileCheck %s --check-prefix=NONE --implicit-check-not=par.recompute_barrier
// RUN: par-opt %s --par-autodiff "--par-recompute=policy=selective" | FileCheck %s --check-prefix=SEL
// RUN: par-opt %s --par-autodiff "--par-recompute=policy=full" | FileCheck %s --check-prefix=FULL
// RUN: par-opt %s --par-autodiff "--par-recompute=policy=full report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: par-opt %s --par-autodiff "--par-recompute=policy=selective report=true" -o /dev/null | FileCheck %s --check-prefix=SELREPORT

// Tests the two policies on one transformer block (no LayerNorm), written as
// par-autodiff's input: x (data) -> q, k, v -> QK^T -> scale -> softmax
// -> P.V -> h = x + ctx -> tanh(h.W1) -> y = h + g -> sum(y^2). The block
// is found from the dataflow: two residual sums (x + ctx, h + g), an
// attention core between the activation x activation contractions (QK^T
// and P.V).

// Tests that without a policy nothing changes (no barrier anywhere).
// NONE-LABEL: func.func @block_grad(

// Tests that selective recomputes QK^T, the scale and the softmax in the
// backward from barriers of the saved q and k, and that the backward no
// longer reads the forward's scores or probabilities: the softmax's and
// P.V's adjoints read the recomputed %[[P2]].
// SEL-LABEL: func.func @block_grad(
// SEL:         %[[Q:[0-9]+]] = linalg.generic {{.*}} ins(%arg0, %arg1 :
// SEL:         %[[K:[0-9]+]] = linalg.generic {{.*}} ins(%arg0, %arg2 :
// SEL:         %[[S:[0-9]+]] = linalg.generic {{.*}} ins(%[[Q]], %[[K]] :
// SEL:         %[[M:[0-9]+]] = linalg.generic {{.*}} ins(%[[S]] :
// SEL:         %[[P:[0-9]+]] = linalg.softmax dimension(1) ins(%[[M]] :
// SEL:         linalg.generic {{.*}} ins(%[[P]], %{{[0-9]+}} :
// SEL:         %[[QB:[0-9]+]] = par.recompute_barrier %[[Q]] : tensor<4x8xf32>
// SEL-NEXT:    %[[KB:[0-9]+]] = par.recompute_barrier %[[K]] : tensor<4x8xf32>
// SEL-NOT:     %[[S]]{{[^0-9]}}
// SEL-NOT:     %[[M]]{{[^0-9]}}
// SEL-NOT:     %[[P]]{{[^0-9]}}
// SEL:         %[[S2:[0-9]+]] = linalg.generic {{.*}} ins(%[[QB]], %[[KB]] :
// SEL:         %[[M2:[0-9]+]] = linalg.generic {{.*}} ins(%[[S2]] :
// SEL:         %[[P2:[0-9]+]] = linalg.softmax dimension(1) ins(%[[M2]] :
// SEL-NOT:     %[[S]]{{[^0-9]}}
// SEL-NOT:     %[[M]]{{[^0-9]}}
// SEL-NOT:     %[[P]]{{[^0-9]}}
// SEL:         linalg.generic {{.*}} ins(%[[P2]],
// SEL-NOT:     %[[S]]{{[^0-9]}}
// SEL-NOT:     %[[M]]{{[^0-9]}}
// SEL-NOT:     %[[P]]{{[^0-9]}}
// SEL:         return

// Tests that full saves only the block's input (the data argument, through
// a barrier) and recomputes the whole block from it in the backward: the
// projections, the attention, the first residual sum h, the MLP; the
// backward reads none of the block's forward values (h, the softmax, the
// projections).
// FULL-LABEL: func.func @block_grad(
// FULL:         %[[Q:[0-9]+]] = linalg.generic {{.*}} ins(%arg0, %arg1 :
// FULL:         %[[P:[0-9]+]] = linalg.softmax
// FULL:         %[[H:[0-9]+]] = linalg.generic {{.*}} ins(%arg0, %{{[0-9]+}} :
// FULL:         %[[XB:[0-9]+]] = par.recompute_barrier %arg0 : tensor<4x8xf32>
// FULL-NOT:     %[[Q]]{{[^0-9]}}
// FULL-NOT:     %[[P]]{{[^0-9]}}
// FULL-NOT:     %[[H]]{{[^0-9]}}
// FULL:         %[[Q2:[0-9]+]] = linalg.generic {{.*}} ins(%[[XB]], %arg1 :
// FULL:         linalg.generic {{.*}} ins(%[[Q2]], %{{[0-9]+}} :
// FULL:         linalg.softmax
// FULL:         %[[H2:[0-9]+]] = linalg.generic {{.*}} ins(%[[XB]], %{{[0-9]+}} :
// FULL:         linalg.generic {{.*}} ins(%[[H2]], %arg4 :
// FULL-NOT:     %[[Q]]{{[^0-9]}}
// FULL-NOT:     %[[P]]{{[^0-9]}}
// FULL-NOT:     %[[H]]{{[^0-9]}}
// FULL:         return

// Tests the report: the layer and core found, what is recomputed, the
// values the backward no longer reads and the extra forward FLOPs (full:
// about one forward, a third of a step).
// REPORT:      par-recompute: @block_grad recompute=full: 1 layers, 1 attention cores
// REPORT-NEXT:   layer 0: 11 ops, 1 attention core(s), input tensor<4x8xf32>
// REPORT-NEXT:   recomputed: 9 ops; the backward no longer reads 6 forward values (704 bytes unsharded)
// REPORT-NEXT:   extra forward FLOPs: 2624 = 92.1% of the forward's 2850: +30.7% of a step (3 forwards), +32.4% of the gradient function's 8092
// SELREPORT:      par-recompute: @block_grad recompute=selective: 1 layers, 1 attention cores
// SELREPORT:        recomputed: 3 ops; the backward no longer reads 1 forward values (64 bytes unsharded)
// SELREPORT-NEXT:   extra forward FLOPs: 288 = 10.1% of the forward's 2850: +3.4% of a step (3 forwards)

#id2 = affine_map<(i, j) -> (i, j)>
func.func @block(%x: tensor<4x8xf32>, %wq: tensor<8x8xf32> {par.param},
                 %wk: tensor<8x8xf32> {par.param},
                 %wv: tensor<8x8xf32> {par.param},
                 %w1: tensor<8x8xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %scale = arith.constant 0.35 : f32
  %e48 = tensor.empty() : tensor<4x8xf32>
  %z48 = linalg.fill ins(%c0 : f32) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = linalg.matmul ins(%x, %wq : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %k = linalg.matmul ins(%x, %wk : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %v = linalg.matmul ins(%x, %wv : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e44 = tensor.empty() : tensor<4x4xf32>
  %z44 = linalg.fill ins(%c0 : f32) outs(%e44 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j, d) -> (i, d)>, affine_map<(i, j, d) -> (j, d)>, affine_map<(i, j, d) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%q, %k : tensor<4x8xf32>, tensor<4x8xf32>) outs(%z44 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %ms = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%s : tensor<4x4xf32>) outs(%e44 : tensor<4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %scale : f32
    linalg.yield %r : f32
  } -> tensor<4x4xf32>
  %p = linalg.softmax dimension(1) ins(%ms : tensor<4x4xf32>) outs(%e44 : tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(i, d, j) -> (i, j)>, affine_map<(i, d, j) -> (j, d)>, affine_map<(i, d, j) -> (i, d)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%p, %v : tensor<4x4xf32>, tensor<4x8xf32>) outs(%z48 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %h = linalg.add ins(%x, %c : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = linalg.matmul ins(%h, %w1 : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%f : tensor<4x8xf32>) outs(%e48 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %y = linalg.add ins(%h, %g : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e48 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e0 = tensor.empty() : tensor<f32>
  %z0 = linalg.fill ins(%c0 : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id2, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<4x8xf32>) outs(%z0 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
