//===- NormalizeTorch.cpp - par-normalize-torch ---------------------------===//
//
// The frontend normalisation as one pipeline: par-compile runs it first
// (lib/Pipelines), `par-opt --par-normalize-torch` alone. Every step
// preserves semantics, so it is always on: a program without torch's forms
// passes through unchanged. docs/RationaleFrontend.md says what each pass
// matches and why.
//
//===----------------------------------------------------------------------===//

#include "par/Frontend/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::par;

void mlir::par::buildNormalizeTorchPipeline(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  // Scalar bodies first: fpowi becomes multiplications the later passes
  // (and autodiff) see as ordinary body ops.
  fn.addPass(createExpandFPowI());
  // Pads become fill + insert_slice, ops the unit-dim folding knows.
  fn.addPass(createDecomposePad());
  // The dead argmax goes before the unit dims are folded: folding a
  // two-result reduction would carry the index result along.
  fn.addPass(createEraseDeadResults());
  // Keepdim reductions and broadcasts lose their constant-0 map results.
  fn.addPass(createFoldUnitDims());
  // On the folded forms: the gather's generic is then over the rows only,
  // its result no longer a [N, 1] keepdim tensor.
  fn.addPass(createRewriteRowGather());
  // Attention's bmm over [batch * heads] (GQA's p @ v, operands merged
  // from different batch shapes, included): a contraction over the unmerged
  // dims, so that dp and tp shard them separately (after the unit-dim
  // folding, which would otherwise see the new generic's unit batch dims).
  fn.addPass(createExpandBatchMatmul());
}

void mlir::par::registerParFrontendPipelines() {
  PassPipelineRegistration<>(
      "par-normalize-torch",
      "Bring torch-mlir's linalg-on-tensors output to par's forms: fpowi "
      "expanded, pads decomposed, dead argmax results erased, unit dims "
      "folded, row gathers from computed tensors as compare-select-sums, "
      "batch matmuls over collapsed batch dims expanded",
      buildNormalizeTorchPipeline);
}
