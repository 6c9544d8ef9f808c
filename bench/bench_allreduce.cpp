//===- bench_allreduce.cpp - par_rt_k_all_reduce vs raw MPI_Allreduce ----===//
//
// Runs under mpirun. For every message size (f32, powers of --factor from
// --min-bytes to --max-bytes; default 1 KiB .. 64 MiB by x4) it times
//
//   runtime: par_rt_k_all_reduce(in, out, count, PAR_F32, PAR_SUM, axes = 1)
//            on a context whose mesh is [P] (axis 0 = every rank), and
//   raw:     MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)
//
// on the same buffers with the same iteration count. The two loops are
// interleaved (ABBA order over --reps repetitions, default 10); one
// repetition of one side is: barrier, `iters` calls (about --bytes-per-rep
// bytes, 2 to --max-iters calls), and the time of the slowest rank. The best
// repetition per side is kept. It prints the time per call, the bus
// bandwidth 2(P-1)/P * S / t of both, and runtime/raw (bandwidth ratio,
// i.e. t_raw / t_runtime; target >= 0.9, informational). Each size's
// runtime result is checked once against the exact sum.
//
// Exit status: 0 unless the runtime cannot start, a result is wrong, or the
// arguments are bad.
//
//   mpirun --oversubscribe -n 4 build/bin/par-bench-allreduce [--reps 5]
//       [--min-bytes 1024] [--max-bytes 67108864] [--factor 4]
//       [--bytes-per-rep 67108864] [--max-iters 200]
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_runtime.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t minBytes = 1024;
  int64_t maxBytes = int64_t(64) << 20;
  int64_t factor = 4;
  int reps = 10;
  // Iterations per repetition: about this many bytes moved per rank, but
  // at least 2 and at most maxIters calls.
  int64_t bytesPerRep = int64_t(64) << 20;
  int64_t maxIters = 200;
  double target = 0.9;
};

void printUsage(int rank, const char *msg) {
  if (rank == 0)
    fprintf(stderr,
            "%s%s"
            "usage: mpirun -n P par-bench-allreduce [--reps N] [--min-bytes B] "
            "[--max-bytes B] [--factor F] [--bytes-per-rep B] [--max-iters N]\n",
            msg ? "par-bench-allreduce: " : "", msg ? msg : "");
}

[[noreturn]] void usage(int rank, const std::string &msg) {
  printUsage(rank, (msg + "\n").c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

Options parse(int argc, char **argv, int rank, bool &help) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      help = true;
      return o;
    }
    if (i + 1 >= argc)
      usage(rank, "missing value for " + a);
    char *end = nullptr;
    long long v = strtoll(argv[++i], &end, 10);
    if (*end || v <= 0)
      usage(rank, "bad value for " + a);
    if (a == "--reps")
      o.reps = int(v);
    else if (a == "--min-bytes")
      o.minBytes = v;
    else if (a == "--max-bytes")
      o.maxBytes = v;
    else if (a == "--factor")
      o.factor = v;
    else if (a == "--bytes-per-rep")
      o.bytesPerRep = v;
    else if (a == "--max-iters")
      o.maxIters = v;
    else
      usage(rank, "unknown option " + a);
  }
  if (o.factor < 2 || o.minBytes < 4 || o.maxBytes < o.minBytes)
    usage(rank, "need --factor >= 2 and 4 <= --min-bytes <= --max-bytes");
  return o;
}

/// Runs `body` `iters` times between a barrier and the slowest rank's end;
/// returns seconds per call.
template <typename F> double timeLoop(int64_t iters, F body) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int64_t i = 0; i < iters; ++i)
    body();
  double mine = MPI_Wtime() - t0, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest / double(iters);
}

} // namespace

