// RUN: par-opt %s --par-async-collectives=always=true -split-input-file | FileCheck %s
// RUN: par-opt %s "--par-async-collectives=all-reduces=true always=true" -split-input-file | FileCheck %s --check-prefix=ALL
// RUN: par-opt %s --par-async-collectives -split-input-file | FileCheck %s --check-prefix=DEFAULT

// By default a collective with nothing but allocations, views and
// constants before its first conflicting access stays blocking (the call
// case below); with work in between it is split (the first case).
// DEFAULT-LABEL: func.func @overlap
// DEFAULT: par.buffer_all_reduce_start
// DEFAULT-LABEL: func.func @call
// DEFAULT: par.buffer_bucket_all_reduce
// DEFAULT-NEXT: call @opaque

// Tests that a bucket starts where it was and is waited for right before
// the first op that reads its output; the compute in between (on other
// buffers, and reading an input) stays between start and wait. Without
// all-reduces=true a plain buffer_all_reduce stays blocking.
// CHECK-LABEL: func.func @overlap
// CHECK:         %[[H:.*]] = par.buffer_all_reduce_start ins(%[[A:.*]], %[[B:.*]] : memref<16xf32>, memref<4xf32>) outs(%[[RA:.*]], %[[RB:.*]] : memref<16xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[X:.*]] : memref<8xf32>) outs(%[[Y:.*]] : memref<8xf32>)
// CHECK:         memref.copy %[[A]], %[[Z:.*]] :
// CHECK-NEXT:    par.buffer_all_reduce %[[Y]], %[[Y2:.*]] on
// CHECK-NEXT:    par.buffer_wait %[[H]] ins(%[[A]], %[[B]] : memref<16xf32>, memref<4xf32>) outs(%[[RA]], %[[RB]] : memref<16xf32>, memref<4xf32>)
// CHECK-NEXT:    memref.copy %[[RB]], %{{.*}} :
// ALL-LABEL: func.func @overlap
// ALL:         par.buffer_all_reduce_start ins(%{{.*}}, %{{.*}} :
// ALL:         %[[H2:.*]] = par.buffer_all_reduce_start ins(%[[Y:.*]] : memref<8xf32>) outs(%[[Y2:.*]] : memref<8xf32>)
// ALL-NEXT:    par.buffer_wait
// ALL-NEXT:    memref.copy
// ALL-NEXT:    par.buffer_wait %[[H2]]
// ALL-NEXT:    return
#id = affine_map<(i) -> (i)>
par.mesh @mesh ["dp"=2]
func.func @overlap(%x: memref<8xf32>, %out: memref<4xf32>) {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<4xf32>
  %ra = memref.alloc() : memref<16xf32>
  %rb = memref.alloc() : memref<4xf32>
  %y = memref.alloc() : memref<8xf32>
  %z = memref.alloc() : memref<16xf32>
  %y2 = memref.alloc() : memref<8xf32>
  par.buffer_bucket_all_reduce ins(%a, %b : memref<16xf32>, memref<4xf32>) outs(%ra, %rb : memref<16xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = arith.mulf %i, %i : f32
    linalg.yield %s : f32
  }
  memref.copy %a, %z : memref<16xf32> to memref<16xf32>
  par.buffer_all_reduce %y, %y2 on @mesh axes = ["dp"] kind = sum : memref<8xf32>, memref<8xf32>
  memref.copy %rb, %out : memref<4xf32> to memref<4xf32>
  return
}

// -----

