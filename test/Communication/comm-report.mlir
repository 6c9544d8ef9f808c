// RUN: par-opt %s --par-comm-report -o /dev/null | FileCheck %s
// RUN: par-opt %s --par-comm-report=output=%t.txt -o /dev/null && FileCheck %s < %t.txt
// RUN: not par-opt %s --par-comm-report=output=/nonexistent/dir/r.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADFILE

// Tests the bytes each device sends under the ring formulas of docs/Formulas.md:
// all_reduce 2(n-1)/n S, all_gather (n-1)/n of the result, reduce_scatter
// and all_to_all (n-1)/n of the input, broadcast and send S, recv and
// all_slice nothing. Element widths: f32 4 bytes, bf16 2, i8 1.
// CHECK-LABEL: par-comm-report: @collectives
// CHECK-NEXT:    par.all_reduce axes=["x"] n=2 f32 tensor<8x16xf32>: 512 bytes
// CHECK-NEXT:    par.all_reduce axes=["x", "y"] n=8 bf16 tensor<8x16xbf16>: 448 bytes
// CHECK-NEXT:    par.all_gather axes=["y"] n=4 f32 tensor<8x4xf32>: 384 bytes
// CHECK-NEXT:    par.reduce_scatter axes=["y"] n=4 f32 tensor<8x16xf32>: 384 bytes
// CHECK-NEXT:    par.all_to_all axes=["x"] n=2 i8 tensor<8x16xi8>: 64 bytes
// CHECK-NEXT:    par.broadcast axes=["x"] n=2 f32 tensor<8x16xf32>: 512 bytes
// CHECK-NEXT:    par.send axes=["x"] n=2 f32 tensor<8x16xf32>: 512 bytes
// CHECK-NEXT:    par.recv axes=["x"] n=2 f32 tensor<8x16xf32>: 0 bytes
// CHECK-NEXT:    total: 8 collectives, 2816 bytes per device
// CHECK-LABEL: par-comm-report: @nothing
// CHECK-NEXT:    total: 0 collectives, 0 bytes per device
// Tests that a bucket is one collective (one message) with the bytes of its
// members together: 2(n-1)/n * (512 + 64 + 4) = 580 on n=2; a bf16 bucket
// over x,y (n=8): 2*7/8 * (256 + 32) = 504.
// CHECK-LABEL: par-comm-report: @buckets
// CHECK-NEXT:    par.bucket_all_reduce axes=["x"] n=2 f32 3 tensors: 580 bytes
// CHECK-NEXT:    par.bucket_all_reduce axes=["x", "y"] n=8 bf16 2 tensors: 504 bytes
// CHECK-NEXT:    par.all_reduce axes=["x"] n=2 f32 tensor<f32>: 4 bytes
// CHECK-NEXT:    total: 3 collectives, 1088 bytes per device
// BADFILE: cannot open report file '/nonexistent/dir/r.txt'
par.mesh @mesh ["x"=2, "y"=4]
func.func @collectives(%a: tensor<8x16xf32>, %b: tensor<8x16xbf16>, %c: tensor<8x4xf32>, %d: tensor<8x16xi8>) {
  %0 = par.all_reduce %a on @mesh axes = ["x"] kind = sum : tensor<8x16xf32>
  %1 = par.all_reduce %b on @mesh axes = ["x", "y"] kind = max : tensor<8x16xbf16>
  %2 = par.all_gather %c on @mesh axes = ["y"] dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  %3 = par.reduce_scatter %a on @mesh axes = ["y"] dim = 1 kind = sum : tensor<8x16xf32> -> tensor<8x4xf32>
  %4 = par.all_to_all %d on @mesh axes = ["x"] split_dim = 0 concat_dim = 1 : tensor<8x16xi8> -> tensor<4x32xi8>
  %5 = par.broadcast %a on @mesh axes = ["x"] root = [0] : tensor<8x16xf32>
  %6 = par.all_slice %a on @mesh axes = ["y"] dim = 0 : tensor<8x16xf32> -> tensor<2x16xf32>
  par.send %a on @mesh axes = ["x"] dest = [1] : tensor<8x16xf32>
  %7 = par.recv on @mesh axes = ["x"] source = [0] : tensor<8x16xf32>
  return
}
func.func @nothing(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %a : tensor<8x16xf32>
}
func.func @buckets(%a: tensor<8x16xf32>, %b: tensor<16xf32>, %c: tensor<f32>, %d: tensor<8x16xbf16>, %e: tensor<16xbf16>) {
  %0:3 = par.bucket_all_reduce %a, %b, %c on @mesh axes = ["x"] kind = sum : tensor<8x16xf32>, tensor<16xf32>, tensor<f32>
  %1:2 = par.bucket_all_reduce %d, %e on @mesh axes = ["x", "y"] kind = sum : tensor<8x16xbf16>, tensor<16xbf16>
  %2 = par.all_reduce %c on @mesh axes = ["x"] kind = sum : tensor<f32>
  return
}
