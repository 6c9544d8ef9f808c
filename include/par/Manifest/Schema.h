//===- Schema.h - The manifest's keys and version ---------------*- C++ -*-===//
//
// The one spelling of the artifact manifest that par-export-manifest writes
// (llvm::json, in the compiler) and the runtime's session reads (its own
// JSON reader, no LLVM): the schema version, every key and the enumerated
// string values. Plain C++17 with no dependencies, so both sides include it.
// A change to a key's meaning or a value's format bumps kVersion; the reader
// refuses any other version.
//
//   { "version": N, "target"?: "cpu" | "cuda:sm_90",
//     "functions": [ { "name", "mesh": {"name", "axes": [{"name", "size"}]},
//                      "inputs": [tensor], "outputs": [tensor],
//                      "roles"?: { "grad"?, "step"?, "update"?, "logits"? },
//                      "feedback"?, "micro_batches"?, "stage"?,
//                      "stage_args"?, "compute_type"?,
//                      "loss_scale"?: { "scale", "finite", "min"? },
//                      "compression"?: { "method", "compressed_bytes",
//                                        "uncompressed_bytes" } } ],
//     "pipeline"?: { "func", "step"?, "logits"?, "axis", "schedule",
//                    "backward", "p", "m", "v",
//                    "stages": [ { "forward", "backward"?, "input_grad"?,
//                                  "weight_grad"?, "update"?,
//                                  "stash_forward"?, "stash_backward"?,
//                                  "stash_input_grad"?,
//                                  "stash_weight_grad"? } ],
//                    "programs": [ [action] ] } }
//   tensor = { "dtype", "global_shape", "local_shape", "init"?, "role"?,
//              "name"?, "aliases"?, "slice"?: { "of", "dim", "offset" },
//              "vocab"?,
//              "sharding": {"dims", "partial", "partial_kind"} }
//   action = { "op", "mb", "stage", "peer"? }   (peer: transfers only)
//
// Roles name other functions of the same manifest: a driver follows them and
// never derives a function's name from another's.
//
// Optional keys are added without a new version as long as an old manifest
// still means what it meant ("compression", the input roles
// "error_feedback", "tokens" and "targets", an input's "name",
// "aliases", "slice" and "vocab", a stage's "stash_forward" and
// "stash_backward", "stash_input_grad", "stash_weight_grad" are such
// additions: a manifest without them reads
// as before).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_MANIFEST_SCHEMA_H
#define PAR_MANIFEST_SCHEMA_H

#include <cstdint>

