// par-split-deallocs: the linear-time half of upstream's dealloc
// simplification. A deallocated buffer whose allocation nothing else in the
// op may alias is freed by a dealloc of its own; a returned allocation that
// is both deallocated and retained is not freed and its ownership is its
// condition; a call's results may alias each other and what was passed to
// the call; a value that cannot be traced (a region's result) leaves the
// op as it is.
// RUN: par-opt %s --split-input-file --par-split-deallocs | FileCheck %s

// CHECK-LABEL: func.func @end_of_step
// CHECK-SAME:    (%[[ARG:.*]]: memref<4xf32>, %[[C:.*]]: i1)
// CHECK:         %[[R:.*]]:2 = call @g
// CHECK:         %[[BASE:.*]], %{{.*}}, %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[R]]#1
// CHECK:         %[[X:.*]] = memref.alloc()
// CHECK:         %[[Y:.*]] = memref.alloc()
// CHECK:         %[[Z:.*]] = memref.alloc()
// CHECK-NEXT:    %[[V:.*]] = memref.subview %[[X]]
// CHECK-NEXT:    bufferization.dealloc (%[[X]] : memref<4xf32>) if (%true){{$}}
// CHECK-NEXT:    bufferization.dealloc (%[[Y]] : memref<4xf32>) if (%[[C]]){{$}}
// CHECK-NEXT:    %[[D:.*]] = bufferization.dealloc (%[[BASE]] : memref<f32>) if (%true) retain (%[[R]]#0 : memref<4xf32>)
// CHECK-NEXT:    return %[[R]]#0, %[[Z]], %[[D]], %true
func.func private @g(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
func.func @end_of_step(%a: memref<4xf32>, %c: i1) -> (memref<4xf32>, memref<4xf32>, i1, i1) {
  %true = arith.constant true
  %0:2 = call @g(%a) : (memref<4xf32>) -> (memref<4xf32>, memref<4xf32>)
  %b, %o, %s, %st = memref.extract_strided_metadata %0#1 : memref<4xf32> -> memref<f32>, index, index, index
  %x = memref.alloc() : memref<4xf32>
  %y = memref.alloc() : memref<4xf32>
  %z = memref.alloc() : memref<4xf32>
  %v = memref.subview %x[1] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1], offset: 1>>
  %r:2 = bufferization.dealloc (%b, %x, %y, %z : memref<f32>, memref<4xf32>, memref<4xf32>, memref<4xf32>) if (%true, %true, %c, %true) retain (%0#0, %z : memref<4xf32>, memref<4xf32>)
  return %0#0, %z, %r#0, %r#1 : memref<4xf32>, memref<4xf32>, i1, i1
}

// -----

// Two views of one allocation in the op: they stay together (upstream's
// simplification decides them); so does a buffer passed to the call whose
// result is retained.
// CHECK-LABEL: func.func @aliases
// CHECK:         %[[X:.*]] = memref.alloc()
// CHECK:         %[[Y:.*]] = memref.alloc()
// CHECK:         %[[W:.*]] = memref.alloc()
// CHECK:         %[[R:.*]] = call @h(%[[Y]])
// CHECK:         bufferization.dealloc (%[[W]] : memref<4xf32>) if (%true){{$}}
// CHECK-NEXT:    bufferization.dealloc (%[[X]], %{{.*}}, %[[Y]] : {{.*}}) if (%true, %true, %true) retain (%[[R]] : memref<4xf32>)
func.func private @h(%a: memref<4xf32>) -> memref<4xf32>
func.func @aliases() -> memref<4xf32> {
  %true = arith.constant true
  %x = memref.alloc() : memref<4xf32>
  %y = memref.alloc() : memref<4xf32>
  %w = memref.alloc() : memref<4xf32>
  %r = call @h(%y) : (memref<4xf32>) -> memref<4xf32>
  %v = memref.subview %x[1] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1], offset: 1>>
  %d = bufferization.dealloc (%x, %v, %y, %w : memref<4xf32>, memref<2xf32, strided<[1], offset: 1>>, memref<4xf32>, memref<4xf32>) if (%true, %true, %true, %true) retain (%r : memref<4xf32>)
  return %r : memref<4xf32>
}

// -----

// A retained region result may be anything: the op stays.
// CHECK-LABEL: func.func @untraced
// CHECK:         bufferization.dealloc (%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>) if (%true, %true) retain (%{{.*}} : memref<4xf32>)
// CHECK-NOT:     bufferization.dealloc
func.func @untraced(%c: i1) -> memref<4xf32> {
  %true = arith.constant true
  %x = memref.alloc() : memref<4xf32>
  %y = memref.alloc() : memref<4xf32>
  %r = scf.if %c -> memref<4xf32> {
    scf.yield %x : memref<4xf32>
  } else {
    scf.yield %y : memref<4xf32>
  }
  %d = bufferization.dealloc (%x, %y : memref<4xf32>, memref<4xf32>) if (%true, %true) retain (%r : memref<4xf32>)
  return %r : memref<4xf32>
}
