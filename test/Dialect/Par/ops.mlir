// RUN: par-opt %s | par-opt | FileCheck %s
// RUN: par-opt %s --mlir-print-op-generic | par-opt | FileCheck %s

// Round-trip tests for every op and attribute of the par dialect. The second
// RUN line goes through the generic op form first, so both the custom and the
// generic printers/parsers are exercised.

//===----------------------------------------------------------------------===//
// par.mesh
//===----------------------------------------------------------------------===//

// Tests that several meshes (2-D, 1-D and 3-D) can live in one module and keep
// their axis names, axis order and sizes.
// CHECK-LABEL: module {
// CHECK-NEXT:    par.mesh @mesh ["dp"=2, "tp"=4]
// CHECK-NEXT:    par.mesh @line ["i"=8]
// CHECK-NEXT:    par.mesh @cube ["x"=2, "y"=2, "z"=2]
par.mesh @mesh ["dp"=2, "tp"=4]
par.mesh @line ["i"=8]
par.mesh @cube ["x"=2, "y"=2, "z"=2]

//===----------------------------------------------------------------------===//
// #par.sharding on function arguments and results
//===----------------------------------------------------------------------===//

// Tests that a fully replicated sharding (every dimension `{}`) round-trips.
// CHECK-LABEL: func.func @replicated(
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
func.func @replicated(%arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  return
}

// Tests that a sharding splitting one dimension over one axis round-trips.
// CHECK-LABEL: func.func @one_axis(
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
func.func @one_axis(%arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
  return
}

// Tests that several axes on one dimension keep their (major to minor) order,
// also when it differs from the mesh's axis order.
// CHECK-LABEL: func.func @several_axes_one_dim(
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp", "dp"}]>}
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"dp", "tp"}]>})
func.func @several_axes_one_dim(
    %arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp", "dp"}]>},
    %arg1: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"dp", "tp"}]>}) {
  return
}

// Tests that a sharding over a 3-D mesh with axes on several dimensions
// round-trips.
// CHECK-LABEL: func.func @cube_sharding(
// CHECK-SAME:    %{{.*}}: tensor<8x4x6xf32> {par.sharding = #par.sharding<@cube, [{"z", "x"}, {}, {"y"}]>})
func.func @cube_sharding(%arg0: tensor<8x4x6xf32> {par.sharding = #par.sharding<@cube, [{"z", "x"}, {}, {"y"}]>}) {
  return
}

// Tests that a rank-0 sharding `[]` on a rank-0 tensor round-trips.
// CHECK-LABEL: func.func @rank0(
// CHECK-SAME:    %{{.*}}: tensor<f32> {par.sharding = #par.sharding<@line, []>})
func.func @rank0(%arg0: tensor<f32> {par.sharding = #par.sharding<@line, []>}) {
  return
}

// Tests that `partial sum`, `partial max` and `partial min` clauses keep their
// reduction kind and partial axes, alone and next to split dimensions.
// CHECK-LABEL: func.func @partial(
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial sum {"tp"}>}
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial max {"tp"}>}
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial min {"tp", "dp"}>}
// CHECK-SAME:    %{{.*}}: tensor<8x4x6xf32> {par.sharding = #par.sharding<@cube, [{}, {"y"}, {}], partial sum {"z", "x"}>})
func.func @partial(
    %arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial sum {"tp"}>},
    %arg1: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial max {"tp"}>},
    %arg2: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], partial min {"tp", "dp"}>},
    %arg3: tensor<8x4x6xf32> {par.sharding = #par.sharding<@cube, [{}, {"y"}, {}], partial sum {"z", "x"}>}) {
  return
}

// Tests that shardings on function results round-trip, next to shardings on
// arguments.
// CHECK-LABEL: func.func @result_sharding(
// CHECK-SAME:    %{{.*}}: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>})
// CHECK-SAME:    -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial sum {"tp"}>},
// CHECK-SAME:        tensor<f32> {par.sharding = #par.sharding<@mesh, []>})
func.func @result_sharding(%arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>})
    -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial sum {"tp"}>},
        tensor<f32> {par.sharding = #par.sharding<@mesh, []>}) {
  %0 = tensor.empty() : tensor<f32>
  return %arg0, %0 : tensor<8x16xf32>, tensor<f32>
}

