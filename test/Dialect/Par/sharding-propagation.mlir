// RUN: par-opt %s --par-sharding-propagation -split-input-file | FileCheck %s
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %s --par-sharding-propagation -split-input-file | par-opt --par-sharding-propagation -split-input-file | FileCheck %s

// Tests forward propagation from an argument through elementwise ops and a
// matmul (the batch split reaches the output; the weight stays replicated).
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    -> (tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
// CHECK:         math.exp %{{.*}} {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]}
// CHECK:         linalg.matmul {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]}
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @forward(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<16x4xf32>, %o: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = math.exp %x : tensor<8x16xf32>
  %m = linalg.matmul ins(%e, %w : tensor<8x16xf32>, tensor<16x4xf32>) outs(%o : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %m : tensor<8x4xf32>
}

// -----

// Tests backward propagation: a result annotation reaches the arguments.
// CHECK-LABEL: func.func @backward
// CHECK-SAME:    (%{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>})
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @backward(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) {
  %s = arith.addf %a, %b : tensor<8x16xf32>
  %t = math.tanh %s : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

// Tests that explicit annotations win: the annotated (replicated) argument
// keeps its sharding although its user's other operand is split.
// CHECK-LABEL: func.func @annotation_wins
// CHECK-SAME:    (%{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @annotation_wins(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                           %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> tensor<8x16xf32> {
  %s = arith.addf %a, %b : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// Tests that a conflict is settled by the least bytes moved: the big operand
// keeps its split and the small one is the one resharded.
// CHECK-LABEL: func.func @least_bytes
// CHECK:         linalg.generic {{.*}}par.sharding = [#par.sharding<@mesh, [{}, {"tp"}]>]
par.mesh @mesh ["dp"=2, "tp"=4]
#m = affine_map<(i, j) -> (i, j)>
#t = affine_map<(i, j) -> (j, i)>
func.func @least_bytes(%big: tensor<64x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                       %small: tensor<64x64xf16> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                       %o: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %r = linalg.generic {indexing_maps = [#m, #t, #m], iterator_types = ["parallel", "parallel"]}
      ins(%big, %small : tensor<64x64xf32>, tensor<64x64xf16>) outs(%o : tensor<64x64xf32>) {
  ^bb0(%a: f32, %b: f16, %c: f32):
    %e = arith.extf %b : f16 to f32
    %s = arith.addf %a, %e : f32
    linalg.yield %s : f32
  } -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}

// -----

// Tests that ties in cost go to the first operand (determinism).
// CHECK-LABEL: func.func @tie_first_operand
// CHECK:         arith.addf %{{.*}}, %{{.*}} {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]}
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @tie_first_operand(%a: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                             %b: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x8xf32> {
  %s = arith.addf %a, %b : tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// Tests that splits extend across ops (dp on dim 0 from one operand, tp on
// dim 1 from the other) into one 2-D sharding.
// CHECK-LABEL: func.func @combine
// CHECK:         arith.mulf %{{.*}}, %{{.*}} {par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}]>]}
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @combine(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                   %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x16xf32> {
  %s = arith.mulf %a, %b : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// Tests that a split that does not divide a loop is not propagated, and that
// a blocked dimension (softmax's) is not split.
// CHECK-LABEL: func.func @blocked
// CHECK:         linalg.softmax {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]}
// CHECK:         tensor.expand_shape {{.*}} output_shape [6, 2, 8] : tensor<6x16xf32>
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @blocked(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %o: tensor<8x16xf32>,
                   %c: tensor<6x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> (tensor<8x16xf32>, tensor<6x2x8xf32>) {
  %s = linalg.softmax dimension(1) ins(%a : tensor<8x16xf32>) outs(%o : tensor<8x16xf32>) -> tensor<8x16xf32>
  // tp=4 does not divide the 2 groups of 8.
  %x = tensor.expand_shape %c [[0], [1, 2]] output_shape [6, 2, 8] : tensor<6x16xf32> into tensor<6x2x8xf32>
  return %s, %x : tensor<8x16xf32>, tensor<6x2x8xf32>
}

// -----

// Tests that loop-carried values share one sharding with the loop's init
// and results, and that a constraint inside the body reaches them.
// CHECK-LABEL: func.func @scf_for
// CHECK-SAME:    (%{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>})
// CHECK:         scf.for
// CHECK:           math.tanh {{.*}} {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}]>]}
// CHECK:         } {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}]>]}
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @scf_for(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (tensor<8x16xf32>) {
    %c = par.sharding_constraint %acc <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
    %t = math.tanh %c : tensor<8x16xf32>
    scf.yield %t : tensor<8x16xf32>
  }
  return %r : tensor<8x16xf32>
}

// -----

// Tests scf.if (both branches and the result share a sharding) and
// func.call (operands and results tie to the callee's arguments and
// returns).
// CHECK-LABEL: func.func @callee
// CHECK-SAME:    (%{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>})
// CHECK-LABEL: func.func @caller
// CHECK:         call @callee({{.*}}) {par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}]>]}
// CHECK:         math.exp {{.*}} {par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}]>]}
// CHECK:         } {par.sharding = [#par.sharding<@mesh, [{"dp"}, {"tp"}]>]}
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @callee(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %t = math.tanh %a : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}
func.func @caller(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %c: i1) -> tensor<8x16xf32> {
  %r = func.call @callee(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = scf.if %c -> tensor<8x16xf32> {
    %e = math.exp %r : tensor<8x16xf32>
    scf.yield %e : tensor<8x16xf32>
  } else {
    scf.yield %r : tensor<8x16xf32>
  }
  return %s : tensor<8x16xf32>
}

// -----

// Tests a multi-block function: branch operands and block arguments share a
// sharding, found from a constraint in the last block.
// CHECK-LABEL: func.func @blocks
// CHECK-SAME:    (%{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK:         math.exp {{.*}} {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}]>]}
par.mesh @mesh ["dp"=2, "tp"=4]
func.func @blocks(%x: tensor<8x16xf32>, %c: i1) -> tensor<8x16xf32> {
  cf.cond_br %c, ^a(%x : tensor<8x16xf32>), ^b(%x : tensor<8x16xf32>)
^a(%y: tensor<8x16xf32>):
  %t = math.exp %y : tensor<8x16xf32>
  cf.br ^b(%t : tensor<8x16xf32>)
^b(%z: tensor<8x16xf32>):
  %s = par.sharding_constraint %z <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

// Tests two meshes in one module: each function uses its own.
// CHECK-LABEL: func.func @on_a
// CHECK:         math.exp {{.*}} {par.sharding = [#par.sharding<@a, [{"x"}]>]}
// CHECK-LABEL: func.func @on_b
// CHECK:         math.exp {{.*}} {par.sharding = [#par.sharding<@b, [{"y", "z"}]>]}
par.mesh @a ["x"=8]
par.mesh @b ["y"=2, "z"=2]
func.func @on_a(%x: tensor<16xf32> {par.sharding = #par.sharding<@a, [{"x"}]>}) -> tensor<16xf32> {
  %e = math.exp %x : tensor<16xf32>
  return %e : tensor<16xf32>
}
func.func @on_b(%x: tensor<16xf32> {par.sharding = #par.sharding<@b, [{"y", "z"}]>}) -> tensor<16xf32> {
  %e = math.exp %x : tensor<16xf32>
  return %e : tensor<16xf32>
}
