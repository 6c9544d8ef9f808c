//===- StateLayout.h - Where a train run's state lives ----------*- C++ -*-===//
//
// One value says where every tensor of a train run's state lives: which
// function's input gives its layout, which ranks hold it (every rank its
// block, or one coordinate of the pipeline axis: a stage's), which copy
// is the one read (a parameter tied over several stages has a copy in
// each), its checkpoint key and its index in the unpipelined train step,
// and where this rank's block is (host memory or a session buffer). Each
// step executor builds it once, the plain one from its train step's
// arguments, the pipelined one from its stage updates' inputs; what reads
// or writes the state as a whole (gathers for --verify and sampling,
// --save-weights, --checkpoint, --resume) is written once, here, over it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_STATELAYOUT_H
#define PAR_TOOLING_STATELAYOUT_H

#include "par/Tooling/Checkpoint.h"
#include "par/Tooling/Function.h"

#include <map>
#include <string>
#include <vector>

namespace par::tooling {

/// One tensor of the state (as every rank knows it; `host`/`device` are
/// this rank's block, both null where the rank does not hold it).
struct StateSlot {
  /// The checkpoint key ("argN" for the unpipelined step's argument N;
  /// "stage..." for a stage's compression state), "" where it is not
  /// checkpointed.
  std::string key;
  /// N: the unpipelined step's argument it is (-1: layout-bound, or a
  /// state the step's arguments do not map).
  int64_t global = -1;
  /// Bound to this run's layout (gradient compression's error feedback):
  /// it resumes only on the same mesh and layout, else from zero.
  bool layoutBound = false;
  const Function *fn = nullptr; // whose input `input` gives the layout
  size_t input = 0;
  /// The mesh axis and coordinate holding it (a pipeline stage's), or -1:
  /// every rank holds its block.
  int64_t holderAxis = -1, holder = -1;
  /// The copy gathers and the checkpoint read (a tied parameter's first
  /// stage's); the others load the same values.
  bool primary = true;
  bool parameter = false; // a trained parameter (weights, sampling)
  Buffer *host = nullptr;
  SessionBuffer *device = nullptr;

  const Tensor &tensor() const { return fn->inputs[input]; }
  bool held() const { return host || device; }
};

struct StateLayout {
  std::vector<StateSlot> slots; // in the same order on every rank
  int64_t rank = 0;
  int64_t axes = 0; // the mesh's axis count (gathers' source coordinates)
};

/// What gatherState gathers: the parameters, or every primary slot the
/// unpipelined step maps (parameters, optimizer and loss-scale state).
enum class StateSelection { Parameters, Mapped };

/// The selected slots' global values on rank 0 (empty elsewhere) by the
/// unpipelined step's argument. Collective.
std::map<int64_t, Buffer> gatherState(const StateLayout &l,
                                      StateSelection sel);

/// --save-weights: the named parameters gathered to rank 0, which writes
/// them to `path` (`fn` names the function in its messages). Collective.
void saveNamedWeights(const StateLayout &l, const std::string &path,
                      const std::string &fn);

/// --checkpoint: this rank's blocks of every checkpointed slot (session
/// buffers downloaded). Collective.
void saveStateCheckpoint(par_rt_context_t *ctx, const CheckpointOptions &o,
                         const CheckpointMeta &meta, const StateLayout &l);

/// --resume: every held checkpointed slot from the checkpoint at `dir`
/// (layout-bound ones only when it was saved on `here`'s layout), fatal on
/// every rank if the checkpoint and the layout do not hold the same
/// tensors; rank 0 reports. Collective.
void resumeState(par_rt_context_t *ctx, const std::string &dir,
                 const CheckpointMeta &here, const StateLayout &l);

} // namespace par::tooling

#endif // PAR_TOOLING_STATELAYOUT_H
