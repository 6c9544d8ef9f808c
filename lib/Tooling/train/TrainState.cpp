//===- TrainState.cpp - What a checkpoint of a train run holds ------------===//

#include "par/Tooling/TrainState.h"

#include "par/Tooling/Diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace par::tooling {

bool writesBlock(const Function &f, const Tensor &t, int64_t rank,
                 int64_t ownerAxis) {
  if (!t.partial.empty())
    fatal("--checkpoint: a state tensor of '" + f.name +
          "' holds partial sums; checkpoints need every state tensor "
          "reduced (replicated or split)");
  std::vector<bool> splits(f.axisSizes.size(), false);
  for (const std::vector<int64_t> &d : t.dims)
    for (int64_t a : d)
      splits[a] = true;
  std::vector<int64_t> c = f.coords(rank);
  for (size_t a = 0; a < c.size(); ++a)
    if (!splits[a] && (int64_t)a != ownerAxis && c[a] != 0)
      return false;
  return true;
}

std::vector<std::string> stageStateKeys(const Function &step,
                                        const Function &grad,
                                        const Function &u,
                                        std::string *error) {
  bool failed = false;
  auto fail = [&](const std::string &why) {
    std::string msg = "cannot map the state of '" + u.name +
                      "' onto the train step '" + step.name + "': " + why;
    if (!error)
      fatal("--checkpoint: " + msg);
    if (!failed)
      *error = msg;
    failed = true;
  };
  size_t N = grad.inputs.size();
  // The step's parameters in result order (results 1..P feed them).
  std::vector<std::pair<size_t, size_t>> fed(step.feedback.begin(),
                                             step.feedback.end());
  std::sort(fed.begin(), fed.end());
  std::vector<size_t> params;
  for (auto [r, a] : fed)
    if (a < N)
      params.push_back(a);
  std::map<int64_t, size_t> pos;
  for (size_t j = 0; j < params.size(); ++j)
    pos[params[j]] = j;
  size_t PA = params.size(), K = 0;
  auto isKind = [&](size_t k) {
    if (PA == 0 || N + (k + 1) * PA > step.inputs.size())
      return false;
    for (size_t j = 0; j < PA; ++j) {
      const Tensor &s = step.inputs[N + k * PA + j];
      if (s.compressionState() || s.global != step.inputs[params[j]].global)
        return false;
    }
    return true;
  };
  while (isKind(K))
    ++K;
  size_t extras = 0; // the step's state after the per-parameter kinds
  for (size_t i = N + K * PA; i < step.inputs.size(); ++i)
    extras += step.inputs[i].compressionState() ? 0 : 1;
  size_t P = u.stageArgs.size();
  std::vector<std::string> keys(u.inputs.size());
  auto check = [&](size_t i, size_t stepArg) {
    if (i >= u.inputs.size() || stepArg >= step.inputs.size() ||
        step.inputs[stepArg].global != u.inputs[i].global ||
        step.inputs[stepArg].dtype != u.inputs[i].dtype)
      return fail("input " + std::to_string(i) + " has no counterpart");
    keys[i] = "arg" + std::to_string(stepArg);
  };
  if (u.inputs.size() < 2 * P + K * P) {
    fail("it has fewer inputs than parameters, gradients and state");
    return {};
  }
  for (size_t j = 0; j < P; ++j) {
    auto it = pos.find(u.stageArgs[j]);
    if (it == pos.end()) {
      fail("arg" + std::to_string(u.stageArgs[j]) +
           " is not a parameter of the step");
      return {};
    }
    check(j, u.stageArgs[j]);
    for (size_t k = 0; k < K; ++k)
      check(2 * P + k * P + j, N + k * PA + it->second);
  }
  size_t e = 0;
  for (size_t i = 2 * P + K * P; i < u.inputs.size(); ++i) {
    if (u.inputs[i].compressionState()) {
      keys[i] = "stage" + std::to_string(u.stage) + ".arg" + std::to_string(i);
      continue;
    }
    if (e >= extras) {
      fail("input " + std::to_string(i) + " is state the step lacks");
      return {};
    }
    check(i, N + K * PA + e++);
  }
  if (failed)
    return {};
  return keys;
}

CheckpointMeta runMeta(const Function &stepFn, const RunPlan &plan,
                       const std::string &layout, int64_t step) {
  const RunOptions &o = plan.options;
  CheckpointMeta m;
  m.step = step;
  m.seed = plan.seed;
  m.data = o.data;
  m.dataCrc = o.data.empty() ? 0 : fileCrc32(o.data);
  m.function = stepFn.name;
  m.layout = layout;
  m.axisNames = stepFn.axisNames;
  m.axisSizes = stepFn.axisSizes;
  return m;
}

CheckpointStart readCheckpointStart(const RunOptions &o) {
  CheckpointReader r(o.resume);
  const CheckpointMeta &m = r.meta();
  if (o.seedGiven && o.seed != m.seed)
    fatal("--resume: '" + r.path() + "' was trained with --seed " +
          std::to_string(m.seed) + ", not " + std::to_string(o.seed) +
          " (a resumed run continues the same batches; drop --seed)");
  if (o.train.steps == 0)
    return {m.step, m.seed}; // an export: no batches
  if (!m.data.empty() && o.data.empty())
    fatal("--resume: '" + r.path() + "' was trained on --data " + m.data +
          "; give the same corpus to continue");
  if (m.data.empty() && !o.data.empty())
    fatal("--resume: '" + r.path() + "' was trained on generated batches, "
          "not --data");
  if (!m.data.empty() && fileCrc32(o.data) != m.dataCrc)
    fatal("--resume: --data " + o.data + " is not the corpus '" + r.path() +
          "' was trained on (" + m.data + ": its CRC-32 differs)");
  return {m.step, m.seed};
}

} // namespace par::tooling
