// RUN: par-opt %s --par-bucket-reductions -split-input-file | FileCheck %s
// RUN: par-opt %s --par-bucket-reductions=bucket-bytes=600 -split-input-file | FileCheck %s --check-prefix=CAP
// RUN: par-opt %s --par-bucket-reductions=bucket-bytes=0 -split-input-file | FileCheck %s --check-prefix=OFF --implicit-check-not=par.bucket_all_reduce
// RUN: not par-opt %s --par-bucket-reductions=bucket-bytes=-1 -split-input-file 2>&1 | FileCheck %s --check-prefix=NEG

// NEG: bucket-bytes must be non-negative, got -1

// Tests that independent all-reduces of one group, kind and element type
// become one bucket at the last member, in program order; the compute
// between them moves above the bucket; the results replace the members'.
// With a cap of 600 bytes the first two (512 + 64 bytes) fill a bucket and
// the third (256) starts a new one, alone: it stays a plain all_reduce.
// With bucket-bytes=0 nothing changes.
// CHECK-LABEL: func.func @grads
// CHECK-SAME:    (%[[A:.*]]: tensor<8x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[C:.*]]: tensor<64xf32>)
// CHECK-NOT:     par.all_reduce
// CHECK:         %[[X:.*]] = arith.addf %[[B]], %[[B]]
// CHECK-NEXT:    %[[R:.*]]:3 = par.bucket_all_reduce %[[A]], %[[X]], %[[C]] on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>
// CHECK-NEXT:    return %[[R]]#0, %[[R]]#1, %[[R]]#2
// CAP-LABEL: func.func @grads
// CAP:         arith.addf
// CAP-NEXT:    %[[R:.*]]:2 = par.bucket_all_reduce %{{.*}}, %{{.*}} on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>, tensor<16xf32>
// CAP-NEXT:    %[[S:.*]] = par.all_reduce %{{.*}} on @mesh axes = ["dp"] kind = sum : tensor<64xf32>
// CAP-NEXT:    return %[[R]]#0, %[[R]]#1, %[[S]]
// OFF-LABEL: func.func @grads
// OFF-COUNT-3: par.all_reduce
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @grads(%a: tensor<8x16xf32>, %b: tensor<16xf32>, %c: tensor<64xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<8x16xf32>
  %x = arith.addf %b, %b : tensor<16xf32>
  %1 = par.all_reduce %x on @mesh axes = ["dp"] kind = sum : tensor<16xf32>
  %2 = par.all_reduce %c on @mesh axes = ["dp"] kind = sum : tensor<64xf32>
  return %0, %1, %2 : tensor<8x16xf32>, tensor<16xf32>, tensor<64xf32>
}

// -----

