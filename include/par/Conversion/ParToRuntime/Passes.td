//===- Passes.td - Conversion/ParToRuntime passes -----------------*- tablegen -*-===//

#ifndef PAR_CONVERSION_PARTORUNTIME_PASSES_TD
#define PAR_CONVERSION_PARTORUNTIME_PASSES_TD

include "mlir/Pass/PassBase.td"

def CollectivesToRuntime : Pass<"par-collectives-to-runtime", "ModuleOp"> {
  let summary = "Lowers buffer-form collectives to the runtime's kernel calls";
  let description = [{
    Each `par.buffer_*` op (what one-shot-bufferize makes of a collective)
    becomes one call of the runtime's kernel ABI taking only scalars: buffer
    addresses, block counts and the dtype, axes and coordinate codes. The
    same code then runs over MPI (host memory) or NCCL (device memory).

    ```mlir
    par.buffer_all_reduce %in, %out on @mesh axes = ["tp"] kind = sum : memref<8xf32>, memref<8xf32>
    // becomes
    call @par_rt_k_all_reduce(%in_addr, %out_addr, %c8, %dtype, %sum, %axes)
        : (i64, i64, i64, i32, i32, i64) -> ()
    ```

    A bucket (`par.buffer_bucket_all_reduce`, `par.buffer_all_reduce_start`)
    passes its members as an array of (in, out, count) i64 triples, a stack
    array allocated once at the function's entry:
    `par_rt_k_bucket_all_reduce(members, n, dtype, kind, axes)`, or
    `%h = par_rt_k_all_reduce_start(...) : i64` and, for
    `par.buffer_wait`, `par_rt_k_wait(%h)`.

    Element types the runtime has no code for and more than 8 mesh axes are
    errors at the op.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MatmulToRuntime : Pass<"par-matmul-to-runtime", "ModuleOp"> {
  let summary = "Lowers buffer-level f32/f64 matmuls to the runtime's BLAS call";
  let description = [{
    A `linalg.matmul` on contiguous, static f32 or f64 memrefs with the
    default indexing maps becomes `par_rt_k_matmul(a, b, c, M, N, K, dtype,
    accumulate)` (OpenBLAS on the CPU backend, cuBLAS on CUDA); accumulate
    is 1, or with `fold-zero-fill` 0 (C overwritten, the fill erased) when C
    was zero-filled right before with nothing touching memory between. The
    cuda target folds (a pass over C less per GEMM); the CPU does not, since
    OpenBLAS picks other kernels for beta = 0, whose float rounding differs
    from today's trajectories. A
    `linalg.generic` that is a batch of GEMMs (body `acc + a * b`, one
    reduction loop, leading batch loops shared by all three operands, each
    operand's last two dims a possibly transposed matrix) becomes
    `par_rt_k_batch_matmul` (attention's QK^T and PV, generalized matmuls).
    Mixed precision's contractions (f16/bf16 inputs, widened with
    `arith.extf` in a generic's body, into an f32 accumulator) become
    `par_rt_k_batch_matmul_mixed`, which widens the inputs exactly and runs
    the f32 GEMM. Other contractions are left for loop lowering.
  }];
  let options = [
    Option<"foldZeroFill", "fold-zero-fill", "bool", /*default=*/"false",
           "Fold a zero fill of C right before a GEMM into it (accumulate 0)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // PAR_CONVERSION_PARTORUNTIME_PASSES_TD
