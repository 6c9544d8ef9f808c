//===- ModelProfile.h - What one model costs, per sample --------*- C++ -*-===//
//
// The planner reads a model once: every kernel of its forward with its
// FLOPs and bytes per sample and whether tensor parallelism splits it
// (from par's own sharding propagation of the model's annotations), the
// collectives par's partitioner places in the forward over the
// tensor-parallel axis (par-spmd on a copy, with and without sequence
// parallelism), the same for the gradient function par-autodiff makes of
// it (the backward is what it adds), and the parameters. Every
// configuration is then priced from this profile analytically
// (CostModel.h): nothing is allocated, and the model is differentiated once
// and partitioned twice, whatever the number of candidates.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PLANNING_MODELPROFILE_H
#define PAR_PLANNING_MODELPROFILE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::par::planning {

/// One kernel of the forward.
struct KernelCost {
  std::string name;      // the op's name (linalg.matmul, ...)
  bool gemm = false;     // a contraction (matrix units)
  double flops = 0;      // per sample (or per step if !perSample)
  double bytes = 0;      // operands + results, in the model's dtype
  double resultBytes = 0; // results only (what the backward may keep)
  bool tpSplit = false;  // split over the tensor-parallel axis
  bool attentionCore = false; // a result with two sequence-long dims
  bool perSample = true; // scales with the batch
};

/// One collective par's partitioner placed in the forward over the
/// tensor-parallel axis.
struct TPCollective {
  std::string kind;       // all_reduce, all_gather, reduce_scatter, ...
  double fullBytes = 0;   // the whole (tp-unsplit) tensor, per sample
};

struct ModelProfile {
  std::string function;   // the profiled function
  int64_t batch = 1;      // the model's batch (its data arguments' dim 0)
  int64_t seq = 1;        // its sequence length (dim 1), 1 if none
  std::string dtype;      // the model's element type (f32, bf16, ...)
  int64_t dtypeBytes = 4;
  std::string dpAxis, tpAxis; // the mesh axes of the data and the weights
  int64_t meshDP = 1, meshTP = 1; // their sizes in the model's mesh
  int64_t layers = 1;     // attention layers (softmax over a seq x seq)
  double hiddenBytes = 0; // the residual stream per sample (stage boundary)
  double params = 0;      // parameter elements
  int64_t paramTensors = 0; // parameter arguments
  double tpSplitParams = 0; // of which split over tp
  /// The largest t every tp-split dimension divides (0: no tp split).
  int64_t tpDivisor = 0;
  /// The forward's kernels as written (memory, layers, FLOPs) and as par
  /// runs them, elementwise chains fused (time; empty if fusion failed).
  std::vector<KernelCost> kernels;
  std::vector<KernelCost> fusedKernels;
  std::vector<TPCollective> tpCollectives;   // without sequence parallelism
  std::vector<TPCollective> spCollectives;   // with it
  /// par-autodiff's gradient function (forward and backward in one), its
  /// kernels (elementwise chains fused) and tp collectives; empty when autodiff did not take the model
  /// (`backwardNote` says why: the backward is then 2 x the forward).
  std::string gradFunction;
  std::vector<KernelCost> gradKernels;
  std::vector<TPCollective> gradTPCollectives, gradSPCollectives;
  std::string backwardNote;

  /// Sum of gemm FLOPs per sample (the forward's model FLOPs).
  double gemmFlopsPerSample() const;
};

/// Profiles the model function of `module` (`entry`, or the one taking
/// par.param arguments and returning a scalar loss). `module` is left
/// unchanged. Returns false with `error` saying why (no such function,
/// dynamic shapes, partitioning failed).
bool profileModel(ModuleOp module, const std::string &entry,
                  ModelProfile &out, std::string &error);

} // namespace mlir::par::planning

#endif // PAR_PLANNING_MODELPROFILE_H
