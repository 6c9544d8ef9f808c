//===- TrainState.h - What a checkpoint of a train run holds ----*- C++ -*-===//
//
// The keys of a run's train state in checkpoints (Checkpoint.h; where
// each tensor lives is StateLayout.h): every fed-back argument of the
// train step (parameters, optimizer state, the
// step counter, loss-scale state, compression state), keyed by the
// unpipelined step's argument index, so that a pipelined run's stage
// updates and a plain step on any mesh name each tensor alike. Gradient
// compression's state (error-feedback buffers and the warm-up counter) is
// layout-bound: it is restored on the same layout only.
//
// A stage update's inputs are [params P, gradients P, K state kinds x P,
// extras] and the step's are [the forward's N, K x P_all, extras] (par-
// optimizer's layout); stageStateKeys maps one onto the other and checks
// the shapes, so a change of that layout fails loudly, not silently.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_TRAINSTATE_H
#define PAR_TOOLING_TRAINSTATE_H

#include "par/Tooling/Checkpoint.h"
#include "par/Tooling/RunPlan.h"

#include <string>
#include <vector>

namespace par::tooling {

/// Whether rank `rank` writes its block of input `t` of `f`: it is the
/// first replica (coordinate 0 on every axis that neither splits `t` nor
/// is `ownerAxis`). Fatal for a partial-sum tensor.
bool writesBlock(const Function &f, const Tensor &t, int64_t rank,
                 int64_t ownerAxis);

/// The key of each input of stage update `u` that is state (its
/// parameters and optimizer/loss-scale/compression state; "" for its
/// gradient inputs), given the unpipelined step `step` and its gradient
/// function `grad` (the forward's argument count). Layout-bound keys start
/// with "stage". When the layouts do not map: fatal, or with `error`,
/// sets it and returns no keys.
std::vector<std::string> stageStateKeys(const Function &step,
                                        const Function &grad,
                                        const Function &u,
                                        std::string *error = nullptr);

/// The checkpoint record of this run at `step`.
CheckpointMeta runMeta(const Function &stepFn, const RunPlan &plan,
                       const std::string &layout, int64_t step);

/// Where a resumed run starts: the checkpoint's step and seed.
struct CheckpointStart {
  int64_t step = 0;
  uint64_t seed = 0;
};

/// par-run --resume: reads the checkpoint's record before the run starts
/// (also in the launching process, so that a bad directory fails before
/// any rank starts). Its seed becomes the run's (fatal if --seed says
/// otherwise) and its corpus must be --data's (same contents).
CheckpointStart readCheckpointStart(const RunOptions &o);

} // namespace par::tooling

#endif // PAR_TOOLING_TRAINSTATE_H
