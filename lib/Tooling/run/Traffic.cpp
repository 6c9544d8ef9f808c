//===- Traffic.cpp - Measured traffic and gradient compression ------------===//
//
// The lines rank 0 prints (bytes rounded to integers, averages over the
// steps; "<tool>" is par-run):
//
//   <tool>: bytes per step and rank: B (k1 b1, k2 b2, ...) on rank R, the
//     most of N ranks
//   <tool>: compression M: exchanges C bytes per step and rank (formula),
//     fp32 ring all-reduce of the same gradients U: X.XXx fewer; this step
//     measured B, without compression it would send B - C + U (Y.YYx) on
//     rank R
//   <tool>: error-feedback norm E.EEEe+XX (K buffers)
//
// each on one line. The kernels are those that sent bytes, the most first
// (ties by name), "(none)" if none did; M is the method, or the methods
// joined by "+" where the stage updates of a rank differ. A ratio whose
// divisor is 0 reads "n/a".
//
// Every rank sends one record to rank 0: per kernel (the runtime's fixed
// table, so records line up index by index) its bytes, then the rank's
// compressed and uncompressed bytes and how many of its functions
// compress.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Traffic.h"

#include "par/Tooling/Diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace par::tooling {

void CompressionTotals::add(const Function &f) {
  if (!f.compression)
    return;
  const Compression &c = *f.compression;
  if (std::find(methods.begin(), methods.end(), c.method) == methods.end())
    methods.push_back(c.method);
  compressedBytes += c.compressedBytes;
  uncompressedBytes += c.uncompressedBytes;
  ++functions;
}

namespace {

/// "3.92x", or "n/a" when `den` is 0.
std::string ratio(double num, double den) {
  if (!(den > 0))
    return "n/a";
  char text[32];
  snprintf(text, sizeof(text), "%.2fx", num / den);
  return text;
}

} // namespace