namespace par::manifest {

/// The schema version the writer writes and the only one the reader takes.
/// Version 2: function roles, the pipeline's stage table and structured
/// programs (version 1 had per-rank action strings and no roles).
inline constexpr int64_t kVersion = 2;

namespace key {
// The top level.
inline constexpr const char kVersion[] = "version";
inline constexpr const char kFunctions[] = "functions";
inline constexpr const char kPipeline[] = "pipeline";
// "cpu" (also when absent) or "cuda:<chip>": where the code runs and, for
// cuda, the out-parameter calling convention on device memory.
inline constexpr const char kTarget[] = "target";
// A function entry.
inline constexpr const char kName[] = "name";
inline constexpr const char kMesh[] = "mesh";
inline constexpr const char kInputs[] = "inputs";
inline constexpr const char kOutputs[] = "outputs";
inline constexpr const char kFeedback[] = "feedback";
inline constexpr const char kDonated[] = "donated";
inline constexpr const char kMicroBatches[] = "micro_batches";
inline constexpr const char kStage[] = "stage";
inline constexpr const char kStageArgs[] = "stage_args";
// Mixed precision: the compute type ("f16", "bf16"); a train step's loss
// scaling: the results holding the next scale and the all-finite flag.
inline constexpr const char kComputeType[] = "compute_type";
inline constexpr const char kLossScale[] = "loss_scale";
inline constexpr const char kLossScaleScale[] = "scale";
inline constexpr const char kLossScaleFinite[] = "finite";
inline constexpr const char kLossScaleMin[] = "min";
// Gradient compression (par-compress-gradients, par.compression) on a train
// step or a pipeline stage's update: the method ("int8", "sign", "topk")
// and, per step and rank by the ring formulas, the bytes its compressed
// exchanges send and those the fp32 ring all-reduce of the same gradients
// would send.
inline constexpr const char kCompression[] = "compression";
inline constexpr const char kCompressionMethod[] = "method";
inline constexpr const char kCompressedBytes[] = "compressed_bytes";
inline constexpr const char kUncompressedBytes[] = "uncompressed_bytes";
// A function's roles (each the name of another function in the manifest).
inline constexpr const char kRoles[] = "roles";
inline constexpr const char kRoleGrad[] = "grad";
inline constexpr const char kRoleStep[] = "step";
inline constexpr const char kRoleUpdate[] = "update";
inline constexpr const char kRoleLogits[] = "logits";
// A mesh (its name is kName) and its axes (kName and kSize).
// The memory plan of a function (par-memory-plan): bytes per device.
inline constexpr const char kMemory[] = "memory";
inline constexpr const char kMemoryPeak[] = "peak";
inline constexpr const char kMemoryArguments[] = "arguments";
inline constexpr const char kMemoryResults[] = "results";
inline constexpr const char kMemoryProgramPeak[] = "program_peak";
inline constexpr const char kMemoryAtPeak[] = "at_peak";
inline constexpr const char kMemoryAllocations[] = "allocations";
inline constexpr const char kMemorySavedActivations[] = "saved_activations";

inline constexpr const char kAxes[] = "axes";
inline constexpr const char kSize[] = "size";
// A tensor entry.
inline constexpr const char kDtype[] = "dtype";
inline constexpr const char kGlobalShape[] = "global_shape";
inline constexpr const char kLocalShape[] = "local_shape";
inline constexpr const char kInit[] = "init";
// An input's role (absent: none): "loss_scale", the loss scale a driver
// feeds from the train state (par-loss-scale); "error_feedback", an
// error-feedback buffer of par-compress-gradients (par.error_feedback:
// state fed back like optimizer state, one row per device, which the
// unsharded reference does not have).
inline constexpr const char kRole[] = "role";
inline constexpr const char kRoleLossScale[] = "loss_scale";
inline constexpr const char kRoleErrorFeedback[] = "error_feedback";
// "compression_step": par-compress-gradients' step counter for its warm-up
// (par.compression_step; state the reference does not have either).
inline constexpr const char kRoleCompressionStep[] = "compression_step";
// The frontend's data roles (par.data): an integer input of token ids, or
// of the targets the loss compares with; its "vocab" (par.vocab) bounds
// the values to [0, vocab).
inline constexpr const char kRoleTokens[] = "tokens";
inline constexpr const char kRoleTargets[] = "targets";
inline constexpr const char kVocab[] = "vocab";
// An input's PyTorch name (par.name; the tensor's key in a state_dict or a
// safetensors file) and its tied parameter's other names (par.aliases).
inline constexpr const char kTensorName[] = "name";
inline constexpr const char kAliases[] = "aliases";
/// A segment of a fused parameter (par.slice): {"of", "dim", "offset"},
/// and "extent" (the size of "of" in "dim") when the argument reaches past
/// it: the rest is padding (a vocabulary padded to a multiple of tp).
inline constexpr const char kSlice[] = "slice";
inline constexpr const char kSliceOf[] = "of";
inline constexpr const char kSliceDim[] = "dim";
inline constexpr const char kSliceOffset[] = "offset";
inline constexpr const char kSliceExtent[] = "extent";
inline constexpr const char kSharding[] = "sharding";
inline constexpr const char kDims[] = "dims";
inline constexpr const char kPartial[] = "partial";
inline constexpr const char kPartialKind[] = "partial_kind";
// The pipeline section (par-pipeline-split, par-pipeline-schedule).
inline constexpr const char kPipelineFunc[] = "func";
inline constexpr const char kPipelineStages[] = "stages"; // the stage table
inline constexpr const char kPipelineAxis[] = "axis";
inline constexpr const char kPipelineSchedule[] = "schedule";
inline constexpr const char kPipelineBackward[] = "backward";
inline constexpr const char kPipelineP[] = "p";
inline constexpr const char kPipelineM[] = "m";
inline constexpr const char kPipelineV[] = "v";
inline constexpr const char kPipelinePrograms[] = "programs";
inline constexpr const char kPipelineStep[] = "step";
inline constexpr const char kPipelineLogits[] = "logits";
// A stage's functions.
inline constexpr const char kStageForward[] = "forward";
inline constexpr const char kStageBackward[] = "backward";
inline constexpr const char kStageInputGrad[] = "input_grad";
inline constexpr const char kStageWeightGrad[] = "weight_grad";
inline constexpr const char kStageUpdate[] = "update";
// The full backward split at its residuals (par-pipeline-stash): the
// forward that returns them and the backward that reads them.
inline constexpr const char kStageStashForward[] = "stash_forward";
inline constexpr const char kStageStashBackward[] = "stash_backward";
// ZB-H1's halves of that backward: BI (saving what BW reads) and BW.
inline constexpr const char kStageStashInputGrad[] = "stash_input_grad";
inline constexpr const char kStageStashWeightGrad[] = "stash_weight_grad";
// An action of a program.
inline constexpr const char kActionOp[] = "op";
inline constexpr const char kActionMb[] = "mb";
inline constexpr const char kActionStage[] = "stage";
inline constexpr const char kActionPeer[] = "peer";
} // namespace key

/// Values of an action's "op", indexed by the action code (par_session.h's
/// par_pipeline_op_t, lib/Pipelining/Schedule's Op): forward, full backward, its
/// input and weight halves, and the transfers of stage inputs ("act") and
/// their gradients ("grad").
inline constexpr const char *const kActionOps[] = {
    "fwd", "bwd", "bi", "bw", "send_act", "recv_act", "send_grad",
    "recv_grad"};
inline constexpr int kNumActionOps = 8;

/// Values of a sharding's "partial_kind".
namespace partial_kind {
inline constexpr const char kSum[] = "sum";
inline constexpr const char kMax[] = "max";
inline constexpr const char kMin[] = "min";
inline constexpr const char kAvg[] = "avg";
} // namespace partial_kind

/// Values of a tensor's "init": kZeros, kOnes or kUniformPrefix followed by
/// the scale (uniform in [-scale, scale) from the counter-based generator).
namespace init {
inline constexpr const char kZeros[] = "zeros";
inline constexpr const char kOnes[] = "ones";
inline constexpr const char kUniformPrefix[] = "uniform:";
/// Followed by the value every element starts at.
inline constexpr const char kFillPrefix[] = "fill:";
} // namespace init

} // namespace par::manifest

#endif // PAR_MANIFEST_SCHEMA_H
