// RUN: par-opt %s --par-partition -split-input-file | FileCheck %s
// RUN: par-opt %s --par-partition -split-input-file | par-opt --par-verify-spmd | FileCheck %s

// Tests that split -> replicated gathers dim by dim.
// CHECK-LABEL: func.func @gather
// CHECK-SAME:    (%[[A:.*]]: tensor<4x4xf32> {par.global_type = tensor<8x16xf32>
// CHECK:         %[[G0:.*]] = par.all_gather %[[A]] on @mesh axes = ["x"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK:         %[[G1:.*]] = par.all_gather %[[G0]] on @mesh axes = ["y"] dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
// CHECK:         return %[[G1]] : tensor<8x16xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @gather(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<8x16xf32> {
  %0 = par.reshard %a <@mesh, [{}, {}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that replicated -> split is a local slice over both axes at once,
// in the target's major-to-minor order.
// CHECK-LABEL: func.func @slice
// CHECK:         par.all_slice %{{.*}} on @mesh axes = ["y", "x"] dim = 0 : tensor<8x16xf32> -> tensor<1x16xf32>
// CHECK-NOT:     par.all_gather
par.mesh @mesh ["x"=2, "y"=4]
func.func @slice(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.reshard %a <@mesh, [{"y", "x"}, {}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that moving a split from one dim to another is one all_to_all.
// CHECK-LABEL: func.func @move
// CHECK:         par.all_to_all %{{.*}} on @mesh axes = ["x"] split_dim = 1 concat_dim = 0 : tensor<4x16xf32> -> tensor<8x8xf32>
// CHECK-NOT:     par.all_gather
par.mesh @mesh ["x"=2, "y"=4]
func.func @move(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.reshard %a <@mesh, [{}, {"x"}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests partial values: partial -> replicated is an all_reduce over every
// partial axis; partial -> split is a reduce_scatter, keeping the partial
// axes the target still has.
// CHECK-LABEL: func.func @partial
// CHECK:         par.all_reduce %{{.*}} on @mesh axes = ["x", "y"] kind = sum : tensor<8x16xf32>
// CHECK:         par.reduce_scatter %{{.*}} on @mesh axes = ["y"] dim = 0 kind = sum : tensor<8x16xf32> -> tensor<2x16xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @partial(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial sum {"x", "y"}>}) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = par.reshard %a <@mesh, [{}, {}]> : tensor<8x16xf32>
  %1 = par.reshard %a <@mesh, [{"y"}, {}], partial sum {"x"}> : tensor<8x16xf32>
  return %0, %1 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Tests that a partial max is reduced with max.
// CHECK-LABEL: func.func @partial_max
// CHECK:         par.all_reduce %{{.*}} on @mesh axes = ["y"] kind = max : tensor<8x16xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @partial_max(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial max {"y"}>}) -> tensor<8x16xf32> {
  %0 = par.reshard %a <@mesh, [{}, {}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests a change needing several steps: axes swap dims.
// CHECK-LABEL: func.func @swap
// CHECK:         %[[G:.*]] = par.all_gather %{{.*}} on @mesh axes = ["x"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK:         %[[T:.*]] = par.all_to_all %[[G]] on @mesh axes = ["y"] split_dim = 0 concat_dim = 1 : tensor<8x4xf32> -> tensor<2x16xf32>
// CHECK:         par.all_slice %[[T]] on @mesh axes = ["x"] dim = 1 : tensor<2x16xf32> -> tensor<2x8xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @swap(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<8x16xf32> {
  %0 = par.reshard %a <@mesh, [{"y"}, {"x"}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that reordering the axes of one dim gathers and re-slices (the
// blocks a device holds change).
// CHECK-LABEL: func.func @reorder
// CHECK:         par.all_gather %{{.*}} on @mesh axes = ["x", "y"] dim = 0 : tensor<1x16xf32> -> tensor<8x16xf32>
// CHECK:         par.all_slice %{{.*}} on @mesh axes = ["y", "x"] dim = 0 : tensor<8x16xf32> -> tensor<1x16xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @reorder(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.reshard %a <@mesh, [{"y", "x"}, {}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Tests that a matmul whose contraction is split leaves a partial result
// that becomes a reduce_scatter when the result is wanted split, and that a
// sharding_constraint already met disappears.
// CHECK-LABEL: func.func @contraction
// CHECK-SAME:    -> (tensor<2x16xf32> {par.global_type = tensor<8x16xf32>, par.sharding = #par.sharding<@mesh, [{"y"}, {}]>})
// CHECK:         %[[M:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x2xf32>, tensor<2x16xf32>) outs(%{{.*}} : tensor<8x16xf32>)
// CHECK:         par.reduce_scatter %[[M]] on @mesh axes = ["y"] dim = 0 kind = sum : tensor<8x16xf32> -> tensor<2x16xf32>
// CHECK-NOT:     par.sharding_constraint
par.mesh @mesh ["x"=2, "y"=4]
func.func @contraction(%a: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>},
                       %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x16xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m = linalg.matmul {par.sharding = [#par.sharding<@mesh, [{"y"}, {}]>]} ins(%a, %b : tensor<8x8xf32>, tensor<8x16xf32>) outs(%z : tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = par.sharding_constraint %m <@mesh, [{"y"}, {}]> : tensor<8x16xf32>
  return %c : tensor<8x16xf32>
}

// -----

// Tests that reshapes get local shapes (expand_shape's output_shape too) and
// that a splat constant is rebuilt at the local shape.
// CHECK-LABEL: func.func @reshape
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [8, 2, 4] : tensor<8x8xf32> into tensor<8x2x4xf32>
// CHECK:         arith.constant dense<2.000000e+00> : tensor<8x2x4xf32>
// CHECK:         tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : tensor<8x2x4xf32> into tensor<8x8xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @reshape(%a: tensor<8x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}) -> tensor<8x32xf32> {
  %x = tensor.expand_shape %a [[0], [1, 2]] output_shape [8, 8, 4] {par.sharding = [#par.sharding<@mesh, [{}, {"y"}, {}]>]} : tensor<8x32xf32> into tensor<8x8x4xf32>
  %c = arith.constant {par.sharding = [#par.sharding<@mesh, [{}, {"y"}, {}]>]} dense<2.0> : tensor<8x8x4xf32>
  %m = arith.mulf %x, %c {par.sharding = [#par.sharding<@mesh, [{}, {"y"}, {}]>]} : tensor<8x8x4xf32>
  %y = tensor.collapse_shape %m [[0], [1, 2]] {par.sharding = [#par.sharding<@mesh, [{}, {"y"}]>]} : tensor<8x8x4xf32> into tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Tests that a slice of a split tensor keeps untouched dims split, with the
// local size in its static sizes.
// CHECK-LABEL: func.func @extract
// CHECK:         tensor.extract_slice %{{.*}}[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @extract(%a: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> tensor<8x4xf32> {
  %s = tensor.extract_slice %a[0, 0] [8, 4] [1, 1] {par.sharding = [#par.sharding<@mesh, [{"y"}, {}]>]} : tensor<8x8xf32> to tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// Tests that a value an op needs differently from how it is held is
// resharded right before the op, and that control flow keeps local types.
// CHECK-LABEL: func.func @loop
// CHECK:         scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<4x16xf32>)
// CHECK:           math.tanh %[[ACC]] : tensor<4x16xf32>
// CHECK:           scf.yield {{.*}} : tensor<4x16xf32>
par.mesh @mesh ["x"=2, "y"=4]
func.func @loop(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (tensor<8x16xf32>) {
    %t = math.tanh %acc {par.sharding = [#par.sharding<@mesh, [{"x"}, {}]>]} : tensor<8x16xf32>
    scf.yield %t : tensor<8x16xf32>
  } {par.sharding = [#par.sharding<@mesh, [{"x"}, {}]>]}
  return %r : tensor<8x16xf32>
}

// -----

// Tests that functions without a builtin function type (already lowered to
// the LLVM dialect) are left alone.
// CHECK-LABEL: llvm.func @lowered(
// CHECK:         llvm.return
par.mesh @mesh ["dp"=2]
llvm.func @lowered(%a: !llvm.ptr) {
  llvm.return
}
