//===- Search.cpp - Enumerate, price, keep what fits ----------------------===//

#include "par/Planning/Search.h"
#include "par/Planning/Machine.h"
#include "par/Planning/ModelProfile.h"

#include <algorithm>

using namespace mlir::par::planning;

static std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

SearchResult mlir::par::planning::searchConfigurations(
    const ModelProfile &model, const Machine &machine,
    const SearchOptions &options) {
  SearchResult result;
  const int64_t gpus = options.gpus, batch = options.globalBatch;
  auto consider = [&](const Configuration &c) {
    if (!checkConfiguration(c, model, gpus, batch).empty())
      return;
    Estimate e;
    std::string error;
    if (!estimate(model, machine, c, batch, e, error))
      return;
    ++result.evaluated;
    if (!e.fits) {
      ++result.rejected;
      if (result.smallestMemory == 0 || e.memory < result.smallestMemory)
        result.smallestMemory = e.memory;
      return;
    }
    result.fitting.push_back(e);
  };
  for (int64_t tp : divisors(gpus)) {
    if (options.tp && tp != options.tp)
      continue;
    if (tp > 1 && (model.tpDivisor == 0 || model.tpDivisor % tp))
      continue;
    for (int64_t pp : divisors(gpus / tp)) {
      if (options.pp && pp != options.pp)
        continue;
      if (pp > model.layers)
        continue;
      int64_t dp = gpus / (tp * pp);
      if (batch % dp)
        continue;
      for (int64_t b : divisors(batch / dp)) {
        if (b > options.maxMicroBatch)
          break;
        Configuration c;
        c.dp = dp, c.tp = tp, c.pp = pp;
        c.m = batch / (dp * b);
        c.precision = options.precision;
        for (const char *recompute : {"none", "selective", "full"}) {
          c.recompute = recompute;
          for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
            c.sequenceParallel = sp;
            if (pp == 1) {
              c.v = 1;
              c.schedule = "1f1b";
              for (int64_t zero : {0, 1, 3}) {
                if (zero && dp == 1)
                  continue;
                c.zero = zero;
                consider(c);
              }
              continue;
            }
            for (const char *schedule : {"1f1b", "zbh1", "interleaved", "zbv"}) {
              c.schedule = schedule;
              for (int64_t v : {1, 2, 4}) {
                bool chunked = c.schedule == "interleaved" || c.schedule == "zbv";
                if ((v > 1) != chunked || (c.schedule == "zbv" && v != 2))
                  continue;
                c.v = v;
                if (model.layers % (pp * v)) // balanced stages only
                  continue;
                for (int64_t zero : {0, 1}) { // ZeRO-3 needs pp = 1
                  if (zero && dp == 1)
                    continue;
                  c.zero = zero;
                  consider(c);
                }
              }
            }
          }
        }
      }
    }
  }
  std::stable_sort(result.fitting.begin(), result.fitting.end(),
                   [](const Estimate &a, const Estimate &b) {
                     return a.step < b.step;
                   });
  return result;
}