// Tests that shardings on the arguments and results of a function declaration
// (no body) round-trip.
// CHECK-LABEL: func.func private @declaration(
// CHECK-SAME:    tensor<8xf32> {par.sharding = #par.sharding<@line, [{"i"}]>})
// CHECK-SAME:    -> (tensor<8xf32> {par.sharding = #par.sharding<@line, [{}], partial max {"i"}>})
func.func private @declaration(tensor<8xf32> {par.sharding = #par.sharding<@line, [{"i"}]>})
    -> (tensor<8xf32> {par.sharding = #par.sharding<@line, [{}], partial max {"i"}>})

//===----------------------------------------------------------------------===//
// par.global_type
//===----------------------------------------------------------------------===//

// Tests that `par.global_type` on function arguments (alone and next to
// `par.sharding`) and on results round-trips with its tensor type.
// CHECK-LABEL: func.func @global_type(
// CHECK-SAME:    %{{.*}}: tensor<4x16xf32> {par.global_type = tensor<8x16xf32>, par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME:    %{{.*}}: tensor<2xi32> {par.global_type = tensor<8xi32>})
// CHECK-SAME:    -> (tensor<4x16xf32> {par.global_type = tensor<8x16xf32>})
func.func @global_type(
    %arg0: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<8x16xf32>},
    %arg1: tensor<2xi32> {par.global_type = tensor<8xi32>})
    -> (tensor<4x16xf32> {par.global_type = tensor<8x16xf32>}) {
  return %arg0 : tensor<4x16xf32>
}

//===----------------------------------------------------------------------===//
// Op-level par.sharding list
//===----------------------------------------------------------------------===//

// Tests that the op-level list form `par.sharding = [...]` on an op with one
// tensor result round-trips, including a partial sharding.
// CHECK-LABEL: func.func @op_sharding(
// CHECK-SAME:    %[[A:.*]]: tensor<8x16xf32>
// CHECK:         %[[S:.*]] = arith.addf %[[A]], %[[A]] {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]} : tensor<8x16xf32>
// CHECK:         arith.mulf %[[S]], %[[S]] {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}], partial min {"dp"}>]} : tensor<8x16xf32>
func.func @op_sharding(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = arith.addf %arg0, %arg0 {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>]} : tensor<8x16xf32>
  %1 = arith.mulf %0, %0 {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}], partial min {"dp"}>]} : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Tests that a `unit` entry is accepted in the op-level list for a non-tensor
// result.
// CHECK-LABEL: func.func @op_sharding_unit(
// CHECK:         arith.constant {par.sharding = [unit]} 1 : i32
func.func @op_sharding_unit() -> i32 {
  %0 = arith.constant {par.sharding = [unit]} 1 : i32
  return %0 : i32
}

//===----------------------------------------------------------------------===//
// par.sharding_constraint and par.reshard
//===----------------------------------------------------------------------===//

