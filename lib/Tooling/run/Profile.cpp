//===- Profile.cpp - par-run --profile's table ----------------------------===//

#include "par/Tooling/Profile.h"

#include "par/Runtime/par_runtime.h"
#include "par/Tooling/Diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace par::tooling {

void printProfile(int64_t firstStep, int64_t steps, double stepSeconds,
                  int64_t rows) {
  struct Row {
    std::string name;
    double calls, seconds, flops, bytes;
  };
  std::vector<Row> all;
  for (int64_t i = 0, n = par_rt_profile_count(); i < n; ++i) {
    par_rt_profile_entry_t e;
    if (par_rt_profile_get(i, &e) == PAR_OK)
      all.push_back({e.name, double(e.calls), e.seconds, e.flops, e.bytes});
  }
  std::stable_sort(all.begin(), all.end(), [](const Row &a, const Row &b) {
    return a.seconds > b.seconds;
  });
  double per = 1.0 / double(std::max<int64_t>(steps, 1));
  double step = stepSeconds * per;
  auto share = [&](double s) { return step > 0 ? 100 * s * per / step : 0; };
  printf("%s: profile (rank 0): steps %lld..%lld, %.4f s a step\n",
         toolName().c_str(), (long long)firstStep,
         (long long)(firstStep + steps - 1), step);
  printf("  %-44s %10s %10s %7s %9s\n", "kernel", "calls", "ms", "step",
         "GFLOP/s");
  double covered = 0, gemm = 0, gemmFlops = 0, comm = 0;
  for (const Row &r : all) {
    covered += r.seconds;
    if (r.flops > 0) {
      gemm += r.seconds;
      gemmFlops += r.flops;
    } else if (r.name.compare(0, 11, "par_kernel_") != 0)
      comm += r.seconds; // the runtime's collectives and transfers
  }
  auto line = [&](const std::string &name, double calls, double seconds,
                  double flops) {
    std::string rate =
        flops > 0 && seconds > 0 ? std::to_string(int64_t(flops / seconds / 1e9))
                                 : "-";
    std::string shown = name.size() > 44 ? name.substr(0, 41) + "..." : name;
    printf("  %-44s %10.1f %10.3f %6.1f%% %9s\n", shown.c_str(), calls * per,
           seconds * per * 1e3, share(seconds), rate.c_str());
  };
  size_t shown = std::min<size_t>(all.size(), size_t(std::max<int64_t>(rows, 0)));
  for (size_t i = 0; i < shown; ++i)
    line(all[i].name, all[i].calls, all[i].seconds, all[i].flops);
  if (shown < all.size()) {
    Row rest{"", 0, 0, 0, 0};
    for (size_t i = shown; i < all.size(); ++i) {
      rest.calls += all[i].calls;
      rest.seconds += all[i].seconds;
      rest.flops += all[i].flops;
    }
    line("(" + std::to_string(all.size() - shown) + " more)", rest.calls,
         rest.seconds, rest.flops);
  }
  printf("  %-44s %10s %10.3f %6.1f%% %9s\n", "all GEMMs (BLAS)", "",
         gemm * per * 1e3, share(gemm),
         gemm > 0 ? std::to_string(int64_t(gemmFlops / gemm / 1e9)).c_str()
                  : "-");
  if (comm > 0)
    printf("  %-44s %10s %10.3f %6.1f%%\n", "all collectives", "",
           comm * per * 1e3, share(comm));
  printf("  %-44s %10s %10.3f %6.1f%%\n",
         "not in a kernel (allocation, copies, calls)", "",
         std::max(0.0, stepSeconds - covered) * per * 1e3,
         share(std::max(0.0, stepSeconds - covered)));
  fflush(stdout);
}

} // namespace par::tooling
