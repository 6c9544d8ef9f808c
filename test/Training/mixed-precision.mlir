// RUN: par-opt %s -split-input-file --par-mixed-precision=compute=bf16 | FileCheck %s
// RUN: par-opt %s -split-input-file --par-mixed-precision=compute=bf16 | grep -c "arith.truncf %in : f32 to bf16" | FileCheck %s --check-prefix=NTRUNC
// RUN: par-opt %s -split-input-file "--par-mixed-precision=compute=f16 keep=none" | FileCheck %s --check-prefix=NONE
// RUN: par-opt %s -split-input-file --par-mixed-precision=compute=f16 --par-autodiff | FileCheck %s --check-prefix=GRAD

#id = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> ()>

// Tests the four op kinds with the default keep-list (reduction,softmax)
// on matmul + bias + tanh + softmax + product + sum:
// - every f32 value that meets a 16-bit op is narrowed once (the input %x,
//   the weights %w and %b, the matmul's f32 result, softmax's f32 result:
//   5 truncating casts, each of a different value; @g below has 4 more:
//   %x, %w, the kept exp's result, the second matmul's result);
// - the matmul reads bf16 and accumulates into an f32 init, result f32;
// - elementwise ops read and write bf16, their bodies compute in f32 and
//   round once;
// - softmax and the final sum (kept) read f32: the tanh result is widened
//   for softmax, but the product still reads the bf16 tanh itself (a value
//   widened from 16 bits narrows to its source: no extf -> truncf chain);
// - the function's result stays f32 and the function is marked.
// NTRUNC: {{^}}9{{$}}
// CHECK-LABEL: func.func @f(
// CHECK-SAME:    attributes {par.mixed_precision = bf16}
// (Arguments are cast at their first use, so that no cast lives across
// the whole function: pipeline stages can be cut between.)
// CHECK:         %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK:         %[[X:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<4x8xf32>) outs(%{{.*}} : tensor<4x8xbf16>)
// CHECK-NEXT:      ^bb0(%in: f32, %out: bf16):
// CHECK-NEXT:        arith.truncf %in : f32 to bf16
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<8x16xf32>) outs(%{{.*}} : tensor<8x16xbf16>)
// CHECK-NEXT:      ^bb0(%in: f32, %out: bf16):
// CHECK-NEXT:        arith.truncf %in : f32 to bf16
// CHECK:         %[[M:.*]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%[[ACC]] : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:         %[[M16:.*]] = linalg.generic {{.*}} ins(%[[M]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         %[[A:.*]] = linalg.generic {{.*}} ins(%[[M16]], %[[B]] : tensor<4x16xbf16>, tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK-NEXT:      ^bb0(%in: bf16, %in_0: bf16, %out: bf16):
// CHECK-NEXT:        arith.extf %in : bf16 to f32
// CHECK-NEXT:        arith.extf %in_0 : bf16 to f32
// CHECK-NEXT:        arith.addf {{.*}} : f32
// CHECK-NEXT:        arith.truncf {{.*}} : f32 to bf16
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<4x16xbf16>)
// CHECK:           math.tanh {{.*}} : f32
// CHECK:         } -> tensor<4x16xbf16>
// CHECK:         %[[TW:.*]] = linalg.generic {{.*}} ins(%[[T]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NEXT:      ^bb0(%in: bf16, %out: f32):
// CHECK-NEXT:        arith.extf %in : bf16 to f32
// CHECK:         %[[S:.*]] = linalg.softmax dimension(1) ins(%[[TW]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK:         %[[S16:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         %[[U:.*]] = linalg.generic {{.*}} ins(%[[S16]], %[[T]] : tensor<4x16xbf16>, tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         %[[UW:.*]] = linalg.generic {{.*}} ins(%[[U]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK:         %[[L:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[UW]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK-NEXT:      ^bb0(%in: f32, %out: f32):
// CHECK-NEXT:        arith.addf %out, %in : f32
// CHECK:         return %[[L]] : tensor<f32>