// Tests that par.sharding_constraint round-trips with its operand, sharding
// (split and partial forms) and type.
// CHECK-LABEL: func.func @sharding_constraint(
// CHECK-SAME:    %[[A:.*]]: tensor<8x16xf32>
// CHECK:         %[[C0:.*]] = par.sharding_constraint %[[A]] <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
// CHECK:         par.sharding_constraint %[[C0]] <@mesh, [{"dp"}, {}], partial sum {"tp"}> : tensor<8x16xf32>
func.func @sharding_constraint(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.sharding_constraint %arg0 <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
  %1 = par.sharding_constraint %0 <@mesh, [{"dp"}, {}], partial sum {"tp"}> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Tests that par.reshard round-trips, on a 2-D and a 3-D mesh and on a
// rank-0 tensor.
// CHECK-LABEL: func.func @reshard(
// CHECK-SAME:    %[[A:[^:]*]]: tensor<8x16xf32>, %[[B:[^:]*]]: tensor<f32>
// CHECK:         %[[R0:.*]] = par.reshard %[[A]] <@mesh, [{"dp"}, {}]> : tensor<8x16xf32>
// CHECK:         par.reshard %[[R0]] <@cube, [{"z", "x"}, {"y"}]> : tensor<8x16xf32>
// CHECK:         par.reshard %[[B]] <@line, [], partial min {"i"}> : tensor<f32>
func.func @reshard(%arg0: tensor<8x16xf32>, %arg1: tensor<f32>) -> (tensor<8x16xf32>, tensor<f32>) {
  %0 = par.reshard %arg0 <@mesh, [{"dp"}, {}]> : tensor<8x16xf32>
  %1 = par.reshard %0 <@cube, [{"z", "x"}, {"y"}]> : tensor<8x16xf32>
  %2 = par.reshard %arg1 <@line, [], partial min {"i"}> : tensor<f32>
  return %1, %2 : tensor<8x16xf32>, tensor<f32>
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// Tests that par.all_reduce round-trips with every reduction kind (sum, max,
// min, avg) and with one or several axes.
// CHECK-LABEL: func.func @all_reduce(
// CHECK-SAME:    %[[A:.*]]: tensor<8x16xf32>
// CHECK:         par.all_reduce %[[A]] on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
// CHECK:         par.all_reduce %[[A]] on @mesh axes = ["dp"] kind = max : tensor<8x16xf32>
// CHECK:         par.all_reduce %[[A]] on @mesh axes = ["tp", "dp"] kind = min : tensor<8x16xf32>
// CHECK:         par.all_reduce %[[A]] on @cube axes = ["x", "y", "z"] kind = avg : tensor<8x16xf32>
func.func @all_reduce(%arg0: tensor<8x16xf32>) {
  %0 = par.all_reduce %arg0 on @mesh axes = ["tp"] kind = sum : tensor<8x16xf32>
  %1 = par.all_reduce %arg0 on @mesh axes = ["dp"] kind = max : tensor<8x16xf32>
  %2 = par.all_reduce %arg0 on @mesh axes = ["tp", "dp"] kind = min : tensor<8x16xf32>
  %3 = par.all_reduce %arg0 on @cube axes = ["x", "y", "z"] kind = avg : tensor<8x16xf32>
  return
}

// Tests that par.all_gather round-trips with its axes, dim and the result
// type grown by the group size (4 on "tp", 8 on "dp" x "tp"), and with a
// dynamic dimension.
// CHECK-LABEL: func.func @all_gather(
// CHECK-SAME:    %[[A:[^:]*]]: tensor<8x4xf32>, %[[B:[^:]*]]: tensor<?x4xf32>
// CHECK:         par.all_gather %[[A]] on @mesh axes = ["tp"] dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
// CHECK:         par.all_gather %[[A]] on @mesh axes = ["dp", "tp"] dim = 0 : tensor<8x4xf32> -> tensor<64x4xf32>
// CHECK:         par.all_gather %[[B]] on @line axes = ["i"] dim = 0 : tensor<?x4xf32> -> tensor<?x4xf32>
func.func @all_gather(%arg0: tensor<8x4xf32>, %arg1: tensor<?x4xf32>) {
  %0 = par.all_gather %arg0 on @mesh axes = ["tp"] dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  %1 = par.all_gather %arg0 on @mesh axes = ["dp", "tp"] dim = 0 : tensor<8x4xf32> -> tensor<64x4xf32>
  %2 = par.all_gather %arg1 on @line axes = ["i"] dim = 0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return
}

// Tests that par.reduce_scatter round-trips with its axes, dim, reduction
// kind and the result type shrunk by the group size.
// CHECK-LABEL: func.func @reduce_scatter(
// CHECK-SAME:    %[[A:.*]]: tensor<16x8xf32>
// CHECK:         par.reduce_scatter %[[A]] on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK:         par.reduce_scatter %[[A]] on @mesh axes = ["tp"] dim = 1 kind = max : tensor<16x8xf32> -> tensor<16x2xf32>
// CHECK:         par.reduce_scatter %[[A]] on @cube axes = ["x", "z"] dim = 0 kind = min : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK:         par.reduce_scatter %[[A]] on @mesh axes = ["tp"] dim = 0 kind = avg : tensor<16x8xf32> -> tensor<4x8xf32>
func.func @reduce_scatter(%arg0: tensor<16x8xf32>) {
  %0 = par.reduce_scatter %arg0 on @mesh axes = ["dp"] dim = 0 kind = sum : tensor<16x8xf32> -> tensor<8x8xf32>
  %1 = par.reduce_scatter %arg0 on @mesh axes = ["tp"] dim = 1 kind = max : tensor<16x8xf32> -> tensor<16x2xf32>
  %2 = par.reduce_scatter %arg0 on @cube axes = ["x", "z"] dim = 0 kind = min : tensor<16x8xf32> -> tensor<4x8xf32>
  %3 = par.reduce_scatter %arg0 on @mesh axes = ["tp"] dim = 0 kind = avg : tensor<16x8xf32> -> tensor<4x8xf32>
  return
}

// Tests that par.all_to_all round-trips with its axes, split_dim, concat_dim
// and the result type (split dim divided, concat dim multiplied).
// CHECK-LABEL: func.func @all_to_all(
// CHECK-SAME:    %[[A:.*]]: tensor<2x8xf32>
// CHECK:         par.all_to_all %[[A]] on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
// CHECK:         par.all_to_all %[[A]] on @mesh axes = ["dp"] split_dim = 0 concat_dim = 1 : tensor<2x8xf32> -> tensor<1x16xf32>
func.func @all_to_all(%arg0: tensor<2x8xf32>) {
  %0 = par.all_to_all %arg0 on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 : tensor<2x8xf32> -> tensor<8x2xf32>
  %1 = par.all_to_all %arg0 on @mesh axes = ["dp"] split_dim = 0 concat_dim = 1 : tensor<2x8xf32> -> tensor<1x16xf32>
  return
}

// Tests that par.broadcast round-trips with its axes and root coordinates
// (one per axis).
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME:    %[[A:.*]]: tensor<8xf32>
// CHECK:         par.broadcast %[[A]] on @mesh axes = ["tp"] root = [3] : tensor<8xf32>
// CHECK:         par.broadcast %[[A]] on @cube axes = ["x", "z"] root = [1, 0] : tensor<8xf32>
func.func @broadcast(%arg0: tensor<8xf32>) {
  %0 = par.broadcast %arg0 on @mesh axes = ["tp"] root = [3] : tensor<8xf32>
  %1 = par.broadcast %arg0 on @cube axes = ["x", "z"] root = [1, 0] : tensor<8xf32>
  return
}

// Tests that par.all_slice round-trips with its axes, dim and the result type
// shrunk by the group size.
// CHECK-LABEL: func.func @all_slice(
// CHECK-SAME:    %[[A:.*]]: tensor<8x16xf32>
// CHECK:         par.all_slice %[[A]] on @mesh axes = ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
// CHECK:         par.all_slice %[[A]] on @mesh axes = ["tp", "dp"] dim = 0 : tensor<8x16xf32> -> tensor<1x16xf32>
func.func @all_slice(%arg0: tensor<8x16xf32>) {
  %0 = par.all_slice %arg0 on @mesh axes = ["tp"] dim = 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  %1 = par.all_slice %arg0 on @mesh axes = ["tp", "dp"] dim = 0 : tensor<8x16xf32> -> tensor<1x16xf32>
  return
}

// Tests that par.send and par.recv round-trip with their axes, peer
// coordinates and type, with the default tag (not printed) and with an
// explicit tag.
// CHECK-LABEL: func.func @send_recv(
// CHECK-SAME:    %[[A:.*]]: tensor<4x16xf32>
// CHECK:         par.send %[[A]] on @line axes = ["i"] dest = [1] : tensor<4x16xf32>
// CHECK:         par.send %[[A]] on @cube axes = ["x", "y"] dest = [1, 0] {tag = 7 : i64} : tensor<4x16xf32>
// CHECK:         par.recv on @line axes = ["i"] source = [0] : tensor<4x16xf32>
// CHECK:         par.recv on @cube axes = ["y", "x"] source = [0, 1] {tag = 7 : i64} : tensor<4x16xf32>
func.func @send_recv(%arg0: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  par.send %arg0 on @line axes = ["i"] dest = [1] : tensor<4x16xf32>
  par.send %arg0 on @cube axes = ["x", "y"] dest = [1, 0] {tag = 7} : tensor<4x16xf32>
  %0 = par.recv on @line axes = ["i"] source = [0] : tensor<4x16xf32>
  %1 = par.recv on @cube axes = ["y", "x"] source = [0, 1] {tag = 7} : tensor<4x16xf32>
  return %0, %1 : tensor<4x16xf32>, tensor<4x16xf32>
}

//===----------------------------------------------------------------------===//
// Forward references
//===----------------------------------------------------------------------===//

// Tests that annotations and collectives may refer to a mesh declared later
// in the module.
// CHECK-LABEL: func.func @forward_mesh(
// CHECK-SAME:    %[[A:.*]]: tensor<8xf32> {par.sharding = #par.sharding<@late, [{"p"}]>})
// CHECK:         par.sharding_constraint %[[A]] <@late, [{}], partial sum {"p"}> : tensor<8xf32>
// CHECK:         par.all_reduce %{{.*}} on @late axes = ["p"] kind = sum : tensor<8xf32>
// CHECK:       par.mesh @late ["p"=2]
func.func @forward_mesh(%arg0: tensor<8xf32> {par.sharding = #par.sharding<@late, [{"p"}]>}) -> tensor<8xf32> {
  %0 = par.sharding_constraint %arg0 <@late, [{}], partial sum {"p"}> : tensor<8xf32>
  %1 = par.all_reduce %0 on @late axes = ["p"] kind = sum : tensor<8xf32>
  return %1 : tensor<8xf32>
}
par.mesh @late ["p"=2]

// Tests that the buffer forms of the collectives round-trip.
// CHECK-LABEL: func.func @buffers(
// CHECK:         par.buffer_all_reduce %{{.*}}, %{{.*}} on @late axes = ["p"] kind = max : memref<8xf32>, memref<8xf32>
// CHECK:         par.buffer_all_gather %{{.*}}, %{{.*}} on @late axes = ["p"] dim = 0 : memref<8xf32>, memref<16xf32>
// CHECK:         par.buffer_reduce_scatter %{{.*}}, %{{.*}} on @late axes = ["p"] dim = 0 kind = sum : memref<16xf32>, memref<8xf32>
// CHECK:         par.buffer_all_to_all %{{.*}}, %{{.*}} on @late axes = ["p"] split_dim = 1 concat_dim = 0 : memref<2x4xf32>, memref<4x2xf32>
// CHECK:         par.buffer_all_slice %{{.*}}, %{{.*}} on @late axes = ["p"] dim = 0 : memref<16xf32>, memref<8xf32>
// CHECK:         par.buffer_broadcast %{{.*}}, %{{.*}} on @late axes = ["p"] root = [1] : memref<8xf32>, memref<8xf32>
// CHECK:         par.buffer_send %{{.*}} on @late axes = ["p"] dest = [1] {tag = 3 : i64} : memref<8xf32>
// CHECK:         par.buffer_recv %{{.*}} on @late axes = ["p"] source = [0] : memref<8xf32>
func.func @buffers(%a: memref<8xf32>, %b: memref<8xf32>, %g: memref<16xf32>,
                   %m: memref<2x4xf32>, %t: memref<4x2xf32>) {
  par.buffer_all_reduce %a, %b on @late axes = ["p"] kind = max : memref<8xf32>, memref<8xf32>
  par.buffer_all_gather %a, %g on @late axes = ["p"] dim = 0 : memref<8xf32>, memref<16xf32>
  par.buffer_reduce_scatter %g, %b on @late axes = ["p"] dim = 0 kind = sum : memref<16xf32>, memref<8xf32>
  par.buffer_all_to_all %m, %t on @late axes = ["p"] split_dim = 1 concat_dim = 0 : memref<2x4xf32>, memref<4x2xf32>
  par.buffer_all_slice %g, %b on @late axes = ["p"] dim = 0 : memref<16xf32>, memref<8xf32>
  par.buffer_broadcast %a, %b on @late axes = ["p"] root = [1] : memref<8xf32>, memref<8xf32>
  par.buffer_send %a on @late axes = ["p"] dest = [1] {tag = 3} : memref<8xf32>
  par.buffer_recv %b on @late axes = ["p"] source = [0] : memref<8xf32>
  return
}

// Tests that buckets round-trip: the tensor form (results typed like the
// inputs), the blocking buffer form, and the started form with its wait.
// CHECK-LABEL: func.func @buckets(
// CHECK:         %{{.*}}:2 = par.bucket_all_reduce %{{.*}}, %{{.*}} on @late axes = ["p"] kind = sum : tensor<8xf32>, tensor<2x4xf32>
// CHECK:         par.buffer_bucket_all_reduce ins(%{{.*}}, %{{.*}} : memref<8xf32>, memref<16xf32>) outs(%{{.*}}, %{{.*}} : memref<8xf32>, memref<16xf32>) on @late axes = ["p"] kind = avg
// CHECK:         %[[H:.*]] = par.buffer_all_reduce_start ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<8xf32>) on @late axes = ["p"] kind = max
// CHECK-NEXT:    par.buffer_wait %[[H]] ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<8xf32>)
// CHECK:         %[[G:.*]] = par.buffer_all_gather_start %{{.*}}, %{{.*}} on @late axes = ["p"] dim = 0 {par.zero_gather = "forward"} : memref<8xf32>, memref<16xf32>
// CHECK-NEXT:    par.buffer_wait %[[G]] ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<16xf32>)
func.func @buckets(%x: tensor<8xf32>, %y: tensor<2x4xf32>, %a: memref<8xf32>,
                   %b: memref<8xf32>, %g: memref<16xf32>, %h: memref<16xf32>) -> (tensor<8xf32>, tensor<2x4xf32>) {
  %r:2 = par.bucket_all_reduce %x, %y on @late axes = ["p"] kind = sum : tensor<8xf32>, tensor<2x4xf32>
  par.buffer_bucket_all_reduce ins(%a, %g : memref<8xf32>, memref<16xf32>) outs(%b, %h : memref<8xf32>, memref<16xf32>) on @late axes = ["p"] kind = avg
  %req = par.buffer_all_reduce_start ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) on @late axes = ["p"] kind = max
  par.buffer_wait %req ins(%a : memref<8xf32>) outs(%b : memref<8xf32>)
  %gat = par.buffer_all_gather_start %a, %g on @late axes = ["p"] dim = 0 {par.zero_gather = "forward"} : memref<8xf32>, memref<16xf32>
  par.buffer_wait %gat ins(%a : memref<8xf32>) outs(%g : memref<16xf32>)
  return %r#0, %r#1 : tensor<8xf32>, tensor<2x4xf32>
}

//===----------------------------------------------------------------------===//
// #par.init
//===----------------------------------------------------------------------===//

// Tests that the three initialiser kinds round-trip, a uniform one with its
// scale.
// CHECK-LABEL: func.func @inits
// CHECK-SAME:    par.init = #par.init<uniform, 2.000000e-02>
// CHECK-SAME:    par.init = #par.init<zeros>
// CHECK-SAME:    par.init = #par.init<ones>
func.func @inits(%w: tensor<4xf32> {par.param, par.init = #par.init<uniform, 0.02>},
                 %m: tensor<4xf32> {par.init = #par.init<zeros>},
                 %g: tensor<4xf32> {par.init = #par.init<ones>}) {
  return
}

//===----------------------------------------------------------------------===//
// Mixed precision and loss scaling
//===----------------------------------------------------------------------===//

// Tests that the loss-scale argument (its policy and fill initialiser), the
// function's compute type, an op's precision override and the loss-scale
// ops round-trip: par.scale_loss, par.all_finite over a mesh (several
// inputs of different types) and without one, par.update_loss_scale with a
// dynamic and a static policy, and the step's par.loss_scale_results.
// CHECK-LABEL: func.func @loss_scaling(
// CHECK-SAME:    %[[S:[a-z0-9]+]]: tensor<f32> {par.init = #par.init<fill, 6.553600e+04>, par.loss_scale = #par.loss_scale<kind = dynamic, init = 6.553600e+04, growth = 2.000000e+00, backoff = 5.000000e-01, interval = 2000, hysteresis = 2, min = 1.000000e+00>}
// CHECK-SAME:    attributes {par.loss_scale_results = array<i64: 1, 4>, par.mixed_precision = bf16}
// CHECK:         %[[L:.*]] = par.scale_loss %{{.*}} by %[[S]] : tensor<f32>
// CHECK:         %[[OK:.*]] = par.all_finite %{{.*}}, %{{.*}} over @mesh : tensor<4x8xbf16>, tensor<8xf32>
// CHECK:         par.all_finite %{{.*}} : tensor<8xf32>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = par.update_loss_scale %[[S]], %{{.*}}, %{{.*}} finite %[[OK]] policy <kind = dynamic, init = 6.553600e+04, growth = 2.000000e+00, backoff = 5.000000e-01, interval = 2000, hysteresis = 2, min = 1.000000e+00>
// CHECK:         par.update_loss_scale {{.*}} policy <kind = static, init = 1.280000e+02, growth = 4.000000e+00, backoff = 2.500000e-01, interval = 10, hysteresis = 1, min = 2.000000e+00>
// CHECK:         linalg.generic {{.*}} attrs = {par.precision = "f32"}
// CHECK:         linalg.generic {{.*}} attrs = {par.precision = "compute"}
#mp_id = affine_map<(i) -> (i)>
func.func @loss_scaling(%l: tensor<f32>, %x: tensor<4x8xbf16>, %g: tensor<8xf32>,
                        %s: tensor<f32> {par.init = #par.init<fill, 65536.0>,
                                         par.loss_scale = #par.loss_scale<kind = dynamic, init = 65536.0, growth = 2.0, backoff = 0.5, interval = 2000, hysteresis = 2, min = 1.0>},
                        %good: tensor<f32>, %hyst: tensor<f32>)
    -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>)
    attributes {par.mixed_precision = bf16, par.loss_scale_results = array<i64: 1, 4>} {
  %sl = par.scale_loss %l by %s : tensor<f32>
  %ok = par.all_finite %x, %g over @mesh : tensor<4x8xbf16>, tensor<8xf32>
  %local = par.all_finite %g : tensor<8xf32>
  %s2, %g2, %h2 = par.update_loss_scale %s, %good, %hyst finite %ok
      policy <kind = dynamic, init = 65536.0, growth = 2.0, backoff = 0.5, interval = 2000, hysteresis = 2, min = 1.0>
  %s3, %g3, %h3 = par.update_loss_scale %s2, %g2, %h2 finite %local
      policy <kind = static, init = 128.0, growth = 4.0, backoff = 0.25, interval = 10, hysteresis = 1, min = 2.0>
  %e = tensor.empty() : tensor<8xf32>
  %k = linalg.generic {indexing_maps = [#mp_id, #mp_id], iterator_types = ["parallel"]}
      ins(%g : tensor<8xf32>) outs(%e : tensor<8xf32>) attrs = {par.precision = "f32"} {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %c = linalg.generic {indexing_maps = [#mp_id, #mp_id], iterator_types = ["parallel"]}
      ins(%g : tensor<8xf32>) outs(%e : tensor<8xf32>) attrs = {par.precision = "compute"} {
  ^bb0(%v: f32, %o: f32):
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %sl, %s3, %g3, %h3, %ok, %k, %c : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<8xf32>, tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// Activation recomputation
//===----------------------------------------------------------------------===//

// Tests that par.recompute_barrier round-trips, and that two barriers of one
// value stay two ops (it has no folder; par-opt's printer does not CSE).
// CHECK-LABEL: func.func @recompute_barrier(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8x16xf32>
// CHECK:         %[[A:.*]] = par.recompute_barrier %[[X]] : tensor<2x8x16xf32>
// CHECK:         %[[B:.*]] = par.recompute_barrier %[[X]] : tensor<2x8x16xf32>
// CHECK:         return %[[A]], %[[B]]
func.func @recompute_barrier(%x: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %a = par.recompute_barrier %x : tensor<2x8x16xf32>
  %b = par.recompute_barrier %x : tensor<2x8x16xf32>
  return %a, %b : tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

//===----------------------------------------------------------------------===//
// The typed contracts: links between functions, #par.pipeline
//===----------------------------------------------------------------------===//

// Tests that the links between functions (par.grad, par.step, par.update,
// par.logits) and a scheduled #par.pipeline round-trip: the stage table with
// its optional roles, the step and logits, and one #par.program per rank
// with every kind of action.
// CHECK-LABEL: module attributes {par.pipeline = #par.pipeline<func = @f, stages = [
// CHECK-SAME:    #par.stage<forward = @f_s0_fwd, loss = @f_s0, weight_loss = @f_s0_bw, backward = @f_s0_grad, weight_grad = @f_s0_bw_grad, update = @f_s0_update>,
// CHECK-SAME:    #par.stage<forward = @f_s1_fwd, loss = @f_s1, input_loss = @f_s1_bi, weight_loss = @f_s1_bw, backward = @f_s1_grad, input_grad = @f_s1_bi_grad, weight_grad = @f_s1_bw_grad, update = @f_s1_update>],
// CHECK-SAME:    step = @f_step, logits = @f_logits, schedule = "zbh1", axis = "pp", micro_batches = 1, programs = [
// CHECK-SAME:    #par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1), recv_grad(mb=0, s=1, from=1), bi(mb=0, s=0), bw(mb=0, s=0)]>,
// CHECK-SAME:    #par.program<[recv_act(mb=0, s=1, from=0), fwd(mb=0, s=1), bi(mb=0, s=1), send_grad(mb=0, s=1, to=0), bw(mb=0, s=1)]>]>}
// CHECK:       func.func @f() attributes {par.grad = @f_grad, par.logits = @f_logits, par.step = @f_step}
// CHECK:       func.func @f_s0() attributes {par.grad = @f_s0_grad, par.update = @f_s0_update}
module attributes {par.pipeline = #par.pipeline<func = @f,
    stages = [#par.stage<forward = @f_s0_fwd, loss = @f_s0, weight_loss = @f_s0_bw,
                         backward = @f_s0_grad, weight_grad = @f_s0_bw_grad, update = @f_s0_update>,
              #par.stage<forward = @f_s1_fwd, loss = @f_s1, input_loss = @f_s1_bi, weight_loss = @f_s1_bw,
                         backward = @f_s1_grad, input_grad = @f_s1_bi_grad, weight_grad = @f_s1_bw_grad,
                         update = @f_s1_update>],
    step = @f_step, logits = @f_logits, schedule = "zbh1", axis = "pp", micro_batches = 1,
    programs = [#par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, to=1), recv_grad(mb=0, s=1, from=1),
                              bi(mb=0, s=0), bw(mb=0, s=0)]>,
                #par.program<[recv_act(mb=0, s=1, from=0), fwd(mb=0, s=1), bi(mb=0, s=1),
                              send_grad(mb=0, s=1, to=0), bw(mb=0, s=1)]>]>} {
  func.func @f() attributes {par.grad = @f_grad, par.step = @f_step, par.logits = @f_logits} { return }
  func.func @f_grad() { return }
  func.func @f_step() attributes {par.grad = @f_grad, par.logits = @f_logits} { return }
  func.func @f_logits() { return }
  func.func @f_s0() attributes {par.grad = @f_s0_grad, par.update = @f_s0_update} { return }
  func.func @f_s1() attributes {par.grad = @f_s1_grad, par.update = @f_s1_update} { return }
  func.func @f_s0_fwd() { return }
  func.func @f_s1_fwd() { return }
  func.func @f_s1_bi() { return }
  func.func @f_s0_bw() { return }
  func.func @f_s1_bw() { return }
  func.func @f_s0_grad() { return }
  func.func @f_s1_grad() { return }
  func.func @f_s1_bi_grad() { return }
  func.func @f_s0_bw_grad() { return }
  func.func @f_s1_bw_grad() { return }
  func.func @f_s0_update() { return }
  func.func @f_s1_update() { return }
}

// Tests that a pipeline just split (no schedule yet) round-trips with its
// stage table only.
// CHECK-LABEL: module attributes {par.pipeline = #par.pipeline<func = @g, stages = [#par.stage<forward = @g_s0_fwd, loss = @g_s0>]>}
module attributes {par.pipeline = #par.pipeline<func = @g, stages = [#par.stage<forward = @g_s0_fwd, loss = @g_s0>]>} {
  func.func @g() { return }
  func.func @g_s0_fwd() { return }
  func.func @g_s0() { return }
}