int main(int argc, char **argv) {
  par_rt_options_t ropts;
  par_rt_options_initialize(&ropts);
  par_rt_context_t *ctx = nullptr;
  if (par_status_t st = par_rt_context_create(&ropts, &argc, &argv, &ctx)) {
    fprintf(stderr, "par-bench-allreduce: cannot create the runtime context "
                    "(status %d): %s\n",
            int(st), ctx ? par_rt_context_last_error(ctx) : "?");
    return 1;
  }
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  bool help = false;
  Options o = parse(argc, argv, rank, help);
  if (help) {
    printUsage(rank, nullptr);
    par_rt_context_destroy(ctx);
    return 0;
  }
  int64_t sizes[1] = {world};
  if (par_rt_context_set_mesh(ctx, 1, sizes) != PAR_OK) {
    fprintf(stderr, "par-bench-allreduce: set_mesh: %s\n",
            par_rt_context_last_error(ctx));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int64_t axes = 1; // byte 0 = axis 0 + 1; the group is every rank
  const double busFactor = 2.0 * (world - 1) / world;

  std::vector<int64_t> list;
  for (int64_t b = o.minBytes; b <= o.maxBytes; b *= o.factor)
    list.push_back(b / 4 * 4);
  int64_t maxCount = list.back() / 4;
  std::vector<float> in(maxCount), out(maxCount);
  // Small integers: every partial sum is exact in f32.
  for (int64_t i = 0; i < maxCount; ++i)
    in[i] = float((i + rank) % 7);

  if (rank == 0) {
    char host[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(host, &len);
    printf("par-bench-allreduce: %d ranks on %s, f32 sum, mesh [%d], axes "
           "code %lld\n",
           world, host, world, (long long)axes);
    printf("runtime = par_rt_k_all_reduce; raw = MPI_Allreduce on "
           "MPI_COMM_WORLD; same buffers (out of place), same iterations, "
           "interleaved ABBA,\nbest of %d reps, time = slowest rank; bus "
           "bandwidth = 2(P-1)/P * S / t\n\n",
           o.reps);
    printf("%10s %6s %12s %12s %11s %11s %9s  %s\n", "bytes", "iters",
           "runtime_us", "raw_us", "rt_GB/s", "raw_GB/s", "rt/raw",
           "target >= 0.9");
    printf("---------------------------------------------------------------"
           "--------------------------------\n");
  }

  int failures = 0, bad = 0;
  double logSum = 0, worst = 1e300;
  for (int64_t bytes : list) {
    int64_t count = bytes / 4;
    int64_t iters = std::clamp<int64_t>(o.bytesPerRep / bytes, 2, o.maxIters);

    // Warm-up (also creates and caches the runtime's communicator), then a
    // correctness check of the runtime's result.
    std::fill(out.begin(), out.begin() + count, -1.0f);
    par_rt_k_all_reduce((int64_t)(intptr_t)in.data(),
                        (int64_t)(intptr_t)out.data(), count, PAR_F32, PAR_SUM,
                        axes);
    int wrong = 0;
    for (int64_t i = 0; i < count && !wrong; ++i) {
      double want = 0;
      for (int r = 0; r < world; ++r)
        want += (i + r) % 7;
      wrong = out[i] != float(want);
    }
    MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    int anyWrong = 0;
    MPI_Allreduce(&wrong, &anyWrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    bad += anyWrong;

    auto runtimeCall = [&] {
      par_rt_k_all_reduce((int64_t)(intptr_t)in.data(),
                          (int64_t)(intptr_t)out.data(), count, PAR_F32,
                          PAR_SUM, axes);
    };
    auto rawCall = [&] {
      MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    };
    double bestRt = 1e300, bestRaw = 1e300;
    for (int r = 0; r < o.reps; ++r) {
      if (r % 2 == 0) {
        bestRt = std::min(bestRt, timeLoop(iters, runtimeCall));
        bestRaw = std::min(bestRaw, timeLoop(iters, rawCall));
      } else {
        bestRaw = std::min(bestRaw, timeLoop(iters, rawCall));
        bestRt = std::min(bestRt, timeLoop(iters, runtimeCall));
      }
    }
    double bwRt = busFactor * bytes / bestRt / 1e9;
    double bwRaw = busFactor * bytes / bestRaw / 1e9;
    double ratio = bestRaw / bestRt; // = bwRt / bwRaw
    bool pass = ratio >= o.target;
    failures += !pass;
    logSum += std::log(ratio);
    worst = std::min(worst, ratio);
    if (rank == 0) {
      printf("%10lld %6lld %12.2f %12.2f %11.3f %11.3f %9.3f  %s%s\n",
             (long long)bytes, (long long)iters, bestRt * 1e6, bestRaw * 1e6,
             bwRt, bwRaw, ratio, pass ? "PASS" : "FAIL",
             anyWrong ? "  WRONG RESULT" : "");
      fflush(stdout);
    }
  }
  if (rank == 0) {
    printf("\nruntime/raw over %zu sizes: geometric mean %.3f, worst %.3f; "
           "%d of %zu below %.2f\n",
           list.size(), std::exp(logSum / list.size()), worst, failures,
           list.size(), o.target);
    par_rt_stats_t stats;
    par_rt_context_stats(ctx, &stats);
    printf("runtime stats (rank 0): %lld collectives, %.3f s inside them\n",
           (long long)stats.collectives, stats.seconds);
    if (bad)
      printf("ERROR: the runtime's all_reduce returned a wrong sum for %d "
             "size(s)\n",
             bad);
  }
  par_rt_context_destroy(ctx);
  return bad ? 1 : 0;
}