// Tests that writing an input ends the window (the runtime may still read
// it), and that accesses through a view count as accesses to the viewed
// buffer.
// CHECK-LABEL: func.func @write_input
// CHECK:         par.buffer_all_reduce_start
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    par.buffer_wait
// CHECK-NEXT:    memref.store
// CHECK-LABEL: func.func @through_view
// CHECK:         par.buffer_all_reduce_start
// CHECK-NEXT:    memref.subview
// CHECK-NEXT:    par.buffer_wait
// CHECK-NEXT:    memref.load
par.mesh @mesh ["dp"=2]
func.func @write_input(%v: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %c = memref.alloc() : memref<4xf32>
  %d = memref.alloc() : memref<4xf32>
  par.buffer_bucket_all_reduce ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%c, %d : memref<4xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  %r = memref.load %a[%c0] : memref<4xf32>
  memref.store %v, %b[%c0] : memref<4xf32>
  return %r : f32
}
func.func @through_view() -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<4xf32>
  %c = memref.alloc() : memref<4xf32>
  %a2 = memref.alloc() : memref<4xf32>
  %c2 = memref.alloc() : memref<4xf32>
  par.buffer_bucket_all_reduce ins(%a, %a2 : memref<4xf32>, memref<4xf32>) outs(%c, %c2 : memref<4xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  %s = memref.subview %c[1] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1], offset: 1>>
  %r = memref.load %s[%c0] : memref<2xf32, strided<[1], offset: 1>>
  return %r : f32
}

// -----

// Tests that a call (unknown effects) ends the window, that a nested use
// inside a region does, and that with nothing in the way the wait goes
// before the terminator.
// CHECK-LABEL: func.func @call
// CHECK:         par.buffer_all_reduce_start
// CHECK-NEXT:    par.buffer_wait
// CHECK-NEXT:    call @opaque
// CHECK-LABEL: func.func @nested
// CHECK:         par.buffer_all_reduce_start
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    par.buffer_wait
// CHECK-NEXT:    scf.if
// CHECK-LABEL: func.func @to_the_end
// CHECK:         par.buffer_all_reduce_start
// CHECK-NEXT:    memref.alloc
// CHECK-NEXT:    memref.copy
// CHECK-NEXT:    par.buffer_wait
// CHECK-NEXT:    return
par.mesh @mesh ["dp"=2]
func.func private @opaque(memref<8xf32>)
func.func @call(%x: memref<8xf32>) {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %c = memref.alloc() : memref<4xf32>
  %d = memref.alloc() : memref<4xf32>
  par.buffer_bucket_all_reduce ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%c, %d : memref<4xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  call @opaque(%x) : (memref<8xf32>) -> ()
  return
}
func.func @nested(%p: i1, %v: f32) {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %c = memref.alloc() : memref<4xf32>
  %d = memref.alloc() : memref<4xf32>
  par.buffer_bucket_all_reduce ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%c, %d : memref<4xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  %c0 = arith.constant 0 : index
  scf.if %p {
    memref.store %v, %d[%c0] : memref<4xf32>
  }
  return
}
func.func @to_the_end(%x: memref<8xf32>) -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %c = memref.alloc() : memref<4xf32>
  %d = memref.alloc() : memref<4xf32>
  par.buffer_bucket_all_reduce ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%c, %d : memref<4xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  %e = memref.alloc() : memref<8xf32>
  memref.copy %x, %e : memref<8xf32> to memref<8xf32>
  return %c : memref<4xf32>
}

// -----

// Tests that function arguments may alias each other (a write to another
// argument ends the window), while fresh allocations alias nothing.
// CHECK-LABEL: func.func @arguments
// CHECK:         par.buffer_all_reduce_start
// CHECK-NEXT:    memref.store %{{.*}}, %[[T:.*]][
// CHECK-NEXT:    par.buffer_wait
// CHECK-NEXT:    memref.store %{{.*}}, %arg1[
par.mesh @mesh ["dp"=2]
func.func @arguments(%in: memref<4xf32>, %other: memref<4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %out = memref.alloc() : memref<4xf32>
  %in2 = memref.alloc() : memref<4xf32>
  %out2 = memref.alloc() : memref<4xf32>
  %t = memref.alloc() : memref<4xf32>
  par.buffer_bucket_all_reduce ins(%in, %in2 : memref<4xf32>, memref<4xf32>) outs(%out, %out2 : memref<4xf32>, memref<4xf32>) on @mesh axes = ["dp"] kind = sum
  memref.store %v, %t[%c0] : memref<4xf32>
  memref.store %v, %other[%c0] : memref<4xf32>
  return
}
