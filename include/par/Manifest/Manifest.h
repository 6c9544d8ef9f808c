//===- Manifest.h - A compiled artifact's manifest, read --------*- C++ -*-===//
//
// What par-export-manifest writes (sharded.json, reference.json), read into
// plain structs: per function the mesh, the tensors (Tensor.h: types,
// shapes, shardings with axis names resolved to indices, roles), train-step
// feedback, loss-scaling, gradient-compression and pipeline-stage metadata;
// and the module's pipeline section. A malformed function entry does not fail the whole manifest: its message is kept and
// reported when the function is looked up. The manifest library
// (lib/Manifest): plain C++17, no LLVM; the session reads artifacts with it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_MANIFEST_MANIFEST_H
#define PAR_MANIFEST_MANIFEST_H

#include "par/Manifest/Tensor.h"
#include "par/Runtime/par_session.h"

#include <map>
#include <string>
#include <vector>

namespace par::manifest {

struct FunctionSpec {
  std::string name;
  std::string error; // why the entry is unusable; "" if it is fine
  std::vector<std::string> axisNames;
  std::vector<int64_t> sizes;
  std::vector<Tensor> inputs, outputs;
  std::vector<int64_t> feedback; // (result, argument) pairs, flattened
  std::vector<int64_t> donated;  // (result, argument) pairs: in place
  int64_t microBatches = 1;
  int64_t stage = -1;
  std::vector<int64_t> stageArgs;
  /// Roles: the linked functions' names ("" when absent).
  std::string grad, step, update, logits;
  /// Mixed precision: "f16", "bf16" or "".
  std::string computeType;
  /// Loss scaling: the results with the next scale and the finite flag.
  int64_t lossScaleResult = -1, finiteResult = -1;
  double minLossScale = 0;
  /// Gradient compression: the method ("" without) and the bytes per step
  /// and rank of its exchanges and of the fp32 all-reduce they replace.
  std::string compressionMethod;
  double compressedBytes = 0, uncompressedBytes = 0;
  /// The memory plan (par-memory-plan; peak < 0: none): bytes per device,
  /// what is live at the peak by kind, the allocated types by size.
  int64_t memoryPeak = -1, memoryArguments = 0, memoryResults = 0,
          memoryProgramPeak = 0;
  std::map<std::string, int64_t> memoryAtPeak;
  std::map<int64_t, std::string> memoryTypes;
};

struct StageSpec {
  std::string forward, backward, inputGrad, weightGrad, update;
  std::string stashForward, stashBackward; // par-pipeline-stash's split
  std::string stashInputGrad, stashWeightGrad; // and ZB-H1's halves of it
};

struct PipelineSpec {
  bool present = false;
  std::string error;
  std::string func, step, logits, axis, schedule, backward;
  bool hasFunc = false, hasAxis = false, hasSchedule = false,
       hasBackward = false;
  int64_t p = 0, m = 0, v = 0;
  std::vector<StageSpec> stages;
  std::vector<std::vector<par_pipeline_action_t>> programs;
};

struct Manifest {
  /// The top-level "target": "cpu" (also when absent) or "cuda:<chip>".
  std::string target = "cpu";
  std::vector<FunctionSpec> functions;
  PipelineSpec pipeline;
};

/// Reads the manifest at `path`; on failure returns false with `error`
/// set to a message naming the file.
bool readManifest(const std::string &path, Manifest &out, std::string &error);

} // namespace par::manifest

#endif // PAR_MANIFEST_MANIFEST_H