// Tests that a use of a member closes its bucket: %1 is used before %2, so
// moving %0 and %1 down to %2 would break dominance; %0 and %1 form a
// bucket, %2 and %3 another.
// CHECK-LABEL: func.func @dependency
// CHECK:         %[[R:.*]]:2 = par.bucket_all_reduce %arg0, %arg1 on @mesh axes = ["dp"] kind = sum
// CHECK-NEXT:    %[[Y:.*]] = arith.mulf %[[R]]#1, %[[R]]#1
// CHECK-NEXT:    %[[S:.*]]:2 = par.bucket_all_reduce %[[Y]], %arg2 on @mesh axes = ["dp"] kind = sum
// CHECK-NEXT:    return %[[R]]#0, %[[S]]#0, %[[S]]#1
par.mesh @mesh ["dp"=2]
func.func @dependency(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %1 = par.all_reduce %b on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %y = arith.mulf %1, %1 : tensor<4xf32>
  %2 = par.all_reduce %y on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %3 = par.all_reduce %c on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  return %0, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a use inside a nested region closes the bucket too.
// CHECK-LABEL: func.func @nested_use
// CHECK:         par.all_reduce %arg0
// CHECK:         scf.if
// CHECK:         par.all_reduce %arg1
// CHECK-NOT:     par.bucket_all_reduce
par.mesh @mesh ["dp"=2]
func.func @nested_use(%a: tensor<4xf32>, %b: tensor<4xf32>, %p: i1) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %t = scf.if %p -> tensor<4xf32> {
    scf.yield %0 : tensor<4xf32>
  } else {
    scf.yield %b : tensor<4xf32>
  }
  %1 = par.all_reduce %b on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  return %t, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that different axes, kinds and element types are never mixed: each
// key gets its own bucket, the buckets interleave as their members do.
// CHECK-LABEL: func.func @keys
// CHECK-DAG:     par.bucket_all_reduce %arg0, %arg3 on @mesh axes = ["dp"] kind = sum : tensor<4xf32>, tensor<4xf32>
// CHECK-DAG:     par.bucket_all_reduce %arg1, %arg4 on @mesh axes = ["tp"] kind = sum : tensor<4xf32>, tensor<4xf32>
// CHECK-DAG:     par.bucket_all_reduce %arg2, %arg5 on @mesh axes = ["dp"] kind = sum : tensor<4xbf16>, tensor<4xbf16>
// CHECK-DAG:     par.all_reduce %arg0 on @mesh axes = ["dp"] kind = max : tensor<4xf32>
// CHECK-DAG:     par.all_reduce %arg0 on @mesh axes = ["dp", "tp"] kind = sum : tensor<4xf32>
par.mesh @mesh ["dp"=2, "tp"=2]
func.func @keys(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xbf16>, %d: tensor<4xf32>, %e: tensor<4xf32>, %f: tensor<4xbf16>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %1 = par.all_reduce %b on @mesh axes = ["tp"] kind = sum : tensor<4xf32>
  %2 = par.all_reduce %c on @mesh axes = ["dp"] kind = sum : tensor<4xbf16>
  %m = par.all_reduce %a on @mesh axes = ["dp"] kind = max : tensor<4xf32>
  %w = par.all_reduce %a on @mesh axes = ["dp", "tp"] kind = sum : tensor<4xf32>
  %3 = par.all_reduce %d on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %4 = par.all_reduce %e on @mesh axes = ["tp"] kind = sum : tensor<4xf32>
  %5 = par.all_reduce %f on @mesh axes = ["dp"] kind = sum : tensor<4xbf16>
  return %0, %1, %2, %3, %4, %5, %m, %w : tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that singletons stay plain all_reduces: a lone reduction, one over
// the cap (1024 bytes > 600 with the small cap) and one with a dynamic
// shape.
// CHECK-LABEL: func.func @singletons
// CHECK-NOT:     par.bucket_all_reduce
// CAP-LABEL: func.func @singletons
// CAP-NOT:       par.bucket_all_reduce
// CAP:           return
par.mesh @mesh ["dp"=2]
func.func @singletons(%a: tensor<256xf32>, %d: tensor<?xf32>) -> (tensor<256xf32>, tensor<?xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<256xf32>
  %1 = par.all_reduce %d on @mesh axes = ["dp"] kind = sum : tensor<?xf32>
  return %0, %1 : tensor<256xf32>, tensor<?xf32>
}

// -----

// Tests that point-to-point traffic closes every bucket, and that blocks
// of nested regions are bucketed on their own.
// CHECK-LABEL: func.func @send_and_loop
// CHECK:         par.all_reduce %arg0
// CHECK-NEXT:    par.send
// CHECK-NEXT:    par.all_reduce %arg1
// CHECK:         scf.for
// CHECK:           par.bucket_all_reduce %{{.*}}, %{{.*}} on @mesh axes = ["dp"] kind = sum : tensor<4xf32>, tensor<4xf32>
// CHECK:           scf.yield
par.mesh @mesh ["dp"=2]
func.func @send_and_loop(%a: tensor<4xf32>, %b: tensor<4xf32>, %n: index) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  par.send %a on @mesh axes = ["dp"] dest = [1] : tensor<4xf32>
  %1 = par.all_reduce %b on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %a) -> tensor<4xf32> {
    %x = par.all_reduce %acc on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
    %y = par.all_reduce %b on @mesh axes = ["dp"] kind = sum : tensor<4xf32>
    %z = arith.addf %x, %y : tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  return %0, %1, %r : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

par.mesh @mesh ["dp"=2]

// A consumer that is not needed yet (mixed precision's widening of each
// reduced 16-bit gradient) moves down to its first user, the return, and
// closes no bucket: both reductions share one.
// CHECK-LABEL: func.func @consumers_wait
// CHECK-NEXT: %[[B:.*]]:2 = par.bucket_all_reduce
// CHECK-DAG: arith.extf %[[B]]#0
// CHECK-DAG: arith.extf %[[B]]#1
// CHECK: return
func.func @consumers_wait(%a: tensor<8xbf16>, %b: tensor<4xbf16>) -> (tensor<8xf32>, tensor<4xf32>) {
  %ra = par.all_reduce %a on @mesh axes = ["dp"] kind = sum : tensor<8xbf16>
  %wa = arith.extf %ra : tensor<8xbf16> to tensor<8xf32>
  %rb = par.all_reduce %b on @mesh axes = ["dp"] kind = sum : tensor<4xbf16>
  %wb = arith.extf %rb : tensor<4xbf16> to tensor<4xf32>
  return %wa, %wb : tensor<8xf32>, tensor<4xf32>
}
