// RUN: par-opt %s --par-spmd --par-export-manifest -o /dev/null | FileCheck %s
// RUN: par-opt %s --par-spmd --par-export-manifest=output=%t.json -o /dev/null && FileCheck %s < %t.json

// Tests the manifest of a partitioned function: mesh axes and, per tensor,
// dtype, global and local shapes, sharding and the initialiser in the
// schema's spelling ("uniform:<scale>" with the shortest decimal). Private
// functions are not entry points. The manifest carries its schema version
// (ManifestSchema.h's kVersion), which par-run checks.
// CHECK:      {
// CHECK-NEXT:   "functions": [
// CHECK:          "inputs": [
// CHECK:              "dtype": "f32",
// CHECK-NEXT:         "global_shape": [
// CHECK-NEXT:           8,
// CHECK-NEXT:           16
// CHECK-NEXT:         ],
// CHECK-NEXT:         "local_shape": [
// CHECK-NEXT:           4,
// CHECK-NEXT:           16
// CHECK-NEXT:         ],
// CHECK-NEXT:         "sharding": {
// CHECK-NEXT:           "dims": [
// CHECK-NEXT:             [
// CHECK-NEXT:               "dp"
// CHECK-NEXT:             ],
// CHECK-NEXT:             []
// CHECK-NEXT:           ],
// CHECK-NEXT:           "partial": [],
// CHECK-NEXT:           "partial_kind": "sum"
// CHECK:              "init": "uniform:0.02",
// CHECK:              "init": "ones",
// CHECK:          "mesh": {
// CHECK-NEXT:       "axes": [
// CHECK-NEXT:         {
// CHECK-NEXT:           "name": "dp",
// CHECK-NEXT:           "size": 2
// CHECK:            "name": "mesh"
// CHECK:          "name": "f",
// CHECK:          "outputs": [
// CHECK-NOT:      "helper"
// CHECK:        "version": 1
// CHECK-NEXT: }
par.mesh @mesh ["dp"=2]
func.func @f(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
             %w: tensor<16xf32> {par.init = #par.init<uniform, 0.02>},
             %g: tensor<16xf32> {par.init = #par.init<ones>}) -> tensor<8x16xf32> {
  %e = func.call @helper(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}
func.func private @helper(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = math.exp %x : tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}
