//===- Sampling.h - Sampling text from a trained model ----------*- C++ -*-===//
//
// One sampling loop for every way a model runs: each character, the
// context's last `seq` tokens fill every row of a token batch [batch, seq],
// the model maps it to logits [batch, seq, vocab], and rank 0 draws the
// next token from softmax(logits / T) at the last filled position (argmax
// at T = 0; draw n uses the generator's (seed, n)) and, in a job, sends it
// to every rank. The model is either the sharded logits entry on the train
// step's own (trained) arguments, on every rank, or the unsharded
// reference's on parameters gathered to rank 0 (a pipelined model).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_SAMPLING_H
#define PAR_TOOLING_SAMPLING_H

#include "par/Tooling/Function.h"

#include <functional>
#include <map>
#include <string>

namespace par::tooling {

struct SamplingOptions {
  int64_t count = 0;         // characters to sample
  std::string prompt = "\n"; // the context to continue
  double temperature = 0.8;  // 0: greedy
  uint64_t seed = 0;
};

/// Maps a global token batch to the global logits (on rank 0).
using LogitsFn = std::function<Buffer(const Buffer &tokens)>;

/// The sampling loop. `tokens` and `logits` describe the model's token
/// argument and logits result; `ctx` (NULL: this process samples alone)
/// carries rank 0's draws to the other ranks.
std::string sampleText(const SamplingOptions &o, const Tensor &tokens,
                       const Tensor &logits, const LogitsFn &model,
                       par_rt_context_t *ctx, int64_t rank);

/// Prints a sample and the prompt it continues.
void printSample(const SamplingOptions &o, const std::string &text);

/// Samples with the sharded logits entry `entry` ("": the step's `logits`
/// role, from `par.logits` on its forward), which takes the train step `step`'s arguments
/// without the targets (same order, same layouts), on `stepArgs` as they
/// are. Collective over every rank.
std::string sampleFromStep(par_rt_context_t *ctx, const Session &sharded,
                           const Function &step,
                           const std::vector<Buffer> &stepArgs,
                           size_t tokensArg, size_t targetsArg,
                           const std::string &entry,
                           const SamplingOptions &o);

/// Samples on this process with the reference's logits function `entry`
/// (the pipeline's `logits` role unless the user gave one; "" is an error
/// naming `func`) on whole parameters, by the split function `func`'s
/// argument index.
std::string sampleFromParameters(const Session &reference,
                                 const std::string &entry,
                                 const std::string &func,
                                 const std::map<int64_t, Buffer> &params,
                                 size_t tokensArg, size_t targetsArg,
                                 const SamplingOptions &o);

} // namespace par::tooling

#endif // PAR_TOOLING_SAMPLING_H
