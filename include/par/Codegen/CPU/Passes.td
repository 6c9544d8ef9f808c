//===- Passes.td - Codegen/CPU passes -----------------------------*- tablegen -*-===//

#ifndef PAR_CODEGEN_CPU_PASSES_TD
#define PAR_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def DecomposeAggregatedOps : Pass<"par-decompose-aggregated-ops", "ModuleOp"> {
  let summary = "Rewrites aggregated linalg ops (softmax) into structured ops";
  let description = [{
    Ops implementing `linalg::AggregatedOpInterface` (e.g. `linalg.softmax`)
    are replaced by their decomposition (reductions and elementwise
    generics) on tensors, so that they bufferize and lower to loops like
    any other structured op. Runs after partitioning: sharding works on the
    aggregated op, whose rule is simpler. par's loss-scaling ops go the same
    way: `par.scale_loss` forwards its loss, `par.all_finite` (partitioned:
    this device's check) becomes a min-reduction of `|x| < inf` per input,
    `par.update_loss_scale` scalar arithmetic.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FuseElementwise : Pass<"par-fuse-elementwise", "ModuleOp"> {
  let summary = "Fuses chains of elementwise generics on tensors";
  let description = [{
    Fuses a `linalg.generic` producer into its `linalg.generic` consumer
    when the producer has no other user and the consumer reads it through
    a permutation of all its loops (so no producer element is recomputed,
    e.g. inside a contraction), so that a chain like
    `x * scale + bias -> tanh` runs as one loop nest. Unlike upstream's
    `linalg-fuse-elementwise-ops` it neither moves reshapes nor touches
    named ops, so matmuls stay matmuls and keep the BLAS path.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def MarkEntryPoints : Pass<"par-mark-entry-points", "ModuleOp"> {
  let summary = "Asks for C interfaces on the public functions";
  let description = [{
    Sets `llvm.emit_c_interface` on every public function with a body, so
    that func-to-LLVM emits `_mlir_ciface_<name>` taking memref descriptors
    by pointer; `par-emit-packed-entry` then wraps those. Drops the
    `par.sharding`/`par.global_type` signature attributes: the manifest
    (par-export-manifest) holds them, and below tensor level they would
    describe memrefs.
  }];
}

def EmitPackedEntry : Pass<"par-emit-packed-entry", "ModuleOp"> {
  let summary = "Adds one `void par_packed_<name>(void **)` per entry point";
  let description = [{
    After lowering to the LLVM dialect: for each `_mlir_ciface_<name>`, an
    exported `par_packed_<name>(void **argv)` that calls it with the
    pointers in argv (results first, then arguments, each a memref
    descriptor). A driver can then call any entry point through one C
    signature, whatever its arity. Also removes the (by now unused)
    `par.mesh` ops, leaving a module that translates to LLVM IR.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // PAR_CODEGEN_CPU_PASSES_TD
