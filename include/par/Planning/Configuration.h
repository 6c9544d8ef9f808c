//===- Configuration.h - One parallel configuration -------------*- C++ -*-===//
//
// A point of the planner's search: how the devices are split (dp x tp x
// pp), the pipeline (virtual stages, micro-batches, schedule), ZeRO,
// recomputation, sequence parallelism and the compute precision; parsed
// from `--config "dp=2 tp=4 ..."` and printed back as par-compile's
// --options.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_PLANNING_CONFIGURATION_H
#define PAR_PLANNING_CONFIGURATION_H

#include <cstdint>
#include <string>

namespace mlir::par::planning {

struct ModelProfile;

struct Configuration {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t v = 1; // virtual stages per pipeline rank
  int64_t m = 1; // micro-batches per step
  int64_t zero = 0;
  std::string recompute = "none"; // none, selective, full
  bool sequenceParallel = false;
  /// A pipeline's forwards keep the residuals their backwards read
  /// (par-compile's stash, the default); false: every backward recomputes
  /// its stage's forward from the stage input.
  bool stash = true;
  std::string schedule = "1f1b"; // gpipe, 1f1b, interleaved, zbh1, zbv
  /// Whether the schedule runs each backward as BI and BW (zbh1, zbv).
  bool splitBackward() const { return schedule == "zbh1" || schedule == "zbv"; }
  std::string precision = "bf16"; // compute type: bf16, f16, f32
  /// The data-parallel gradient reduction's type: f32 (par's default) or
  /// compute (the compute type: par-compile's grad-reduce=compute, what
  /// Megatron does without --accumulate-allreduce-grads-in-fp32).
  std::string gradReduce = "f32";

  int64_t devices() const { return dp * tp * pp; }
  /// "dp=2 tp=4 pp=1 v=1 m=4 zero=0 recompute=none sequence-parallel=false
  /// schedule=1f1b precision=bf16" (what parseConfiguration reads), then
  /// " grad-reduce=compute" when that is asked.
  std::string str() const;
  /// par-compile's --options for this configuration (the mesh itself is the
  /// model's: see meshLine).
  std::string compileOptions() const;
  /// The mesh the model must declare: `dp=2 tp=4 pp=2`.
  std::string meshLine() const;
};

/// Parses "KEY=VALUE ..." onto `config` (keys not given keep their value).
/// Returns false with `error` naming the bad key or value.
bool parseConfiguration(const std::string &text, Configuration &config,
                        std::string &error);

/// Checks `config` against the model, the device count and the global batch
/// (sizes that do not divide, schedules par has no timetable for, what par
/// cannot compile). Returns "" or why not.
std::string checkConfiguration(const Configuration &config,
                               const ModelProfile &model, int64_t gpus,
                               int64_t globalBatch);

} // namespace mlir::par::planning

#endif // PAR_PLANNING_CONFIGURATION_H
