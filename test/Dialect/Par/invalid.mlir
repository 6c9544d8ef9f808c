// RUN: par-opt %s -split-input-file -verify-diagnostics

// One case per verifier / parser error path of the par dialect.

//===----------------------------------------------------------------------===//
// par.mesh
//===----------------------------------------------------------------------===//

// Tests that a mesh may not name the same axis twice.
// expected-error@+1 {{'par.mesh' op duplicate mesh axis 'a'}}
par.mesh @m ["a"=2, "b"=2, "a"=4]

// -----

// Tests that a mesh axis of size 0 is rejected.
// expected-error@+1 {{'par.mesh' op mesh axis 'b' must have a positive size, got 0}}
par.mesh @m ["a"=2, "b"=0]

// -----

// Tests that a mesh axis of negative size is rejected.
// expected-error@+1 {{'par.mesh' op mesh axis 'a' must have a positive size, got -2}}
par.mesh @m ["a"=-2]

// -----

// Tests that a mesh needs at least one axis.
// expected-error@+1 {{'par.mesh' op needs at least one axis}}
par.mesh @m []

// -----

// Tests that mesh axis names must not be empty.
// expected-error@+1 {{'par.mesh' op axis names must not be empty}}
par.mesh @m ["a"=2, ""=2]

// -----

// Tests that a mesh needs exactly one size per axis name (only reachable
// through the generic form).
// expected-error@+1 {{'par.mesh' op needs one size per axis name}}
"par.mesh"() <{axis_names = ["a", "b"], axis_sizes = array<i64: 2>, sym_name = "m"}> : () -> ()

// -----

// Tests that a mesh axis without a size is a parse error.
// expected-error@+1 {{expected '='}}
par.mesh @m ["a"=2, "b"]

//===----------------------------------------------------------------------===//
// #par.sharding attribute
//===----------------------------------------------------------------------===//

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that an axis may not split two different dimensions.
// expected-error@+1 {{mesh axis 'a' is used more than once in a sharding (again in dimension 1)}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"a"}, {"b", "a"}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that an axis may not appear twice in the axis list of one dimension.
// expected-error@+1 {{mesh axis 'b' is used more than once in a sharding (again in dimension 0)}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"b", "b"}, {}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that an axis may not both split a dimension and be a partial axis.
// expected-error@+1 {{mesh axis 'a' is used more than once in a sharding (again as a partial axis)}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"a"}, {}], partial sum {"a"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that an axis may not be listed twice as a partial axis.
// expected-error@+1 {{mesh axis 'b' is used more than once in a sharding (again as a partial axis)}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{}, {}], partial max {"b", "b"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that `avg` is not a valid partial reduction kind.
// expected-error@+1 {{partial reduction kind must be sum, max or min}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{}, {}], partial avg {"b"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that an unknown reduction kind keyword in a partial clause is rejected.
// expected-error@+1 {{unknown reduction kind 'prod' (expected sum, max or min)}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{}, {}], partial prod {"b"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a partial clause needs a reduction kind.
// expected-error@+1 {{expected valid keyword}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{}, {}], partial {"b"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that the clause after the dimension list must start with `partial`.
// expected-error@+1 {{expected 'partial'}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{}, {}], sum {"b"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding missing its closing `>` is a parse error.
// expected-error@+1 {{unbalanced '<' character in pretty dialect name}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"a"}, {}]}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that junk where the closing `>` of a sharding belongs is a parse
// error.
// expected-error@+1 {{expected '>'}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"a"}, {}] {"b"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that the mesh of a sharding must be a flat symbol reference.
// expected-error@+1 {{invalid kind of attribute specified}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<"m", [{"a"}, {}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that mesh axes in a sharding must be quoted strings.
// expected-error@+1 {{expected string}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{a}, {}]>}) {
  return
}

