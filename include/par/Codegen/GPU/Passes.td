//===- Passes.td - Codegen/GPU passes -----------------------------*- tablegen -*-===//

#ifndef PAR_CODEGEN_GPU_PASSES_TD
#define PAR_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def MapLinalgToGPU : Pass<"par-gpu-map-linalg", "ModuleOp"> {
  let summary = "Turns every linalg op on buffers into a gpu.launch kernel";
  let description = [{
    After bufferization and the runtime's matmul path (contiguous GEMMs are
    cuBLAS calls by then), every remaining structured op on memrefs
    (`memref.copy` first becomes `linalg.copy`; named ops are generalized)
    becomes one `gpu.launch`:

    - no reduction loop: the iteration space flattened, one thread per
      point, 256 threads per block;
    - reduction loops whose every output is `combine(acc, f(inputs))` with
      `combine` one of add, mul, max, min (float or integer): one block per
      point of the parallel loops; the block's threads stride over the
      flattened reduction space, each folding its share with `combine`,
      then one `gpu.all_reduce` (shuffles and shared memory) and the first
      thread folds the total into the output. Float reductions are thus
      reassociated (the order differs from the CPU's loop);
    - any other reduction (argmax's paired outputs): one thread per point
      of the parallel loops running the reduction loops in order.

    Indices follow the op's indexing maps; `linalg.index` becomes the
    thread's loop index. A linalg op the pass cannot map (dynamic loop
    ranges it cannot compute, a body with side effects) is an error naming
    the op.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block for elementwise kernels and the largest "
           "block of a reduction kernel">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def DeviceMemory : Pass<"par-gpu-device-memory", "ModuleOp"> {
  let summary = "Puts every buffer of host code in device memory";
  let description = [{
    After `par-gpu-map-linalg`: `memref.alloc`/`memref.alloca` become
    `gpu.alloc` and `memref.dealloc` `gpu.dealloc` (made asynchronous by
    `gpu-async-region`; the runtime allocates them stream-ordered from a
    pool, so a steady-state step allocates nothing from the driver);
    `memref.get_global` (a constant's host copy) becomes a device buffer
    made at the function's entry, filled by `gpu.memcpy` and freed at its
    returns. Host code must not read or write device
    memory: a `memref.load` left outside a kernel (a loop bound or a
    branch condition computed on the device) becomes a one-thread kernel
    copying the element to a device scalar, copied to a host scalar the
    host then reads (one synchronization); a `memref.store` left outside a
    kernel is an error naming the op.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

def MergeKernelModules : Pass<"par-gpu-merge-kernel-modules", "ModuleOp"> {
  let summary = "Puts every distinct outlined kernel into one gpu.module";
  let description = [{
    After `gpu-kernel-outlining` (one `gpu.module` per kernel): the kernels
    move into one module, `par_kernels`, each renamed after the module it
    came from (unique), and every `gpu.launch_func` is redirected. One
    module is one serialization (one ptxas and fatbinary run at compile
    time) and one module load per device at run time, instead of one per
    kernel. Identical kernels (the same printed form with the name left
    out, par/Codegen/KernelKey.h: the L layers' copies) are kept once and
    their launches share it, so the fatbin's kernel count is flat in the
    depth.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def StreamOrder : Pass<"par-gpu-stream-order", "func::FuncOp"> {
  let summary = "Drops the host synchronizations gpu-async-region puts "
                "before runtime calls";
  let description = [{
    After `gpu-async-region`: a cuda program runs on the legacy default
    stream, and the par runtime's CUDA backend works on a stream created
    blocking with respect to it, so a collective or cuBLAS call is ordered
    after the kernels launched before it and before those launched after
    it without any host synchronization. The pass erases every blocking
    `gpu.wait` right before a call (of the runtime, or of another function
    of the program, which starts its own chain on the same stream). Those
    before a return (the outputs are ready when the function returns, as
    the calling convention promises) and before a host read of a copied
    value stay.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

#endif // PAR_CODEGEN_GPU_PASSES_TD
