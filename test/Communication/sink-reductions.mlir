// RUN: par-opt %s --par-sink-reductions --split-input-file | FileCheck %s
// RUN: par-opt %s "--par-sink-reductions=narrow-data-parallel=true" --split-input-file | FileCheck %s --check-prefix=NARROW

// Tests par-sink-reductions on partitioned programs: partial values are
// added, scaled, cast and reshaped before one reduction, where it gains
// (a merge, fewer bytes); nothing moves otherwise.

par.mesh @mesh ["dp"=2, "tp"=2]

// Three partial input-gradients (q, k, v) added: one reduction.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<8x16xf32>, %[[C:.*]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[AB:.*]] = arith.addf %[[A]], %[[B]]
// CHECK-NEXT: %[[ABC:.*]] = arith.addf %[[AB]], %[[C]]
// CHECK-NEXT: %[[R:.*]] = par.all_reduce %[[ABC]] on @mesh axes = ["tp"] kind = sum
// CHECK-NEXT: return %[[R]]
func.func @qkv(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %ra = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %rb = par.all_reduce %b on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %rc = par.all_reduce %c on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %s = arith.addf %ra, %rb : tensor<8x16xf32>
  %t = arith.addf %s, %rc : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// A narrowing cast halves the bytes: the reduction runs in bf16.
// CHECK-LABEL: func.func @narrow
// CHECK-NEXT: %[[T:.*]] = arith.truncf %{{.*}} : tensor<8x16xf32> to tensor<8x16xbf16>
// CHECK-NEXT: par.all_reduce %[[T]] on @mesh axes = ["tp"] kind = sum : tensor<8x16xbf16>
func.func @narrow(%a: tensor<8x16xf32>) -> tensor<8x16xbf16> {
  %r = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %t = arith.truncf %r : tensor<8x16xf32> to tensor<8x16xbf16>
  return %t : tensor<8x16xbf16>
}

// A widening cast would double them: the reduction stays.
// CHECK-LABEL: func.func @widen
// CHECK-NEXT: par.all_reduce %{{.*}} : tensor<8x16xbf16>
// CHECK-NEXT: arith.extf
func.func @widen(%a: tensor<8x16xbf16>) -> tensor<8x16xf32> {
  %r = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xbf16>
  %t = arith.extf %r : tensor<8x16xbf16> to tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// Reshapes and a scale by a value replicated over tp pass the partial value
// on to the add that merges the two reductions.
// CHECK-LABEL: func.func @chain
// CHECK-NOT: par.all_reduce
// CHECK: tensor.collapse_shape
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-NEXT: %[[R:.*]] = par.all_reduce
// CHECK-NOT: par.all_reduce
// CHECK: return %[[R]]
func.func @chain(%a: tensor<4x2x16xf32>, %b: tensor<8x16xf32>, %s: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %ra = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<4x2x16xf32>
  %rb = par.all_reduce %b on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %c = tensor.collapse_shape %ra [[0, 1], [2]] : tensor<4x2x16xf32> into tensor<8x16xf32>
  %m = arith.mulf %c, %s : tensor<8x16xf32>
  %t = arith.addf %m, %rb : tensor<8x16xf32>
  return %t : tensor<8x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// No move: a product with a value split over tp (it differs between the
// devices being summed), a non-linear op, a sum of reductions over different
// axes, an add of a replicated value, a reduction used twice, a scale with
// nothing to gain after it.
// CHECK-LABEL: func.func @stays
// CHECK-COUNT-8: par.all_reduce
// CHECK-NOT: par.all_reduce
// CHECK: return
func.func @stays(%a: tensor<8x16xf32>, %w: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %u: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %r0 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %r1 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %m = arith.mulf %r0, %w : tensor<8x16xf32>
  %n = arith.addf %m, %r1 : tensor<8x16xf32>
  %r2 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %e = math.exp %r2 : tensor<8x16xf32>
  %r3 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %r4 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>
  %x = arith.addf %r3, %r4 : tensor<8x16xf32>
  %r5 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %y = arith.addf %r5, %u : tensor<8x16xf32>
  %r6 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %z = arith.addf %r6, %r6 : tensor<8x16xf32>
  %q = arith.mulf %z, %r6 : tensor<8x16xf32>
  %r7 = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %v = arith.mulf %r7, %u : tensor<8x16xf32>
  return %n, %e, %x, %y, %q, %v : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// A slice of a reduced value is a reduce_scatter; over part of the axes,
// the rest is reduced after it (on the smaller block).
// CHECK-LABEL: func.func @scatter
// CHECK-NEXT: %[[S:.*]] = par.reduce_scatter %{{.*}} on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[R:.*]] = par.all_reduce %[[S]] on @mesh axes = ["tp"] kind = sum : tensor<4x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @scatter(%a: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %r = par.all_reduce %a on @mesh axes = ["dp", "tp"] kind = sum : tensor<8x16xf32>
  %s = par.all_slice %r on @mesh axes = ["dp"] dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  return %s : tensor<4x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// A linalg sum of two reductions (as the optimizer writes it), and a
// row-sum of a partial value into a zero init (fewer bytes after it).
// CHECK-LABEL: func.func @generic
// CHECK: linalg.generic
// CHECK-NOT: par.all_reduce
// CHECK: par.all_reduce %{{.*}} : tensor<8x16xf32>
// CHECK: linalg.generic
// CHECK: par.all_reduce %{{.*}} : tensor<8xf32>
// CHECK-NOT: par.all_reduce
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @generic(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %ra = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>
  %rb = par.all_reduce %b on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%ra, %rb : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.addf %x, %y : f32
    linalg.yield %z : f32
  } -> tensor<8x16xf32>
  %rc = par.all_reduce %a on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %rows = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%rc : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %o, %x : f32
    linalg.yield %z : f32
  } -> tensor<8xf32>
  return %s, %rows : tensor<8x16xf32>, tensor<8xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// Across calls: two micro-batches' gradients, each returned reduced by the
// callee, are summed before one reduction in the caller; the call targets a
// private clone returning the partial gradient. The public callee stays.
// CHECK-LABEL: func.func @grad
// CHECK: par.all_reduce
// CHECK-LABEL: func.func private @grad_partial
// CHECK-SAME: par.sharding = #par.sharding<@mesh, [{}, {}], partial sum {"dp"}>
// CHECK-NOT: par.all_reduce
// CHECK: return
// CHECK-LABEL: func.func @step
// CHECK-NEXT: %[[G0:.*]] = call @grad_partial
// CHECK-NEXT: %[[G1:.*]] = call @grad_partial
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[G0]], %[[G1]]
// CHECK-NEXT: %[[R:.*]] = par.all_reduce %[[S]] on @mesh axes = ["dp"]
// CHECK-NEXT: return %[[R]]
func.func @grad(%x: tensor<8x16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %e = math.exp %x : tensor<8x16xf32>
  %r = par.all_reduce %e on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
func.func @step(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %g0 = call @grad(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %g1 = call @grad(%y) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = arith.addf %g0, %g1 : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// One call with nothing to gain in the caller keeps its callee.
// CHECK-LABEL: func.func @step1
// CHECK-NEXT: call @grad(
// CHECK-NOT: _partial
func.func @grad(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = math.exp %x : tensor<8x16xf32>
  %r = par.all_reduce %e on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}
func.func @step1(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %g = call @grad(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %e = math.exp %g : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}

// -----

par.mesh @mesh ["dp"=2, "tp"=2]

// In a forward (par.param arguments) whose batch is split over dp, a
// reduction over dp keeps its type through a narrowing cast unless
// narrow-data-parallel (grad-reduce=compute): Megatron reduces master-weight
// gradients in f32. Over tp it narrows either way.
// CHECK-LABEL: func.func @fwd
// CHECK: par.all_reduce %{{.*}} axes = ["dp"] kind = sum : tensor<8xf32>
// CHECK: par.all_reduce %{{.*}} axes = ["tp"] kind = sum : tensor<8xbf16>
// NARROW-LABEL: func.func @fwd
// NARROW: par.all_reduce %{{.*}} axes = ["dp"] kind = sum : tensor<8xbf16>
// NARROW: par.all_reduce %{{.*}} axes = ["tp"] kind = sum : tensor<8xbf16>
func.func @fwd(%x: tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<8xf32> {par.param}) -> (tensor<8xbf16>, tensor<8xbf16>) {
  %r = par.all_reduce %w on @mesh axes = ["dp"] kind = sum : tensor<8xf32>
  %t = arith.truncf %r : tensor<8xf32> to tensor<8xbf16>
  %q = par.all_reduce %w on @mesh axes = ["tp"] kind = sum : tensor<8xf32>
  %u = arith.truncf %q : tensor<8xf32> to tensor<8xbf16>
  return %t, %u : tensor<8xbf16>, tensor<8xbf16>
}
