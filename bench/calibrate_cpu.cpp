//===- calibrate_cpu.cpp - The cpu-local machine file, measured -----------===//
//
// Writes par-plan's machine description of this machine (docs/Planning.md's
// schema) from micro-benchmarks run on every rank at once, as a training
// run's ranks share the cores:
//
//   GEMM        cblas_sgemm, square n = 32 .. 1024: the peak (the best rate)
//               and the efficiency curve (each size's rate over the peak,
//               keyed by its FLOPs); the smallest's time is the kernel floor
//               (kernel_launch_s);
//   vector      y = y * a + b over an L1-resident array: vector_flops;
//   copy        memcpy of 64 MiB: memory_bandwidth (bytes read + written);
//   collectives MPI_Allreduce over all ranks, 4 KiB .. 16 MiB: a least-squares
//               fit (in relative error) of t = 2(P-1) alpha + 2(P-1)/P S / beta gives the link's
//               latency per step and bandwidth (one node: node and network
//               alike);
//
//   sharing   a 256 GEMM on rank 0 while the others wait in MPI against
//               all at once: the processors the ranks share (node.processors,
//               written when fewer than the ranks);
//   stretch   128 GEMMs with a 4-byte all-reduce after every 4 against
//               without: the slowest rank's lag between collectives
//               (node.sync_stretch);
//
// each timed by the slowest rank, the median of --reps. It is never fitted to the
// runs par-plan is validated against.
//
//   mpirun -n 8 build/bin/par-calibrate-cpu [--reps 7] [--threads 1] \
//       > share/par/machines/cpu-local.json
//
//===----------------------------------------------------------------------===//

#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

extern "C" void openblas_set_num_threads(int);

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Seconds per call of `fn` on every rank at once (or, with `alone`, on
/// rank 0 while the others wait in MPI, as a pipeline's idle ranks do):
/// `iters` calls between two barriers (so ranks that share a core are
/// timed until the last one is done, as a training step is), the slowest
/// rank, the median of `reps` (a training step's time is a median too:
/// the best of a few reps caught this shared machine's bursts, 20% apart
/// from one calibration to the next).
template <typename Fn> double timeOnce(int iters, Fn fn, bool alone) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = now();
  if (!alone || rank == 0)
    for (int i = 0; i < iters; ++i)
      fn();
  MPI_Barrier(MPI_COMM_WORLD);
  double t = (now() - t0) / iters, slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

template <typename Fn>
double timeAll(int reps, int iters, Fn fn, bool alone = false) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r)
    times.push_back(timeOnce(iters, fn, alone));
  return median(times);
}