void reportTraffic(par_rt_context_t *ctx, int64_t steps,
                   const CompressionTotals &mine, int64_t rank,
                   int64_t world) {
  int64_t K = par_rt_context_kernel_stats(ctx, nullptr, 0);
  std::vector<par_rt_kernel_stats_t> kernels(std::max<int64_t>(K, 1));
  par_rt_context_kernel_stats(ctx, kernels.data(), K);
  size_t width = size_t(K) + 3;
  std::vector<double> record(width);
  for (int64_t k = 0; k < K; ++k)
    record[k] = kernels[k].bytes_sent;
  record[K] = mine.compressedBytes;
  record[K + 1] = mine.uncompressedBytes;
  record[K + 2] = double(mine.functions);
  std::vector<double> all(rank == 0 ? width * world : 0);
  checkRuntime(par_rt_gather_world(ctx, record.data(),
                                   int64_t(width * sizeof(double)),
                                   rank == 0 ? all.data() : nullptr),
               ctx, "gathering the traffic statistics");
  // The rank reported on: the one that sent the most (the first of equals);
  // for the compression line that one if it compresses, else the busiest
  // of those that do (-1: none does).
  int64_t chosen = 0, compressing = -1;
  if (rank == 0) {
    auto total = [&](int64_t r) {
      double t = 0;
      for (int64_t k = 0; k < K; ++k)
        t += all[r * width + k];
      return t;
    };
    auto compresses = [&](int64_t r) { return all[r * width + K + 2] > 0; };
    for (int64_t r = 1; r < world; ++r)
      if (total(r) > total(chosen))
        chosen = r;
    if (compresses(chosen))
      compressing = chosen;
    else
      for (int64_t r = 0; r < world; ++r)
        if (compresses(r) && (compressing < 0 || total(r) > total(compressing)))
          compressing = r;
  }
  checkRuntime(par_rt_broadcast_world(ctx, &compressing, sizeof(compressing),
                                      0),
               ctx, "broadcasting the traffic report");
  // The methods of the rank the compression line is about (only it knows
  // them).
  char methods[128] = {0};
  if (compressing >= 0 && rank == compressing) {
    std::string joined;
    for (const std::string &m : mine.methods)
      joined += (joined.empty() ? "" : "+") + m;
    snprintf(methods, sizeof(methods), "%s", joined.c_str());
  }
  if (compressing > 0)
    checkRuntime(par_rt_broadcast_world(ctx, methods, sizeof(methods),
                                        compressing),
                 ctx, "broadcasting the compression methods");
  if (rank != 0)
    return;

  double perStep = 1.0 / double(std::max<int64_t>(steps, 1));
  auto bytesOf = [&](int64_t r) {
    std::vector<std::pair<double, std::string>> list;
    double t = 0;
    for (int64_t k = 0; k < K; ++k) {
      double b = all[r * width + k] * perStep;
      t += b;
      if (b > 0)
        list.push_back({b, kernels[k].kernel});
    }
    std::sort(list.begin(), list.end(), [](const auto &a, const auto &b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    return std::make_pair(t, list);
  };
  auto [busiest, breakdown] = bytesOf(chosen);
  std::string parts;
  for (const auto &[b, name] : breakdown) {
    char text[96];
    snprintf(text, sizeof(text), "%s%s %.0f", parts.empty() ? "" : ", ",
             name.c_str(), b);
    parts += text;
  }
  printf("%s: bytes per step and rank: %.0f (%s) on rank %lld, the most of "
         "%lld ranks\n",
         toolName().c_str(), busiest, parts.empty() ? "none" : parts.c_str(),
         (long long)chosen, (long long)world);
  if (compressing >= 0) {
    double measured = bytesOf(compressing).first;
    double c = all[compressing * width + K];
    double u = all[compressing * width + K + 1];
    double without = measured - c + u;
    printf("%s: compression %s: exchanges %.0f bytes per step and rank "
           "(formula), fp32 ring all-reduce of the same gradients %.0f: %s "
           "fewer; this step measured %.0f, without compression it would "
           "send %.0f (%s) on rank %lld\n",
           toolName().c_str(), methods, c, u, ratio(u, c).c_str(), measured,
           without, ratio(without, measured).c_str(),
           (long long)compressing);
  }
  fflush(stdout);
}

void reportErrorFeedbackNorm(par_rt_context_t *ctx,
                             const std::vector<ErrorFeedbackBlock> &mine,
                             int64_t buffers, int64_t rank, int64_t world) {
  double sum = 0;
  for (const ErrorFeedbackBlock &b : mine) {
    const Function &f = *b.f;
    const Tensor &t = f.inputs[b.input];
    // A block replicated over an axis is one buffer: counted at coordinate
    // 0 of every axis the tensor neither splits nor holds partial over.
    // (Error-feedback buffers are split over every axis but a pipeline's,
    // one row per device, so every rank counts its own.)
    std::vector<int64_t> c = f.coords(f.rank());
    bool owner = true;
    for (int64_t a = 0; a < (int64_t)f.axisSizes.size(); ++a) {
      bool used = std::find(t.partial.begin(), t.partial.end(), a) !=
                  t.partial.end();
      for (const std::vector<int64_t> &d : t.dims)
        used = used || std::find(d.begin(), d.end(), a) != d.end();
      if (!used && a != b.skipAxis && c[a] != 0)
        owner = false;
    }
    if (!owner)
      continue;
    for (int64_t i = 0; i < t.localCount; ++i) {
      double v = par_dtype_load(t.dtype, b.local->data(), i);
      sum += v * v;
    }
  }
  std::vector<double> all(rank == 0 ? world : 0);
  checkRuntime(par_rt_gather_world(ctx, &sum, sizeof(sum),
                                   rank == 0 ? all.data() : nullptr),
               ctx, "gathering the error-feedback norms");
  if (rank != 0)
    return;
  double total = 0;
  for (double s : all)
    total += s;
  printf("%s: error-feedback norm %.3e (%lld buffers)\n", toolName().c_str(),
         std::sqrt(total), (long long)buffers);
  fflush(stdout);
}

} // namespace par::tooling