// With keep=none the sum reads bf16 but still accumulates into its f32
// init (result f32); softmax computes in f16.
// NONE-LABEL: func.func @f(
// NONE-SAME:    attributes {par.mixed_precision = f16}
// NONE:         linalg.softmax dimension(1) ins(%{{.*}} : tensor<4x16xf16>) outs(%{{.*}} : tensor<4x16xf16>) -> tensor<4x16xf16>
// NONE:         %[[U:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x16xf16>, tensor<4x16xf16>) outs(%{{.*}} : tensor<4x16xf16>)
// NONE:         %[[L:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[U]] : tensor<4x16xf16>) outs(%{{.*}} : tensor<f32>)
// NONE-NEXT:      ^bb0(%in: f16, %out: f32):
// NONE-NEXT:        arith.extf %in : f16 to f32
// NONE-NEXT:        arith.addf %out, {{.*}} : f32
// NONE:         return %[[L]] : tensor<f32>

// The gradient of every master weight is f32 (through the casts' adjoints).
// GRAD-LABEL: func.func @f_grad(
// GRAD-SAME:    -> (tensor<f32>, tensor<8x16xf32>, tensor<4x16xf32>)
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {par.param}, %b: tensor<4x16xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  %a = arith.addf %m, %b : tensor<4x16xf32>
  %t = math.tanh %a : tensor<4x16xf32>
  %es = tensor.empty() : tensor<4x16xf32>
  %s = linalg.softmax dimension(1) ins(%t : tensor<4x16xf32>) outs(%es : tensor<4x16xf32>) -> tensor<4x16xf32>
  %u = arith.mulf %s, %t : tensor<4x16xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction", "reduction"]}
      ins(%u : tensor<4x16xf32>) outs(%zl : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests per-op overrides and operands reused as inits:
// - `par.precision = "f32"` keeps an elementwise op in f32 (it reads the
//   matmul's f32 result as it is, writes f32);
// - a square written `arith.mulf %h, %h` becomes a generic whose init is
//   %h itself, already bf16: its result is bf16 (the init's type);
// - a matmul accumulating into a bf16 value gets that value widened: the
//   accumulator stays f32;
// - `par.precision = "compute"` converts a reduction the keep-list keeps:
//   it reads bf16 (its f32 init stays the accumulator).
// CHECK-LABEL: func.func @g(
// CHECK:         %[[M:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK:         %[[K:.*]] = linalg.generic {{.*}} ins(%[[M]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xf32>) attrs ={{ +}}{par.precision = "f32"}
// CHECK-NEXT:      ^bb0(%in: f32, %out: f32):
// CHECK-NEXT:        math.exp %in : f32
// CHECK:         %[[K16:.*]] = linalg.generic {{.*}} ins(%[[K]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         %[[H:.*]] = linalg.generic {{.*}} ins(%[[K16]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[H]], %[[H]] : tensor<4x16xbf16>, tensor<4x16xbf16>) outs(%[[H]] : tensor<4x16xbf16>)
// CHECK:         } -> tensor<4x16xbf16>
// CHECK:         %[[SQW:.*]] = linalg.generic {{.*}} ins(%[[SQ]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK:         %[[M2:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xbf16>, tensor<8x16xbf16>) outs(%[[SQW]] : tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK:         %[[M216:.*]] = linalg.generic {{.*}} ins(%[[M2]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4x16xbf16>)
// CHECK:         linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[M216]] : tensor<4x16xbf16>) outs(%{{.*}} : tensor<f32>) attrs ={{ +}}{par.precision = "compute"}
// CHECK-NEXT:      ^bb0(%in: bf16, %out: f32):
// CHECK-NEXT:        arith.extf %in : bf16 to f32
#id2 = affine_map<(i, j) -> (i, j)>
#red2 = affine_map<(i, j) -> ()>
func.func @g(%x: tensor<4x8xf32>, %w: tensor<8x16xf32> {par.param}) -> tensor<f32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  %ek = tensor.empty() : tensor<4x16xf32>
  %k = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<4x16xf32>) outs(%ek : tensor<4x16xf32>) attrs = {par.precision = "f32"} {
  ^bb0(%v: f32, %o: f32):
    %r = math.exp %v : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %h = math.tanh %k : tensor<4x16xf32>
  %sq = arith.mulf %h, %h : tensor<4x16xf32>
  %m2 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%sq : tensor<4x16xf32>) -> tensor<4x16xf32>
  %el = tensor.empty() : tensor<f32>
  %zl = linalg.fill ins(%c0 : f32) outs(%el : tensor<f32>) -> tensor<f32>
  %l = linalg.generic {indexing_maps = [#id2, #red2], iterator_types = ["reduction", "reduction"]}
      ins(%m2 : tensor<4x16xf32>) outs(%zl : tensor<f32>) attrs = {par.precision = "compute"} {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %l : tensor<f32>
}