/// The median over `reps` of b's time over a's, the two timed back to
/// back in each rep (so that the machine's drift, which moves single
/// timings by 20% here, cancels in each ratio).
template <typename A, typename B>
double pairedRatio(int reps, int iters, A a, B b, bool bAlone = false) {
  std::vector<double> ratios;
  for (int r = 0; r < reps; ++r) {
    double ta = timeOnce(iters, a, false);
    double tb = timeOnce(iters, b, bAlone);
    ratios.push_back(tb / ta);
  }
  return median(ratios);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int reps = 7, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps"))
      reps = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::max(1, std::atoi(argv[i + 1]));
  }
  openblas_set_num_threads(threads);

  // GEMM.
  // The sizes take turns within each rep (the machine's drift then moves
  // them alike: the efficiency curve is a ratio of them), the median rep.
  std::vector<std::pair<double, double>> gemm; // (flops, flop/s)
  double floorSeconds = 0;
  const int sizes[] = {32, 64, 128, 256, 512, 1024};
  std::vector<std::vector<double>> gemmTimes(std::size(sizes));
  std::vector<std::vector<float>> bufs;
  for (int n : sizes)
    bufs.emplace_back(size_t(n) * n, 1.0f);
  std::vector<float> out(size_t(1024) * 1024);
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < std::size(sizes); ++k) {
      int n = sizes[k];
      const float *a = bufs[k].data();
      int iters = std::max(2, int(1e9 / (2.0 * n * n * n)));
      gemmTimes[k].push_back(timeOnce(
          iters,
          [&] {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n,
                        1.0f, a, n, a, n, 0.0f, out.data(), n);
          },
          false));
    }
  for (size_t k = 0; k < std::size(sizes); ++k) {
    double n = sizes[k], flops = 2.0 * n * n * n, t = median(gemmTimes[k]);
    if (k == 0)
      floorSeconds = t;
    gemm.push_back({flops, flops / t});
  }
  double peak = 0;
  for (auto [f, rate] : gemm)
    peak = std::max(peak, rate);

  // How the ranks share the processors: a mid-sized GEMM on one rank while
  // the rest wait in MPI, against every rank at once. N ranks at rate r
  // each, one alone at r1: they share N r / r1 processors' worth.
  double sharedProcessors = size;
  {
    int n = 256;
    std::vector<float> a(size_t(n) * n, 1.0f), b(a), c(a);
    int iters = 16;
    auto gemmN = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                  a.data(), n, b.data(), n, 0.0f, c.data(), n);
    };
    sharedProcessors =
        size * pairedRatio(2 * reps + 1, iters, gemmN, gemmN, /*bAlone=*/true);
  }

  // The synchronisation stretch: the same GEMMs with a 4-byte all-reduce
  // after every 4 (a few ms of computation between collectives, as a
  // training step has) against without: how far the slowest rank lags
  // between two collectives, as a fraction of the computation.
  double syncStretch = 0;
  {
    int n = 128;
    std::vector<float> a(size_t(n) * n, 1.0f), b(a), c(a);
    float one = 1, sum = 0;
    auto gemms = [&] {
      for (int i = 0; i < 4; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                    a.data(), n, b.data(), n, 0.0f, c.data(), n);
    };
    syncStretch = std::max(
        0.0, pairedRatio(4 * reps + 3, 64, gemms, [&] {
               gemms();
               MPI_Allreduce(&one, &sum, 1, MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
             }) - 1);
  }

  // Vector FLOP/s.
  std::vector<float> y(4096, 1.0f);
  volatile float sink = 0;
  double vt = timeAll(reps, 20000, [&] {
    float a = 0.999f, b = 1e-3f;
    for (float &v : y)
      v = v * a + b;
    sink = sink + y[7];
  });
  double vectorFlops = 2.0 * y.size() / vt;

  // Memory copy.
  size_t bytes = size_t(64) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double ct = timeAll(reps, 8, [&] {
    std::memcpy(dst.data(), src.data(), bytes);
    sink = sink + dst[bytes / 2];
  });
  double bandwidth = 2.0 * bytes / ct;

  // All-reduce: fit t = x0 + x1 * S.
  std::vector<std::pair<double, double>> ar; // (bytes, seconds)
  for (size_t s = 4096; s <= (size_t(16) << 20); s *= 4) {
    std::vector<float> in(s / 4, 1.0f), out(s / 4);
    int iters = std::max(2, int((size_t(64) << 20) / s));
    double t = timeAll(reps, std::min(iters, 200), [&] {
      MPI_Allreduce(in.data(), out.data(), int(s / 4), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    ar.push_back({double(s), t});
  }
  // Least squares in relative error (weights 1/t^2): unweighted, the 16
  // MiB point set the line and the small sizes' latency fitted below zero.
  double sw = 0, mx = 0, my = 0;
  for (auto [s, t] : ar) {
    double w = 1 / (t * t);
    sw += w, mx += w * s, my += w * t;
  }
  mx /= sw, my /= sw;
  double sxx = 0, sxy = 0;
  for (auto [s, t] : ar) {
    double w = 1 / (t * t);
    sxx += w * (s - mx) * (s - mx), sxy += w * (s - mx) * (t - my);
  }
  double slope = sxx > 0 ? sxy / sxx : 1e-9;
  double intercept = std::max(0.0, my - slope * mx);
  double p = size;
  double latency = size > 1 ? intercept / (2 * (p - 1)) : 1e-6;
  double link = size > 1 ? 2 * (p - 1) / p / std::max(slope, 1e-15) : 1e12;

  double memory = double(sysconf(_SC_PHYS_PAGES)) *
                  double(sysconf(_SC_PAGE_SIZE)) / size;

  if (rank == 0) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    printf("{\n");
    printf("  \"name\": \"cpu-local\",\n");
    printf("  \"target\": \"cpu\",\n");
    printf("  \"description\": \"this machine (%s) as %d ranks of %d "
           "thread(s), %ld cores: measured by par-calibrate-cpu\",\n",
           host, size, threads, sysconf(_SC_NPROCESSORS_ONLN));
    printf("  \"sources\": [\"mpirun -n %d build/bin/par-calibrate-cpu "
           "--threads %d (bench/calibrate_cpu.cpp): sgemm 32..1024, a "
           "vector loop, 64 MiB memcpy, MPI_Allreduce 4 KiB..16 MiB fitted "
           "by least squares; every rank at once\"],\n",
           size, threads);
    printf("  \"device\": {\n");
    printf("    \"peak_flops\": {\"f32\": %.4g},\n", peak);
    printf("    \"vector_flops\": %.4g,\n", vectorFlops);
    printf("    \"memory_bytes\": %.4g,\n", memory);
    printf("    \"usable_memory_fraction\": 0.8,\n");
    printf("    \"memory_bandwidth\": %.4g,\n", bandwidth);
    printf("    \"kernel_launch_s\": %.4g,\n", floorSeconds);
    printf("    \"gemm_efficiency\": [");
    for (size_t i = 0; i < gemm.size(); ++i)
      printf("%s[%.4g, %.4g]", i ? ", " : "", gemm[i].first,
             std::min(1.0, gemm[i].second / peak));
    printf("]\n  },\n");
    // The ranks share the processors (measured above): the rates are each
    // rank's with all busy; par-plan speeds a rank up while others wait.
    // Omitted when every rank has its own.
    printf("  \"node\": {\"devices\": %d, ", size);
    if (sharedProcessors < 0.9 * size)
      printf("\"processors\": %.3g, ", sharedProcessors);
    printf("\"sync_stretch\": %.3g, ", syncStretch);
    printf("\"link_bandwidth\": %.4g, \"link_latency_s\": %.4g},\n", link,
           latency);
    printf("  \"network\": {\"bandwidth\": %.4g, \"latency_s\": %.4g, "
           "\"collective\": \"ring\"},\n",
           link, latency);
    printf("  \"measurements\": {\"allreduce_bytes_seconds\": [");
    for (size_t i = 0; i < ar.size(); ++i)
      printf("%s[%.0f, %.4g]", i ? ", " : "", ar[i].first, ar[i].second);
    printf("]}\n}\n");
  }
  MPI_Finalize();
  return 0;
}
