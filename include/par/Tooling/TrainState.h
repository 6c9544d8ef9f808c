//===- TrainState.h - What a checkpoint of a train run holds ----*- C++ -*-===//
//
// The train state of a run, as checkpoint tensors (Checkpoint.h): every
// fed-back argument of the train step (parameters, optimizer state, the
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
#include "par/Tooling/RunModule.h"

#include <string>
#include <vector>

namespace par::tooling {

/// Whether rank `rank` writes its block of input `t` of `f`: it is the
/// first replica (coordinate 0 on every axis that neither splits `t` nor
/// is `ownerAxis`). Fatal for a partial-sum tensor.
bool writesBlock(const Function &f, const Tensor &t, int64_t rank,
                 int64_t ownerAxis);

/// The state tensors of a plain train step `f` held in `args`.
std::vector<CheckpointTensor> stepState(const Function &f,
                                        std::vector<Buffer> &args,
                                        int64_t rank);

/// The key of each input of stage update `u` that is state (its
/// parameters and optimizer/loss-scale/compression state; "" for its
/// gradient inputs), given the unpipelined step `step` and its gradient
/// function `grad` (the forward's argument count). Layout-bound keys start
/// with "stage".
std::vector<std::string> stageStateKeys(const Function &step,
                                        const Function &grad,
                                        const Function &u);

/// The checkpoint record of this run at `step`.
CheckpointMeta runMeta(const Function &stepFn, const RunOptions &o,
                       const std::string &layout, int64_t step);

/// par-run --resume: reads the checkpoint's record before the run starts
/// (also in the launching process, so that a bad directory fails before
/// any rank starts): its seed becomes the run's (fatal if --seed says
/// otherwise) and its corpus must be --data's (same contents). Returns
/// the checkpoint's step.
int64_t adoptCheckpoint(RunOptions &o);

/// Whether a resumed run has no step left: an export (no --steps), or a
/// checkpoint at --steps already (`print`: rank 0 says so).
bool nothingToTrain(const RunOptions &o, bool print);

/// Whether to save a checkpoint after `step` (of `o.train.steps`).
bool checkpointDue(const RunOptions &o, int64_t step);

} // namespace par::tooling

#endif // PAR_TOOLING_TRAINSTATE_H
