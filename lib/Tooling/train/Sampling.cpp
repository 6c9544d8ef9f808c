//===- Sampling.cpp - Sampling text from a trained model ------------------===//
//
// The two model adapters check that the logits function fits the trained
// state (messages name both functions) and then hand sampleText a LogitsFn.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Sampling.h"

#include "par/Tooling/CharData.h"
#include "par/Tooling/Diagnostics.h"
#include "par/Tooling/Values.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace par::tooling {

namespace {

/// The next token from the logits at `base` (row 0, the last filled
/// position): argmax at temperature 0, else drawn from softmax(logits / T)
/// with the seed's generator (draw `n`).
int64_t drawToken(const SamplingOptions &o, par_dtype_t dtype,
                  const char *logits, int64_t base, int64_t vocab, int64_t n) {
  std::vector<double> p(vocab);
  double best = -INFINITY;
  int64_t next = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    p[v] = par_dtype_load(dtype, logits, base + v);
    if (p[v] > best) {
      best = p[v];
      next = v;
    }
  }
  if (o.temperature > 0) {
    double sum = 0;
    for (double &x : p)
      sum += (x = std::exp((x - best) / o.temperature));
    double u = (generate(o.seed ^ 0x5A3B1Eull, n, 0) + 1.0) / 2.0 * sum;
    for (next = 0; next + 1 < vocab && u >= p[next]; ++next)
      u -= p[next];
  }
  return next;
}

/// Index of the tokens among a logits function's arguments (the step's
/// arguments without the targets).
size_t tokensIndex(size_t tokensArg, size_t targetsArg) {
  return tokensArg < targetsArg ? tokensArg : tokensArg - 1;
}

} // namespace

std::string sampleText(const SamplingOptions &o, const Tensor &tokens,
                       const Tensor &logits, const LogitsFn &model,
                       par_rt_context_t *ctx, int64_t rank) {
  int64_t seq = tokens.global[1], vocab = logits.global[2];
  std::vector<int64_t> context;
  for (unsigned char c : o.prompt)
    context.push_back(charToken(c));
  std::string text;
  for (int64_t n = 0; n < o.count; ++n) {
    int64_t start = std::max<int64_t>(0, (int64_t)context.size() - seq);
    int64_t used = context.size() - start;
    Buffer batch = zeroBuffer(tokens.globalBytes());
    for (int64_t g = 0; g < tokens.globalCount; ++g)
      ((int64_t *)batch.data())[g] =
          g % seq < used ? context[start + g % seq] : 0;
    Buffer out = model(batch);
    int64_t next = rank == 0 ? drawToken(o, logits.dtype, out.data(),
                                         (used - 1) * vocab, vocab, n)
                             : 0;
    if (ctx)
      checkRuntime(par_rt_broadcast_world(ctx, &next, sizeof(next), 0), ctx,
                   "broadcasting a sampled token");
    context.push_back(next);
    text += tokenChar(next);
  }
  return text;
}

void printSample(const SamplingOptions &o, const std::string &text) {
  printf("%s: sample (%lld characters, temperature %g) after the "
         "prompt \"",
         toolName().c_str(), (long long)o.count, o.temperature);
  for (char c : o.prompt)
    printf(c == '\n' ? "\\n" : "%c", c);
  printf("\":\n%s\n", text.c_str());
}

std::string sampleFromStep(par_rt_context_t *ctx, const Session &sharded,
                           const Function &f,
                           const std::vector<Buffer> &stepArgs,
                           size_t tokensArg, size_t targetsArg,
                           const std::string &entry,
                           const SamplingOptions &o) {
  std::string name = entry.empty() ? f.logits : entry;
  if (name.empty())
    fatal("--sample: '" + f.name + "' records no logits function (mark its "
          "forward with par.logits = @<logits function>, or give "
          "--sample-entry)");
  Function s = sharded.lookup(name);
  if (s.axisSizes != f.axisSizes)
    fatal("--sample: '" + name + "' runs on a different mesh than '" +
          f.name + "'");
  if (tokensArg == targetsArg || s.inputs.size() + 1 > f.inputs.size())
    fatal("--sample: '" + name + "' must take the arguments of '" + f.name +
          "' without the targets (arg" + std::to_string(targetsArg) + ")");
  size_t tok = tokensIndex(tokensArg, targetsArg);
  if (tok >= s.inputs.size())
    fatal("--sample: '" + name + "' must take the arguments of '" + f.name +
          "' without the targets (arg" + std::to_string(targetsArg) + ")");
  std::vector<const Buffer *> args;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    size_t j = i < targetsArg ? i : i + 1;
    const Tensor &a = s.inputs[i], &b = f.inputs[j];
    // The tokens may differ in batch (a step that accumulates micro-batches
    // takes several); everything else is the step's own state.
    if (i == tok ? a.dtype != PAR_I64 || a.global.size() != 2
                 : !a.sameLayout(b))
      fatal("--sample: arg" + std::to_string(i) + " of '" + name +
            "' does not match arg" + std::to_string(j) + " of '" + f.name +
            "' (type or sharding)");
    args.push_back(&stepArgs[j]);
  }
  const Tensor &tt = s.inputs[tok];
  if (s.outputs.size() != 1 || s.outputs[0].global.size() != 3 ||
      s.outputs[0].global[0] != tt.global[0] ||
      s.outputs[0].global[1] != tt.global[1])
    fatal("--sample: '" + name + "' must return logits [batch, seq, vocab]");
  Buffer tokens;
  args[tok] = &tokens;
  return sampleText(
      o, tt, s.outputs[0],
      [&](const Buffer &batch) {
        tokens = s.scatter(PAR_INPUT, tok, batch);
        std::vector<Buffer> outs = s.call(args);
        return s.gather(PAR_OUTPUT, 0, outs[0].data());
      },
      ctx, s.rank());
}

std::string sampleFromParameters(const Session &reference,
                                 const std::string &entry,
                                 const std::string &func,
                                 const std::map<int64_t, Buffer> &params,
                                 size_t tokensArg, size_t targetsArg,
                                 const SamplingOptions &o) {
  const std::string &name = entry;
  if (name.empty())
    fatal("--sample: the pipelined '" + func + "' records no logits "
          "function (mark it with par.logits = @<logits function>, or give "
          "--sample-entry)");
  Function sf = reference.lookup(name);
  size_t tok = tokensIndex(tokensArg, targetsArg);
  std::vector<const Buffer *> args;
  for (size_t i = 0; i < sf.inputs.size(); ++i) {
    int64_t orig = i < targetsArg ? i : i + 1;
    auto it = params.find(orig);
    if (i != tok && (it == params.end() ||
                     (int64_t)it->second.size() != sf.inputs[i].globalBytes()))
      fatal("--sample: arg" + std::to_string(i) + " of '" + name +
            "' is not a parameter of the pipelined '" + func + "'");
    args.push_back(i == tok ? nullptr : &it->second);
  }
  if (tok >= sf.inputs.size() || sf.outputs.size() != 1 ||
      sf.outputs[0].global.size() != 3 ||
      sf.inputs[tok].dtype != PAR_I64 || sf.inputs[tok].global.size() != 2)
    fatal("--sample: '" + name + "' must map tokens [batch, seq] to "
          "logits [batch, seq, vocab]");
  const Tensor &tt = sf.inputs[tok];
  return sampleText(
      o, tt, sf.outputs[0],
      [&](const Buffer &batch) {
        args[tok] = &batch;
        return std::move(sf.call(args)[0]);
      },
      /*ctx=*/nullptr, /*rank=*/0);
}

} // namespace par::tooling
