// RUN: par-opt %s --par-mixed-precision=compute=f16 -split-input-file -verify-diagnostics
// Options that name nothing are errors naming the option's value and what
// it may be (on the module: they concern no op).
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-mixed-precision=compute=f8 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: error: par-mixed-precision: unknown compute type 'f8' (expected f16 or bf16)
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-mixed-precision=compute=f32 2>&1 | FileCheck %s --check-prefix=F32
// F32: error: par-mixed-precision: unknown compute type 'f32' (expected f16 or bf16)
// RUN: not par-opt %S/Inputs/loss-matmul.mlir "--par-mixed-precision=keep=matmul,attention" 2>&1 | FileCheck %s --check-prefix=KEEP
// KEEP: error: par-mixed-precision: keep-list entry 'attention' names no op kind (expected matmul, elementwise, reduction or softmax)
// The same through par-compile's options.
// RUN: not par-compile %S/Inputs/loss-matmul.mlir --options="optimizer=adamw precision=fp8" -o %t 2>&1 | FileCheck %s --check-prefix=COMPILE
// COMPILE: error: par-mixed-precision: unknown compute type 'fp8' (expected f16 or bf16)
// Running the pass twice: the second run finds the mark of the first, on
// the function.
// RUN: not par-opt %S/Inputs/loss-matmul.mlir --par-mixed-precision=compute=bf16 --par-mixed-precision=compute=f16 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: loss-matmul.mlir:2:1: error: 'func.func' op is already in mixed precision ('bf16' compute): par-mixed-precision runs once
// A module with no parameters has no master weights.
// RUN: echo "func.func @f(%%x: tensor<4xf32>) -> tensor<4xf32> { return %%x : tensor<4xf32> }" | not par-opt --par-mixed-precision 2>&1 | FileCheck %s --check-prefix=NOPARAM
// NOPARAM: error: par-mixed-precision: no function has arguments marked par.param (the master weights)

// Tests that a function already in mixed precision (marked by an earlier
// run) is not cast again.
// expected-error @+1 {{'func.func' op is already in mixed precision ('f16' compute): par-mixed-precision runs once}}
func.func @again(%x: tensor<4xf32>, %w: tensor<4xf32> {par.param}) -> tensor<4xf32> attributes {par.mixed_precision = f16} {
  return %w : tensor<4xf32>
}

// -----

// Tests that a program whose parameters are already 16-bit is refused:
// the master weights must be f32.
// expected-error @+1 {{'func.func' op parameter #1 is 'tensor<3x2xf16>': par-mixed-precision keeps f32 master weights and casts their uses, so it needs an f32 program}}
func.func @f16_param(%x: tensor<4x3xf16>, %w: tensor<3x2xf16> {par.param}) -> tensor<4x2xf16> {
  %c0 = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<4x2xf16>
  %z = linalg.fill ins(%c0 : f16) outs(%e : tensor<4x2xf16>) -> tensor<4x2xf16>
  %m = linalg.matmul ins(%x, %w : tensor<4x3xf16>, tensor<3x2xf16>) outs(%z : tensor<4x2xf16>) -> tensor<4x2xf16>
  return %m : tensor<4x2xf16>
}

// -----

// Tests that a par.precision other than "f32" or "compute" is an error at
// the attribute (the dialect verifies it).
#id = affine_map<(i) -> (i)>
func.func @bad_precision(%w: tensor<4xf32> {par.param}) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{'par.precision' must be "f32" or "compute"}}
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%w : tensor<4xf32>) outs(%e : tensor<4xf32>) attrs = {par.precision = "f64"} {
  ^bb0(%v: f32, %o: f32):
    %t = math.exp %v : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
