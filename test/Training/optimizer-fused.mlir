// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw schedule=cosine warmup-steps=2 total-steps=10" | FileCheck %s
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=momentum schedule=cosine warmup-steps=2 total-steps=10" | FileCheck %s --check-prefix=MOM
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=sgd" | FileCheck %s --check-prefix=SGD
// RUN: par-opt %s --par-autodiff "--par-optimizer=optimizer=adamw schedule=cosine warmup-steps=2 total-steps=10" --par-spmd --par-lower-cpu=outline-kernels=false | FileCheck %s --check-prefix=LOWER

// Tests that par-optimizer's step computes what is the same for every
// element once per step: AdamW's bias corrections 1 - beta1^t and
// 1 - beta2^t and the cosine-scheduled learning rate are one 0-d generic
// on the step number, before the updates; each parameter's update is then
// one elementwise generic (parameter, gradient, m, v and the three scalars
// through scalar maps in; parameter, m, v out) whose body has no powf and
// no cos.
// CHECK-LABEL: func.func @loss_step(
// CHECK:         %[[G:.*]]:3 = call @loss_grad
// CHECK-NOT:     linalg.generic
// CHECK:         %[[S:.*]]:3 = linalg.generic {indexing_maps = [#[[M0:.*]], #[[M0]], #[[M0]], #[[M0]]], iterator_types = []} ins(%arg7 : tensor<f32>)
// CHECK:           math.powf
// CHECK:           math.powf
// CHECK:           math.cos
// CHECK:           linalg.yield
// CHECK-NOT:     math.
// CHECK:         %[[U1:.*]]:3 = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%arg1, %[[G]]#1, %arg3, %arg5, %[[S]]#0, %[[S]]#1, %[[S]]#2 : {{.*}}) outs({{.*}} : tensor<3x5xf32>, tensor<3x5xf32>, tensor<3x5xf32>)
// CHECK-NOT:       {{math.powf|math.cos}}
// CHECK:           math.sqrt
// CHECK-NOT:       {{math.powf|math.cos}}
// CHECK:           linalg.yield
// CHECK-NOT:     {{math.powf|math.cos}}
// CHECK:         %[[U2:.*]]:3 = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]} ins(%arg2, %[[G]]#2, %arg4, %arg6, %[[S]]#0, %[[S]]#1, %[[S]]#2 : {{.*}}) outs({{.*}} : tensor<5x2xf32>, tensor<5x2xf32>, tensor<5x2xf32>)
// CHECK-NOT:       {{math.powf|math.cos}}
// CHECK:           math.sqrt
// CHECK-NOT:       {{math.powf|math.cos}}
// CHECK:           linalg.yield
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[G]]#0, %[[U1]]#0, %[[U2]]#0, %[[U1]]#1, %[[U2]]#1, %[[U1]]#2, %[[U2]]#2,

// Tests that with momentum only the scheduled learning rate is a per-step
// scalar (one result), read by each update.
// MOM-LABEL: func.func @loss_step(
// MOM:         %[[S:.*]] = linalg.generic {{.*}}iterator_types = []} ins(%arg5 : tensor<f32>)
// MOM:           math.cos
// MOM-NOT:     math.cos
// MOM:         linalg.generic {{.*}} ins(%arg1, %{{.*}}#1, %arg3, %[[S]] : {{.*}})
// MOM:         linalg.generic {{.*}} ins(%arg2, %{{.*}}#2, %arg4, %[[S]] : {{.*}})
// MOM-NOT:     linalg.generic
// MOM:         return

// Tests that SGD with the constant schedule has no step number and no
// per-step scalars: the updates read parameter and gradient only.
// SGD-LABEL: func.func @loss_step(
// SGD-NOT:     iterator_types = []
// SGD:         linalg.generic {{.*}} ins(%arg1, %{{.*}}#1 : tensor<3x5xf32>, tensor<3x5xf32>)
// SGD:         linalg.generic {{.*}} ins(%arg2, %{{.*}}#2 : tensor<5x2xf32>, tensor<5x2xf32>)
// SGD:         return

// Tests that after lowering the powf and cos of the step are computed once,
// in the step's entry block (before any loop), and that the two update loop
// nests (one per parameter, each with its sqrt) call neither (kernels kept
// in the step, outline-kernels=false, so the order is visible).
// LOWER-LABEL: llvm.func @loss_step(
// LOWER:         llvm.call @loss_grad
// LOWER-NOT:     ^bb
// LOWER:         llvm.intr.pow
// LOWER-NOT:     ^bb
// LOWER:         llvm.intr.pow
// LOWER-NOT:     ^bb
// LOWER:         llvm.intr.cos
// LOWER-NOT:     {{llvm.intr.pow|llvm.intr.cos}}
// LOWER:         llvm.intr.sqrt
// LOWER-NOT:     {{llvm.intr.pow|llvm.intr.cos}}
// LOWER:         llvm.intr.sqrt
// LOWER-NOT:     {{llvm.intr.pow|llvm.intr.cos|llvm.intr.sqrt}}
// LOWER:         llvm.return
func.func @loss(%x: tensor<4x3xf32>, %w1: tensor<3x5xf32> {par.param}, %w2: tensor<5x2xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<4x3xf32>, tensor<3x5xf32>) outs(%z : tensor<4x5xf32>) -> tensor<4x5xf32>
  %e2 = tensor.empty() : tensor<4x2xf32>
  %z2 = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %m = linalg.matmul ins(%h, %w2 : tensor<4x5xf32>, tensor<5x2xf32>) outs(%z2 : tensor<4x2xf32>) -> tensor<4x2xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.reduce ins(%m : tensor<4x2xf32>) outs(%zl : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %l : tensor<f32>
}