//===----------------------------------------------------------------------===//
// par.sharding on function arguments and results
//===----------------------------------------------------------------------===//

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding on a function argument must have the tensor's rank.
// expected-error@+1 {{argument #0: sharding #par.sharding<@m, [{"a"}]> has rank 1 but the tensor 'tensor<8x8xf32>' has rank 2}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"a"}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding on a function result must have the tensor's rank
// (here rank 0 on a rank-2 tensor).
// expected-error@+1 {{result #1: sharding #par.sharding<@m, []> has rank 0 but the tensor 'tensor<8x8xf32>' has rank 2}}
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32> {par.sharding = #par.sharding<@m, []>}) {
  return %x, %x : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding on a function argument may only use axes of its mesh.
// expected-error@+1 {{argument #1: unknown mesh axis 'c' (mesh @m has axes ["a", "b"])}}
func.func @f(%x: tensor<8x8xf32>, %y: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{}, {"c"}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that the partial axes of a sharding must be axes of its mesh.
// expected-error@+1 {{argument #0: unknown mesh axis 'c' (mesh @m has axes ["a", "b"])}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"a"}, {}], partial sum {"c"}>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding on a function result may only use axes of its mesh.
// expected-error@+1 {{result #0: unknown mesh axis 'x' (mesh @m has axes ["a", "b"])}}
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@m, [{"x"}, {}]>}) {
  return %x : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding must refer to an existing mesh.
// expected-error@+1 {{argument #0: sharding refers to unknown mesh @missing}}
func.func @f(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@missing, [{"a"}, {}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that a sharding referring to a symbol that is not a mesh (here a
// function) is rejected.
// expected-error@+1 {{result #0: sharding refers to @f, which is not a par.mesh}}
func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32> {par.sharding = #par.sharding<@f, [{"a"}, {}]>}) {
  return %x : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that par.sharding may not annotate a non-tensor function argument.
// expected-error@+1 {{argument #0: sharding #par.sharding<@m, [{"a"}]> is attached to a non-tensor value of type 'memref<8xf32>'}}
func.func @f(%x: memref<8xf32> {par.sharding = #par.sharding<@m, [{"a"}]>}) {
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that par.sharding may not annotate a non-tensor function result.
// expected-error@+1 {{result #0: sharding #par.sharding<@m, []> is attached to a non-tensor value of type 'f32'}}
func.func private @f() -> (f32 {par.sharding = #par.sharding<@m, []>})

// -----

par.mesh @m ["a"=2, "b"=4]
// Tests that par.sharding on a function argument must be a #par.sharding.
// expected-error@+1 {{argument #0: 'par.sharding' must be a #par.sharding attribute, got "a"}}
func.func @f(%x: tensor<8xf32> {par.sharding = "a"}) {
  return
}

// -----

// Tests that an unknown par attribute on a function argument is rejected.
// expected-error@+1 {{unknown par attribute "par.shard" on a region argument}}
func.func @f(%x: tensor<8xf32> {par.shard = 1}) {
  return
}

// -----

// Tests that an unknown par attribute on a function result is rejected.
// expected-error@+1 {{unknown par attribute "par.shard" on a function result}}
func.func @f(%x: tensor<8xf32>) -> (tensor<8xf32> {par.shard = 1}) {
  return %x : tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// par.global_type
//===----------------------------------------------------------------------===//

// -----

// Tests that par.global_type on a function argument must be a tensor type.
// expected-error@+1 {{'par.global_type' must be a ranked tensor type}}
func.func @f(%x: tensor<4xf32> {par.global_type = memref<8xf32>}) {
  return
}

// -----

// Tests that par.global_type must be a ranked tensor type, not unranked.
// expected-error@+1 {{'par.global_type' must be a ranked tensor type}}
func.func @f(%x: tensor<4xf32> {par.global_type = tensor<*xf32>}) {
  return
}

// -----

// Tests that par.global_type must be a type at all.
// expected-error@+1 {{'par.global_type' must be a ranked tensor type}}
func.func @f(%x: tensor<4xf32> {par.global_type = 8 : i64}) {
  return
}

// -----

// Tests that par.global_type on a function result must be a tensor type.
// expected-error@+1 {{'par.global_type' must be a ranked tensor type}}
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32> {par.global_type = i32}) {
  return %x : tensor<4xf32>
}

//===----------------------------------------------------------------------===//
// Op-level par.sharding list
//===----------------------------------------------------------------------===//

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that the op-level list needs one entry per result (too many).
  // expected-error@+1 {{'par.sharding' has 2 entries but the op has 1 result(s)}}
  %0 = arith.addf %x, %x {par.sharding = [#par.sharding<@m, [{"a"}]>, #par.sharding<@m, [{"b"}]>]} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that the op-level list needs one entry per result (too few).
  // expected-error@+1 {{'par.sharding' has 0 entries but the op has 1 result(s)}}
  %0 = arith.addf %x, %x {par.sharding = []} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that par.sharding on an op must be a list, not a bare sharding.
  // expected-error@+1 {{'par.sharding' on an op must be an array with one sharding per result}}
  %0 = arith.addf %x, %x {par.sharding = #par.sharding<@m, [{"a"}]>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that a `unit` entry is not accepted for a tensor result.
  // expected-error@+1 {{result #0: 'par.sharding' must be a #par.sharding attribute, got unit}}
  %0 = arith.addf %x, %x {par.sharding = [unit]} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f() -> i32 {
  // Tests that a #par.sharding entry is not accepted for a non-tensor result.
  // expected-error@+1 {{result #0: sharding #par.sharding<@m, []> is attached to a non-tensor value of type 'i32'}}
  %0 = arith.constant {par.sharding = [#par.sharding<@m, []>]} 1 : i32
  return %0 : i32
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that an op-level sharding must have the result's rank.
  // expected-error@+1 {{result #0: sharding #par.sharding<@m, [{"a"}, {}]> has rank 2 but the tensor 'tensor<8xf32>' has rank 1}}
  %0 = arith.addf %x, %x {par.sharding = [#par.sharding<@m, [{"a"}, {}]>]} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that an op-level sharding must refer to an existing mesh.
  // expected-error@+1 {{result #0: sharding refers to unknown mesh @n}}
  %0 = arith.addf %x, %x {par.sharding = [#par.sharding<@n, [{"a"}]>]} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that an op-level sharding may only use axes of its mesh.
  // expected-error@+1 {{result #0: unknown mesh axis 'c' (mesh @m has axes ["a", "b"])}}
  %0 = arith.addf %x, %x {par.sharding = [#par.sharding<@m, [{}], partial min {"c"}>]} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  // Tests that an unknown par attribute on an op is rejected.
  // expected-error@+1 {{unknown par attribute "par.global_type"}}
  %0 = arith.addf %x, %x {par.global_type = tensor<16xf32>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

//===----------------------------------------------------------------------===//
// par.sharding_constraint and par.reshard
//===----------------------------------------------------------------------===//

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that the sharding of a sharding_constraint must have the operand's rank.
  // expected-error@+1 {{'par.sharding_constraint' op sharding #par.sharding<@m, [{"a"}]> has rank 1 but the tensor 'tensor<8x8xf32>' has rank 2}}
  %0 = par.sharding_constraint %x <@m, [{"a"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that a sharding_constraint may only use axes of its mesh.
  // expected-error@+1 {{'par.sharding_constraint' op unknown mesh axis 'c' (mesh @m has axes ["a", "b"])}}
  %0 = par.sharding_constraint %x <@m, [{}, {"b", "c"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that a sharding_constraint must refer to an existing mesh.
  // expected-error@+1 {{'par.sharding_constraint' op sharding refers to unknown mesh @n}}
  %0 = par.sharding_constraint %x <@n, [{}, {}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that a sharding_constraint referring to a non-mesh symbol is rejected.
  // expected-error@+1 {{'par.sharding_constraint' op sharding refers to @f, which is not a par.mesh}}
  %0 = par.sharding_constraint %x <@f, [{}, {}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that the sharding of a reshard must have the operand's rank.
  // expected-error@+1 {{'par.reshard' op sharding #par.sharding<@m, [{"a"}, {}, {}]> has rank 3 but the tensor 'tensor<8x8xf32>' has rank 2}}
  %0 = par.reshard %x <@m, [{"a"}, {}, {}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that a reshard may only use axes of its mesh (partial axes included).
  // expected-error@+1 {{'par.reshard' op unknown mesh axis 'z' (mesh @m has axes ["a", "b"])}}
  %0 = par.reshard %x <@m, [{"a"}, {}], partial sum {"z"}> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that a reshard must refer to an existing mesh.
  // expected-error@+1 {{'par.reshard' op sharding refers to unknown mesh @n}}
  %0 = par.reshard %x <@n, [{}, {}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // Tests that the sharding of a reshard is itself verified (axis used twice).
  // expected-error@+1 {{mesh axis 'a' is used more than once in a sharding (again in dimension 1)}}
  %0 = par.reshard %x <@m, [{"a"}, {"a"}]> : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

//===----------------------------------------------------------------------===//
// Collectives: mesh and axes (common to every collective)
//===----------------------------------------------------------------------===//

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_reduce must refer to an existing mesh.
  // expected-error@+1 {{'par.all_reduce' op refers to unknown mesh @n}}
  %0 = par.all_reduce %x on @n axes = ["a"] kind = sum : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_reduce may only use axes of its mesh.
  // expected-error@+1 {{'par.all_reduce' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.all_reduce %x on @m axes = ["c"] kind = sum : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_reduce may not list an axis twice.
  // expected-error@+1 {{'par.all_reduce' op mesh axis 'a' is listed twice}}
  %0 = par.all_reduce %x on @m axes = ["a", "a"] kind = sum : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_reduce needs at least one axis.
  // expected-error@+1 {{'par.all_reduce' op needs at least one mesh axis}}
  %0 = par.all_reduce %x on @m axes = [] kind = sum : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather must refer to an existing mesh.
  // expected-error@+1 {{'par.all_gather' op refers to unknown mesh @n}}
  %0 = par.all_gather %x on @n axes = ["a"] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather may only use axes of its mesh.
  // expected-error@+1 {{'par.all_gather' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.all_gather %x on @m axes = ["c"] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather may not list an axis twice.
  // expected-error@+1 {{'par.all_gather' op mesh axis 'a' is listed twice}}
  %0 = par.all_gather %x on @m axes = ["a", "a"] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather needs at least one axis.
  // expected-error@+1 {{'par.all_gather' op needs at least one mesh axis}}
  %0 = par.all_gather %x on @m axes = [] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.reduce_scatter must refer to an existing mesh.
  // expected-error@+1 {{'par.reduce_scatter' op refers to unknown mesh @n}}
  %0 = par.reduce_scatter %x on @n axes = ["a"] dim = 0 kind = sum : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.reduce_scatter may only use axes of its mesh.
  // expected-error@+1 {{'par.reduce_scatter' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.reduce_scatter %x on @m axes = ["c"] dim = 0 kind = sum : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.reduce_scatter may not list an axis twice.
  // expected-error@+1 {{'par.reduce_scatter' op mesh axis 'a' is listed twice}}
  %0 = par.reduce_scatter %x on @m axes = ["a", "a"] dim = 0 kind = sum : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.reduce_scatter needs at least one axis.
  // expected-error@+1 {{'par.reduce_scatter' op needs at least one mesh axis}}
  %0 = par.reduce_scatter %x on @m axes = [] dim = 0 kind = sum : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all must refer to an existing mesh.
  // expected-error@+1 {{'par.all_to_all' op refers to unknown mesh @n}}
  %0 = par.all_to_all %x on @n axes = ["a"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all may only use axes of its mesh.
  // expected-error@+1 {{'par.all_to_all' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.all_to_all %x on @m axes = ["c"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all may not list an axis twice.
  // expected-error@+1 {{'par.all_to_all' op mesh axis 'a' is listed twice}}
  %0 = par.all_to_all %x on @m axes = ["a", "a"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all needs at least one axis.
  // expected-error@+1 {{'par.all_to_all' op needs at least one mesh axis}}
  %0 = par.all_to_all %x on @m axes = [] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.broadcast must refer to an existing mesh.
  // expected-error@+1 {{'par.broadcast' op refers to unknown mesh @n}}
  %0 = par.broadcast %x on @n axes = ["a"] root = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.broadcast may only use axes of its mesh.
  // expected-error@+1 {{'par.broadcast' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.broadcast %x on @m axes = ["c"] root = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.broadcast may not list an axis twice.
  // expected-error@+1 {{'par.broadcast' op mesh axis 'a' is listed twice}}
  %0 = par.broadcast %x on @m axes = ["a", "a"] root = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.broadcast needs at least one axis.
  // expected-error@+1 {{'par.broadcast' op needs at least one mesh axis}}
  %0 = par.broadcast %x on @m axes = [] root = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_slice must refer to an existing mesh.
  // expected-error@+1 {{'par.all_slice' op refers to unknown mesh @n}}
  %0 = par.all_slice %x on @n axes = ["a"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_slice may only use axes of its mesh.
  // expected-error@+1 {{'par.all_slice' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.all_slice %x on @m axes = ["c"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_slice may not list an axis twice.
  // expected-error@+1 {{'par.all_slice' op mesh axis 'a' is listed twice}}
  %0 = par.all_slice %x on @m axes = ["a", "a"] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_slice needs at least one axis.
  // expected-error@+1 {{'par.all_slice' op needs at least one mesh axis}}
  %0 = par.all_slice %x on @m axes = [] dim = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.send must refer to an existing mesh.
  // expected-error@+1 {{'par.send' op refers to unknown mesh @n}}
  par.send %x on @n axes = ["a"] dest = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.send may only use axes of its mesh.
  // expected-error@+1 {{'par.send' op unknown mesh axis 'c' (mesh @m)}}
  par.send %x on @m axes = ["c"] dest = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.send may not list an axis twice.
  // expected-error@+1 {{'par.send' op mesh axis 'a' is listed twice}}
  par.send %x on @m axes = ["a", "a"] dest = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.send needs at least one axis.
  // expected-error@+1 {{'par.send' op needs at least one mesh axis}}
  par.send %x on @m axes = [] dest = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.recv must refer to an existing mesh.
  // expected-error@+1 {{'par.recv' op refers to unknown mesh @n}}
  %0 = par.recv on @n axes = ["a"] source = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.recv may only use axes of its mesh.
  // expected-error@+1 {{'par.recv' op unknown mesh axis 'c' (mesh @m)}}
  %0 = par.recv on @m axes = ["c"] source = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.recv may not list an axis twice.
  // expected-error@+1 {{'par.recv' op mesh axis 'a' is listed twice}}
  %0 = par.recv on @m axes = ["a", "a"] source = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.recv needs at least one axis.
  // expected-error@+1 {{'par.recv' op needs at least one mesh axis}}
  %0 = par.recv on @m axes = [] source = [0] : tensor<8x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// Collectives: op-specific checks
//===----------------------------------------------------------------------===//

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that a collective referring to a symbol that is not a mesh (here a
  // function) is rejected.
  // expected-error@+1 {{'par.all_gather' op refers to @f, which is not a par.mesh}}
  %0 = par.all_gather %x on @f axes = ["a"] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_reduce rejects an unknown reduction kind keyword.
  // expected-error@+2 {{custom op 'par.all_reduce' expected ::mlir::par::ReductionKind to be one of: sum, max, min, avg}}
  // expected-error@+1 {{custom op 'par.all_reduce' failed to parse Par_ReductionKindAttr parameter 'value' which is to be a `::mlir::par::ReductionKind`}}
  %0 = par.all_reduce %x on @m axes = ["a"] kind = prod : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_reduce must keep the operand type (generic form).
  // expected-error@+1 {{'par.all_reduce' op failed to verify that all of {input, result} have same type}}
  %0 = "par.all_reduce"(%x) <{axes = ["a"], kind = #par<reduction sum>, mesh = @m}> : (tensor<8x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that the dim of par.all_gather must be below the rank.
  // expected-error@+1 {{'par.all_gather' op dim 2 is out of range for a tensor of rank 2}}
  %0 = par.all_gather %x on @m axes = ["a"] dim = 2 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that the dim of par.all_gather may not be negative.
  // expected-error@+1 {{'par.all_gather' op dim -1 is out of range for a tensor of rank 2}}
  %0 = par.all_gather %x on @m axes = ["a"] dim = -1 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather multiplies the gathered dim by the group size
  // (2 x 4 = 8 devices here).
  // expected-error@+1 {{'par.all_gather' op result dimension 0 should be 64, got 16}}
  %0 = par.all_gather %x on @m axes = ["a", "b"] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather leaves the other dims unchanged.
  // expected-error@+1 {{'par.all_gather' op result dimension 1 should be 8, got 4}}
  %0 = par.all_gather %x on @m axes = ["a"] dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather keeps the rank.
  // expected-error@+1 {{'par.all_gather' op input and result must have the same rank}}
  %0 = par.all_gather %x on @m axes = ["a"] dim = 0 : tensor<8x8xf32> -> tensor<16x8x1xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_gather keeps the element type.
  // expected-error@+1 {{'par.all_gather' op input and result must have the same element type}}
  %0 = par.all_gather %x on @m axes = ["a"] dim = 0 : tensor<8x8xf32> -> tensor<16x8xf16>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that the dim of par.reduce_scatter must be below the rank.
  // expected-error@+1 {{'par.reduce_scatter' op dim 3 is out of range for a tensor of rank 2}}
  %0 = par.reduce_scatter %x on @m axes = ["b"] dim = 3 kind = sum : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x6xf32>) {
  // Tests that the scattered dim of par.reduce_scatter must be divisible by
  // the group size.
  // expected-error@+1 {{'par.reduce_scatter' op dimension 1 of size 6 is not divisible by the group size 4}}
  %0 = par.reduce_scatter %x on @m axes = ["b"] dim = 1 kind = sum : tensor<8x6xf32> -> tensor<8x1xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.reduce_scatter divides the scattered dim by the group size.
  // expected-error@+1 {{'par.reduce_scatter' op result dimension 0 should be 2, got 4}}
  %0 = par.reduce_scatter %x on @m axes = ["b"] dim = 0 kind = max : tensor<8x8xf32> -> tensor<4x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.reduce_scatter keeps the element type.
  // expected-error@+1 {{'par.reduce_scatter' op input and result must have the same element type}}
  %0 = par.reduce_scatter %x on @m axes = ["a"] dim = 0 kind = sum : tensor<8x8xf32> -> tensor<4x8xi32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that the split_dim of par.all_to_all must be below the rank.
  // expected-error@+1 {{'par.all_to_all' op split_dim 2 is out of range for a tensor of rank 2}}
  %0 = par.all_to_all %x on @m axes = ["a"] split_dim = 2 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that the concat_dim of par.all_to_all must be below the rank.
  // expected-error@+1 {{'par.all_to_all' op concat_dim -1 is out of range for a tensor of rank 2}}
  %0 = par.all_to_all %x on @m axes = ["a"] split_dim = 1 concat_dim = -1 : tensor<8x8xf32> -> tensor<16x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x6xf32>) {
  // Tests that the split dim of par.all_to_all must be divisible by the group
  // size.
  // expected-error@+1 {{'par.all_to_all' op dimension 1 of size 6 is not divisible by the group size 4}}
  %0 = par.all_to_all %x on @m axes = ["b"] split_dim = 1 concat_dim = 0 : tensor<8x6xf32> -> tensor<32x1xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all multiplies the concat dim by the group size.
  // expected-error@+1 {{'par.all_to_all' op result dimension 0 should be 16, got 8}}
  %0 = par.all_to_all %x on @m axes = ["a"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<8x4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all divides the split dim by the group size.
  // expected-error@+1 {{'par.all_to_all' op result dimension 1 should be 4, got 8}}
  %0 = par.all_to_all %x on @m axes = ["a"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_to_all keeps the rank.
  // expected-error@+1 {{'par.all_to_all' op input and result must have the same rank}}
  %0 = par.all_to_all %x on @m axes = ["a"] split_dim = 1 concat_dim = 0 : tensor<8x8xf32> -> tensor<64xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.broadcast needs one root coordinate per axis.
  // expected-error@+1 {{'par.broadcast' op root needs one coordinate per axis (2), got 1}}
  %0 = par.broadcast %x on @m axes = ["a", "b"] root = [0] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that a root coordinate must be below its axis' size.
  // expected-error@+1 {{'par.broadcast' op root coordinate 4 is out of range for mesh axis 'b'}}
  %0 = par.broadcast %x on @m axes = ["a", "b"] root = [1, 4] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that a root coordinate may not be negative.
  // expected-error@+1 {{'par.broadcast' op root coordinate -1 is out of range for mesh axis 'a'}}
  %0 = par.broadcast %x on @m axes = ["a"] root = [-1] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that the dim of par.all_slice must be below the rank.
  // expected-error@+1 {{'par.all_slice' op dim 2 is out of range for a tensor of rank 2}}
  %0 = par.all_slice %x on @m axes = ["b"] dim = 2 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x6xf32>) {
  // Tests that the sliced dim of par.all_slice must be divisible by the group
  // size.
  // expected-error@+1 {{'par.all_slice' op dimension 1 of size 6 is not divisible by the group size 4}}
  %0 = par.all_slice %x on @m axes = ["b"] dim = 1 : tensor<8x6xf32> -> tensor<8x1xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_slice divides the sliced dim by the group size.
  // expected-error@+1 {{'par.all_slice' op result dimension 0 should be 2, got 8}}
  %0 = par.all_slice %x on @m axes = ["b"] dim = 0 : tensor<8x8xf32> -> tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.all_slice keeps the rank.
  // expected-error@+1 {{'par.all_slice' op input and result must have the same rank}}
  %0 = par.all_slice %x on @m axes = ["b"] dim = 0 : tensor<8x8xf32> -> tensor<2x8x1xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that a dest coordinate of par.send must be below its axis' size.
  // expected-error@+1 {{'par.send' op dest coordinate 2 is out of range for mesh axis 'a'}}
  par.send %x on @m axes = ["a"] dest = [2] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that a dest coordinate of par.send may not be negative.
  // expected-error@+1 {{'par.send' op dest coordinate -1 is out of range for mesh axis 'b'}}
  par.send %x on @m axes = ["a", "b"] dest = [0, -1] {tag = 3} : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.send needs one dest coordinate per axis.
  // expected-error@+1 {{'par.send' op dest needs one coordinate per axis (1), got 2}}
  par.send %x on @m axes = ["a"] dest = [0, 1] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.recv needs one source coordinate per axis.
  // expected-error@+1 {{'par.recv' op source needs one coordinate per axis (2), got 1}}
  %0 = par.recv on @m axes = ["a", "b"] source = [1] : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that a source coordinate of par.recv must be below its axis' size.
  // expected-error@+1 {{'par.recv' op source coordinate 4 is out of range for mesh axis 'b'}}
  %0 = par.recv on @m axes = ["b"] source = [4] {tag = 1} : tensor<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: tensor<8x8xf32>) {
  // Tests that par.send has no result.
  // expected-error@+1 {{cannot name an operation with no results}}
  %0 = par.send %x on @m axes = ["b"] dest = [0] : tensor<8x8xf32>
  return
}

// -----

// Tests that a split that does not divide the input is rejected even when
// the result dimension is dynamic.
par.mesh @m ["a"=2, "b"=4]
func.func @dyn_result_not_divisible(%x: tensor<8x6xf32>) -> tensor<8x?xf32> {
  // expected-error @+1 {{dimension 1 of size 6 is not divisible by the group size 4}}
  %0 = par.all_slice %x on @m axes = ["b"] dim = 1 : tensor<8x6xf32> -> tensor<8x?xf32>
  return %0 : tensor<8x?xf32>
}

// -----

// Tests that an initialiser must be a #par.init attribute (no longer a string).
// expected-error @+1 {{'par.init' must be a #par.init attribute (zeros, ones, uniform with a scale or fill with a value), got "uniform:0.02"}}
func.func @bad_init(%x: tensor<4xf32> {par.init = "uniform:0.02"}) {
  return
}

// -----

// Tests that an initialiser kind must be one par-run knows.
// expected-error @+2 {{expected ::mlir::par::InitKind to be one of: zeros, ones, uniform}}
// expected-error @+1 {{failed to parse Par_InitAttr parameter 'kind'}}
func.func @unknown_init(%x: tensor<4xf32> {par.init = #par.init<normal>}) {
  return
}

// -----

// Tests that a uniform initialiser needs a positive scale.
// expected-error @+1 {{'uniform' initialiser needs a positive finite scale, got -5.000000e-01}}
func.func @negative_scale(%x: tensor<4xf32> {par.init = #par.init<uniform, -0.5>}) {
  return
}

// -----

// Tests that a uniform initialiser without a scale is refused.
// expected-error @+1 {{'uniform' initialiser needs a positive finite scale, got 0.000000e+00}}
func.func @missing_scale(%x: tensor<4xf32> {par.init = #par.init<uniform>}) {
  return
}

// -----

// Tests that zeros and ones take no scale.
// expected-error @+1 {{'ones' initialiser takes no scale, got 2.000000e+00}}
func.func @ones_scale(%x: tensor<4xf32> {par.init = #par.init<ones, 2.0>}) {
  return
}

// -----

// Tests that par.param is a unit attribute.
// expected-error @+1 {{'par.param' is a unit attribute}}
func.func @bad_param(%x: tensor<4xf32> {par.param = 1 : i32}) {
  return
}

// -----

// Tests that feedback pairs must be in range and pair equal types.
// expected-error @+1 {{'par.feedback' pair (3, 0) is out of range}}
func.func @feedback_range(%x: tensor<4xf32>) -> tensor<4xf32> attributes {par.feedback = array<i64: 3, 0>} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'par.feedback' pairs result #0 with argument #0 of a different type}}
func.func @feedback_type(%x: tensor<4xf32>) -> tensor<8xf32> attributes {par.feedback = array<i64: 0, 0>} {
  %0 = tensor.empty() : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// Tests that par.param and par.init belong on arguments, not results.
// expected-error @+1 {{unknown par attribute "par.param" on a function result}}
func.func @param_result(%x: tensor<4xf32>) -> (tensor<4xf32> {par.param}) {
  return %x : tensor<4xf32>
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: memref<8x8xf32>, %y: memref<8x8xf32>) {
  // Tests that a buffer all_gather's output has the gathered shape.
  // expected-error@+1 {{'par.buffer_all_gather' op result dimension 1 should be 32, got 8}}
  par.buffer_all_gather %x, %y on @m axes = ["b"] dim = 1 : memref<8x8xf32>, memref<8x8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: memref<8xf32>, %y: memref<8xf32>) {
  // Tests that buffer collectives check their axes like the tensor forms.
  // expected-error@+1 {{'par.buffer_all_reduce' op unknown mesh axis 'c' (mesh @m)}}
  par.buffer_all_reduce %x, %y on @m axes = ["c"] kind = sum : memref<8xf32>, memref<8xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: memref<8xf32>, %y: memref<4xf32>) {
  // Tests that a buffer all_reduce reads and writes the same shape.
  // expected-error@+1 {{'par.buffer_all_reduce' op result dimension 0 should be 8, got 4}}
  par.buffer_all_reduce %x, %y on @m axes = ["a"] kind = sum : memref<8xf32>, memref<4xf32>
  return
}

// -----

par.mesh @m ["a"=2, "b"=4]
func.func @f(%x: memref<?xf32>) {
  // Tests that buffer collectives need static shapes.
  // expected-error@+1 {{operand #0 must be statically shaped memref of any type values}}
  par.buffer_send %x on @m axes = ["a"] dest = [1] : memref<?xf32>
  return
}

// -----

// Tests that #par.pipeline's verifier is the deadlock proof: rank 0 waits
// for a gradient before sending the activation that produces it.
// expected-error @+1 {{the pipeline programs are invalid: deadlock: rank 0 waits in recv-grad(mb=0,s=1) from rank 1, but rank 1 is blocked in recv-act(mb=0,s=1) from rank 0}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>, #par.stage<forward = @f, loss = @f>],
    schedule = "1f1b", axis = "pp", micro_batches = 1, programs = [
    #par.program<[fwd(mb=0, s=0), recv_grad(mb=0, s=1, from=1), send_act(mb=0, s=1, to=1), bwd(mb=0, s=0)]>,
    #par.program<[recv_act(mb=0, s=1, from=0), fwd(mb=0, s=1), bwd(mb=0, s=1), send_grad(mb=0, s=1, to=0)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that the proof also finds a missing compute action.
// expected-error @+1 {{the pipeline programs are invalid: missing compute: rank 0 never runs B(mb=1,s=0)}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>],
    schedule = "gpipe", axis = "pp", micro_batches = 2, programs = [
    #par.program<[fwd(mb=0, s=0), fwd(mb=1, s=0), bwd(mb=0, s=0)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that an unknown pipeline action is named. (The attribute's body
// cannot hold comments: the expectations are above it.)
// expected-error @+5 {{unknown pipeline action 'forward' (expected fwd, bwd, bi, bw, send_act, recv_act, send_grad or recv_grad)}}
// expected-error @+4 {{failed to parse Par_ProgramAttr parameter 'actions'}}
// expected-error @+3 {{failed to parse Par_PipelineAttr parameter 'programs'}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>],
    schedule = "gpipe", axis = "pp", micro_batches = 1, programs = [
    #par.program<[forward(mb=0, s=0), bwd(mb=0, s=0)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that a send names its peer with `to`.
// expected-error @+5 {{expected 'to', got 'from'}}
// expected-error @+4 {{failed to parse Par_ProgramAttr parameter 'actions'}}
// expected-error @+3 {{failed to parse Par_PipelineAttr parameter 'programs'}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>, #par.stage<forward = @f, loss = @f>],
    schedule = "gpipe", axis = "pp", micro_batches = 1, programs = [
    #par.program<[fwd(mb=0, s=0), send_act(mb=0, s=1, from=1)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that a transfer crosses a stage boundary (stage >= 1).
// expected-error @+4 {{pipeline transfer send-act(mb=0,s=0,to=1) needs a stage >= 1 and a peer rank >= 0}}
// expected-error @+3 {{failed to parse Par_PipelineAttr parameter 'programs'}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>],
    schedule = "gpipe", axis = "pp", micro_batches = 1, programs = [
    #par.program<[send_act(mb=0, s=0, to=1)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that the schedule is one lib/Pipelining/Schedule knows.
// expected-error @+1 {{unknown schedule 'zb' (expected gpipe, 1f1b, interleaved, zbh1 or zbv)}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>],
    schedule = "zb", axis = "pp", micro_batches = 1, programs = [#par.program<[fwd(mb=0, s=0), bwd(mb=0, s=0)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that programs come with their schedule, axis and micro-batch count.
// expected-error @+1 {{#par.pipeline's programs need a schedule, an axis and micro_batches >= 1}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>],
    programs = [#par.program<[fwd(mb=0, s=0), bwd(mb=0, s=0)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that the stages are spread evenly over the programs' ranks.
// expected-error @+1 {{3 stages cannot be placed on 2 pipeline ranks}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>, #par.stage<forward = @f, loss = @f>, #par.stage<forward = @f, loss = @f>],
    schedule = "gpipe", axis = "pp", micro_batches = 1, programs = [#par.program<[]>, #par.program<[]>]>} {
  func.func @f() { return }
}

// -----

// Tests that zbh1 needs the split backward's functions in the stage table.
// expected-error @+1 {{zbh1 runs the input and weight halves of each backward apart, but stage 0 has no weight_loss}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f>],
    schedule = "zbh1", axis = "pp", micro_batches = 1, programs = [#par.program<[fwd(mb=0, s=0), bi(mb=0, s=0), bw(mb=0, s=0)]>]>} {
  func.func @f() { return }
}

// -----

// Tests that every symbol of the stage table names a function of the module.
// expected-error @+1 {{'par.pipeline' stage 0's backward names @f_grad, which is not a function in the module}}
module attributes {par.pipeline = #par.pipeline<func = @f, stages = [#par.stage<forward = @f, loss = @f, backward = @f_grad>]>} {
  func.func @f() { return }
}

// -----

// Tests that the pipeline is the typed attribute, no longer a dictionary.
// expected-error @+1 {{'par.pipeline' must be a #par.pipeline on a module}}
module attributes {par.pipeline = {func = "f", stages = 1 : i64}} {
  func.func @f() { return }
}

// -----

// Tests that a link between functions is a symbol reference.
// expected-error @+1 {{'par.grad' must be a symbol reference on a function}}
func.func @f() attributes {par.grad = "f_grad"} { return }

// -----

// Tests that a link names a function of the module.
// expected-error @+1 {{'par.logits' names @f_logits, which is not a function in the module}}
func.func @f() attributes {par.logits = @f_logits} { return }

// -----

par.mesh @m ["a"=2]
// Tests that a link names a function, not another symbol.
// expected-error @+1 {{'par.step' names @m, which is not a function in the module}}
func.func @f() attributes {par.step = @m} { return }

// -----

//===----------------------------------------------------------------------===//
// Mixed precision and loss scaling
//===----------------------------------------------------------------------===//

// Tests that all_finite's mesh must be a par.mesh (a stage without
// parameters checks nothing but still joins the mesh-wide decision).
func.func @all_finite_no_mesh() -> tensor<f32> {
  // expected-error @+1 {{'par.all_finite' op refers to @nowhere, which is not a par.mesh}}
  %0 = "par.all_finite"() {mesh = @nowhere} : () -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that all_finite checks floating-point tensors only (an integer has
// no Inf or NaN).
func.func @all_finite_int(%g: tensor<4xf32>, %i: tensor<4xi32>) -> tensor<f32> {
  // expected-error @+1 {{'par.all_finite' op input #1 is not a floating-point tensor: 'tensor<4xi32>'}}
  %0 = par.all_finite %g, %i : tensor<4xf32>, tensor<4xi32>
  return %0 : tensor<f32>
}

// -----

// Tests that all_finite's mesh must be a par.mesh.
func.func @all_finite_mesh(%g: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'par.all_finite' op refers to @nowhere, which is not a par.mesh}}
  %0 = par.all_finite %g over @nowhere : tensor<4xf32>
  return %0 : tensor<f32>
}

// -----

// Tests that the loss scale is an f32 scalar.
func.func @scale_loss_f16(%l: tensor<f32>, %s: tensor<f16>) -> tensor<f32> {
  // expected-error @+1 {{'par.scale_loss' op operand #1 must be 0D tensor of 32-bit float values}}
  %0 = "par.scale_loss"(%l, %s) : (tensor<f32>, tensor<f16>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// Tests that a loss-scale policy's back-off must shrink the scale.
// expected-error @+1 {{loss scale: backoff must be in (0, 1), got 2.000000e+00}}
func.func @bad_backoff(%s: tensor<f32> {par.loss_scale = #par.loss_scale<kind = dynamic, init = 65536.0, growth = 2.0, backoff = 2.0, interval = 2000, hysteresis = 1, min = 1.0>}) {
  return
}

// -----

// Tests that a loss-scale policy's minimum may not exceed its start.
// expected-error @+1 {{loss scale: min must be in (0, init], got 1.000000e+03}}
func.func @bad_min(%s: tensor<f32> {par.loss_scale = #par.loss_scale<kind = dynamic, init = 8.0, growth = 2.0, backoff = 0.5, interval = 2000, hysteresis = 1, min = 1000.0>}) {
  return
}

// -----

// Tests that a policy kind must be static or dynamic.
// expected-error @+2 {{expected ::mlir::par::LossScaleKind to be one of: static, dynamic}}
// expected-error @+1 {{failed to parse Par_LossScaleAttr parameter 'kind'}}
func.func @bad_kind(%s: tensor<f32> {par.loss_scale = #par.loss_scale<kind = adaptive, init = 8.0, growth = 2.0, backoff = 0.5, interval = 2000, hysteresis = 1, min = 1.0>}) {
  return
}

// -----

// Tests that par.loss_scale holds a policy, not a number.
// expected-error @+1 {{'par.loss_scale' must be a #par.loss_scale policy on a scalar f32 (tensor<f32>) function argument}}
func.func @scale_number(%s: tensor<f32> {par.loss_scale = 65536.0 : f32}) {
  return
}

// -----

// Tests that a function's compute type is a 16-bit float.
// expected-error @+1 {{'par.mixed_precision' must be the compute type (f16 or bf16) on a function}}
func.func @mp_f64() attributes {par.mixed_precision = f64} { return }

// -----

// Tests that par.loss_scale_results names two results.
// expected-error @+1 {{'par.loss_scale_results' must be [scale, finite] result indices of a function}}
func.func @ls_results() attributes {par.loss_scale_results = array<i64: 1>} { return }

// -----

//===----------------------------------------------------------------------===//
// Buckets and asynchronous all-reduces
//===----------------------------------------------------------------------===//

par.mesh @m ["a"=2]
func.func @f(%x: tensor<4xf32>, %y: tensor<4xbf16>) {
  // Tests that a bucket has one element type (the runtime packs one buffer).
  // expected-error@+1 {{'par.bucket_all_reduce' op member #1 has element type 'bf16', the bucket's is 'f32'}}
  %0:2 = par.bucket_all_reduce %x, %y on @m axes = ["a"] kind = sum : tensor<4xf32>, tensor<4xbf16>
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f() {
  // Tests that a bucket has at least one member.
  // expected-error@+1 {{'par.bucket_all_reduce' op needs at least one member}}
  "par.bucket_all_reduce"() <{axes = ["a"], kind = #par<reduction sum>, mesh = @m}> : () -> ()
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%x: tensor<4xf32>) {
  // Tests that a bucket's axes are checked like an all_reduce's.
  // expected-error@+1 {{'par.bucket_all_reduce' op unknown mesh axis 'b' (mesh @m)}}
  %0 = par.bucket_all_reduce %x on @m axes = ["b"] kind = sum : tensor<4xf32>
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>) {
  // Tests that the buffer form pairs inputs with outputs.
  // expected-error@+1 {{'par.buffer_bucket_all_reduce' op has 2 inputs but 1 outputs}}
  par.buffer_bucket_all_reduce ins(%a, %a : memref<4xf32>, memref<4xf32>) outs(%b : memref<4xf32>) on @m axes = ["a"] kind = sum
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<8xf32>) {
  // Tests that each output has its input's shape.
  // expected-error@+1 {{'par.buffer_bucket_all_reduce' op result dimension 0 should be 4, got 8}}
  par.buffer_bucket_all_reduce ins(%a : memref<4xf32>) outs(%b : memref<8xf32>) on @m axes = ["a"] kind = sum
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>) {
  // Tests that a started all-reduce is waited for.
  // expected-error@+1 {{'par.buffer_all_reduce_start' op request must be completed by exactly one par.buffer_wait}}
  %h = par.buffer_all_reduce_start ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) on @m axes = ["a"] kind = sum
  return
}

// -----

func.func @f(%h: i64, %a: memref<4xf32>, %b: memref<4xf32>) {
  // Tests that a wait completes a start, not any integer.
  // expected-error@+1 {{'par.buffer_wait' op request must come from a par.buffer_all_reduce_start}}
  par.buffer_wait %h ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>, %c: memref<4xf32>) {
  %h = par.buffer_all_reduce_start ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) on @m axes = ["a"] kind = sum
  // Tests that the wait names its start's buffers (their effects keep
  // other accesses and deallocations out of the window).
  // expected-error@+1 {{'par.buffer_wait' op must name the buffers of its par.buffer_all_reduce_start}}
  par.buffer_wait %h ins(%a : memref<4xf32>) outs(%c : memref<4xf32>)
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<8xf32>) {
  // Tests that a started all-gather is waited for.
  // expected-error@+1 {{'par.buffer_all_gather_start' op request must be completed by exactly one par.buffer_wait}}
  %h = par.buffer_all_gather_start %a, %b on @m axes = ["a"] dim = 0 : memref<4xf32>, memref<8xf32>
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>) {
  // Tests that a started all-gather's output is the gathered shape.
  // expected-error@+1 {{'par.buffer_all_gather_start' op result dimension 0 should be 8, got 4}}
  %h = par.buffer_all_gather_start %a, %b on @m axes = ["a"] dim = 0 : memref<4xf32>, memref<4xf32>
  par.buffer_wait %h ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %h = par.buffer_all_gather_start %a, %b on @m axes = ["a"] dim = 0 : memref<4xf32>, memref<8xf32>
  // Tests that the wait names its started all-gather's buffers.
  // expected-error@+1 {{'par.buffer_wait' op must name the buffers of its par.buffer_all_gather_start}}
  par.buffer_wait %h ins(%a : memref<4xf32>) outs(%c : memref<8xf32>)
  return
}

// -----

par.mesh @m ["a"=2]
func.func @f(%a: memref<4xf32>, %b: memref<4xf32>, %p: i1) {
  %h = par.buffer_all_reduce_start ins(%a : memref<4xf32>) outs(%b : memref<4xf32>) on @m axes = ["a"] kind = sum
  scf.if %p {
    // Tests that the wait is in its start's block.
    // expected-error@+1 {{'par.buffer_wait' op must be in the block of its par.buffer_all_reduce_start}}
    par.buffer_wait %h ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  }
  return
}

// -----

// expected-error @+1 {{'par.donated' names result #1 or argument #0 twice}}
func.func @donated_twice(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    attributes {par.donated = array<i64: 0, 0, 1, 0>} {
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{'par.donated' pairs result #0 with argument #1 of a different type}}
func.func @donated_type(%a: tensor<4xf32>, %b: tensor<2xf32>) -> tensor<4xf32>
    attributes {par.donated = array<i64: 0, 1>} {
  return %a : tensor<4xf32>
}
