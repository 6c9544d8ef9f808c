//===- Finite.h - Catching a non-finite loss or update ----------*- C++ -*-===//
//
// After each train step (plain or pipelined) the loss and the fed-back
// state this rank holds (new parameters, optimizer state) are checked for
// NaN and Inf: a non-finite gradient makes its parameter's update
// non-finite, so scanning the updated state catches a gradient that
// overflowed while the loss was still finite. The decision is global: every
// rank's record (its first non-finite tensor in argument order and its
// count) goes to rank 0, which decides and broadcasts the action, so all
// ranks stop, skip or continue together and the message names the global
// first non-finite tensor:
//
//   par-run: error: step 7: the loss is nan
//   par-run: error: step 7: non-finite values in the updated arg4
//     (blocks.0.ln.weight) (12 of 32 elements on rank 3): its gradient or
//     update overflowed
//
// --nonfinite error (default) ends the run on every rank with status 1;
// --nonfinite skip discards the step's update (the previous parameters and
// state are restored), says so and counts the skipped steps; --nonfinite
// off checks nothing. Programs with dynamic loss scaling (mixed precision:
// a loss-scale result) are not checked: they already skip steps with
// non-finite gradients themselves, globally.
//
// Cost per step: one scan of this rank's fed-back state (bit tests, no
// copy on the CPU; a download on a GPU) and two small collectives.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_FINITE_H
#define PAR_TOOLING_FINITE_H

#include "par/Tooling/Function.h"

#include <optional>
#include <string>
#include <vector>

namespace par::tooling {

enum class NonFiniteMode { Error, Skip, Off };

/// "error", "skip" or "off"; nullopt for anything else.
std::optional<NonFiniteMode> parseNonFiniteMode(const std::string &s);

/// The number of NaN and Inf elements of `count` elements of `dtype` at
/// `data` (host memory; 0 for a non-float dtype).
int64_t countNonFinite(par_dtype_t dtype, const void *data, int64_t count);

/// One tensor of the updated state this rank holds: `order` sorts the
/// tensors globally (the argument index of the unpipelined step, for a
/// parameter), `label` names it ("arg4 (blocks.0.ln.weight)").
struct UpdatedTensor {
  int64_t order;
  std::string label;
  const Tensor *tensor;
  const SessionBuffer *buffer;
  bool onDevice; // the buffer is device memory (download() to read it)
};

class NonFiniteCheck {
public:
  enum Action { Continue, Skip, Stop };

  NonFiniteCheck(par_rt_context_t *ctx, NonFiniteMode mode, int64_t rank);
  bool enabled() const { return mode != NonFiniteMode::Off; }

  /// Collective (every rank calls it after step `step`, with the loss all
  /// ranks share): Continue when the loss and every rank's `state` are
  /// finite. Otherwise rank 0 reports the step and the first non-finite
  /// tensor, and the result is Stop (--nonfinite error: rank 0 has printed
  /// the error; the caller returns status 1 on every rank) or Skip (the
  /// caller restores the previous parameters and state).
  Action check(int64_t step, double loss,
               const std::vector<UpdatedTensor> &state);
  /// --nonfinite skip: rank 0 prints how many of `steps` were skipped.
  void summary(int64_t steps) const;
  int64_t skipped() const { return skippedSteps; }

private:
  par_rt_context_t *ctx;
  NonFiniteMode mode;
  int64_t rank;
  int64_t skippedSteps = 0;
  Buffer host; // a device tensor's copy
};

} // namespace par::tooling

#endif // PAR_TOOLING_FINITE_H
