//===- par-gemm-bench.cpp - GEMM throughput of the CUDA backend -----------===//
//
// Times the matmul kernels a compiled CUDA program calls, on one GPU, as the
// program calls them: a one-rank PAR_BACKEND_CUDA context on the local world
// (no MPI), device buffers from par_gpu_alloc, and per shape
//
//   bf16  par_rt_k_batch_matmul_mixed, bf16 A and B, f32 C (f32 accumulate)
//   f32   par_rt_k_matmul (par_rt_k_batch_matmul for --batch > 1)
//
// reporting TFLOP/s = 2*batch*M*N*K / seconds per call. Calls queue on the
// backend's stream without synchronizing (as in a compiled program); the
// timed loop ends with a context synchronize, so the time is the device's.
// PAR_CUDA_TF32=1 lets the f32 GEMM use TF32 tensor cores.
//
//   par-gemm-bench [--shape MxNxK]... [--batch B] [--iters N] [--warmup N]
//                  [--json FILE] [--check]
//
// --check first compares small products of every form (f32/f64, the
// transposed operands, bf16 and f16 mixed, accumulate) with a host loop.
// Without a GPU it exits with status 1 and the runtime's message.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_gpu.h"
#include "par/Runtime/par_kernel_abi.h"
#include "par/Runtime/par_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Shape {
  int64_t M, N, K;
};

[[noreturn]] void fatal(const std::string &message) {
  std::fprintf(stderr, "par-gemm-bench: error: %s\n", message.c_str());
  std::exit(1);
}

[[noreturn]] void gpuFatal(const char *what) {
  const char *e = par_gpu_last_error();
  fatal(std::string(what) + ": " + (e ? e : "unknown GPU error"));
}

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even (finite inputs)
  return uint16_t(u >> 16);
}
/// Exact for the small integers --check uses.
uint16_t toF16(float f) {
  if (f == 0)
    return 0;
  uint16_t sign = f < 0 ? 0x8000 : 0;
  f = std::fabs(f);
  int e;
  float m = std::frexp(f, &e); // f = m * 2^e, m in [0.5, 1)
  uint16_t exp = uint16_t(e - 1 + 15), mant = uint16_t((m * 2 - 1) * 1024);
  return uint16_t(sign | (exp << 10) | mant);
}

/// Device memory that is freed at the end.
struct DeviceBuffer {
  void *ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (par_gpu_alloc(&ptr, bytes) != 0)
      gpuFatal("par_gpu_alloc");
  }
  ~DeviceBuffer() { par_gpu_free(ptr); }
  int64_t address() const { return int64_t(intptr_t(ptr)); }
  void upload(const void *host, size_t bytes) {
    if (par_gpu_copy(ptr, host, bytes) != 0)
      gpuFatal("par_gpu_copy");
  }
  void download(void *host, size_t bytes) const {
    if (par_gpu_copy(host, ptr, bytes) != 0)
      gpuFatal("par_gpu_copy");
  }
};

Shape parseShape(const char *text) {
  Shape s{};
  char x1, x2;
  long long m, n, k;
  char tail;
  if (std::sscanf(text, "%lld%c%lld%c%lld%c", &m, &x1, &n, &x2, &k, &tail) !=
          5 ||
      x1 != 'x' || x2 != 'x' || m <= 0 || n <= 0 || k <= 0)
    fatal(std::string("bad shape '") + text + "' (expected MxNxK)");
  s.M = m;
  s.N = n;
  s.K = k;
  return s;
}

//===----------------------------------------------------------------------===//
// --check: small products against a host loop
//===----------------------------------------------------------------------===//

int failures = 0;

/// One product of `batch` [M][K]x[K][N] with small integer entries (exact in
/// every dtype), dtype 0..3 as par_types.h, `mixed` through
/// par_rt_k_batch_matmul_mixed.
void checkOne(int32_t dtype, bool mixed, int64_t batch, int64_t M, int64_t N,
              int64_t K, bool ta, bool tb, bool accumulate) {
  std::mt19937 gen(unsigned(M * 131 + N * 17 + K + ta * 2 + tb));
  std::uniform_int_distribution<int> dist(-3, 3);
  std::vector<double> a(size_t(batch * M * K)), b(size_t(batch * K * N)),
      c0(size_t(batch * M * N));
  for (double &v : a)
    v = dist(gen);
  for (double &v : b)
    v = dist(gen);
  for (double &v : c0)
    v = dist(gen);
  size_t es = dtype == PAR_F64 ? 8 : dtype == PAR_F32 ? 4 : 2;
  size_t ces = mixed ? 4 : es;
  auto pack = [&](const std::vector<double> &x, size_t size) {
    std::vector<unsigned char> out(x.size() * size);
    for (size_t i = 0; i < x.size(); ++i) {
      if (size == 8) {
        std::memcpy(&out[i * 8], &x[i], 8);
      } else if (size == 4) {
        float f = float(x[i]);
        std::memcpy(&out[i * 4], &f, 4);
      } else {
        uint16_t h = dtype == PAR_BF16 ? toBf16(float(x[i])) : toF16(float(x[i]));
        std::memcpy(&out[i * 2], &h, 2);
      }
    }
    return out;
  };
  std::vector<unsigned char> ha = pack(a, es), hb = pack(b, es),
                             hc = pack(c0, ces);
  DeviceBuffer da(ha.size()), db(hb.size()), dc(hc.size());
  da.upload(ha.data(), ha.size());
  db.upload(hb.data(), hb.size());
  dc.upload(hc.data(), hc.size());
  if (mixed)
    par_rt_k_batch_matmul_mixed(da.address(), db.address(), dc.address(),
                                batch, M, N, K, ta, tb, dtype, dtype,
                                accumulate);
  else if (batch == 1 && !ta && !tb)
    par_rt_k_matmul(da.address(), db.address(), dc.address(), M, N, K, dtype,
                    accumulate);
  else
    par_rt_k_batch_matmul(da.address(), db.address(), dc.address(), batch, M,
                          N, K, ta, tb, dtype, accumulate);
  dc.download(hc.data(), hc.size());
  double worst = 0;
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = accumulate ? c0[size_t((p * M + i) * N + j)] : 0;
        for (int64_t k = 0; k < K; ++k)
          // op(A) stored [M][K] or, transposed, [K][M]; op(B) [K][N] or
          // [N][K].
          want += (ta ? a[size_t(p * M * K + k * M + i)]
                      : a[size_t(p * M * K + i * K + k)]) *
                  (tb ? b[size_t(p * K * N + j * K + k)]
                      : b[size_t(p * K * N + k * N + j)]);
        size_t idx = size_t((p * M + i) * N + j);
        double got;
        if (ces == 8) {
          std::memcpy(&got, &hc[idx * 8], 8);
        } else {
          float f;
          std::memcpy(&f, &hc[idx * 4], 4);
          got = f;
        }
        worst = std::fmax(worst, std::fabs(got - want));
      }
  const char *names[] = {"f32", "f64", "f16", "bf16"};
  bool ok = worst == 0;
  failures += !ok;
  std::printf("%s %s%s batch=%lld %lldx%lldx%lld trans_a=%d trans_b=%d "
              "accumulate=%d (max error %g)\n",
              ok ? "PASS" : "FAIL", mixed ? "mixed " : "",
              names[dtype], (long long)batch, (long long)M, (long long)N,
              (long long)K, int(ta), int(tb), int(accumulate), worst);
}

void runChecks() {
  for (int t = 0; t < 4; ++t) {
    bool ta = t & 1, tb = t & 2;
    checkOne(PAR_F32, false, 3, 5, 7, 9, ta, tb, t == 3);
    checkOne(PAR_F64, false, 2, 4, 3, 6, ta, tb, t == 1);
    checkOne(PAR_BF16, true, 3, 6, 5, 8, ta, tb, t == 2);
    checkOne(PAR_F16, true, 2, 3, 4, 5, ta, tb, t == 0);
  }
  checkOne(PAR_F32, false, 1, 33, 17, 65, false, false, false);
  checkOne(PAR_F32, false, 1, 8, 8, 8, false, false, true);
  checkOne(PAR_F32, true, 2, 4, 6, 8, true, false, false); // f32 "mixed"
}

//===----------------------------------------------------------------------===//
// Timing
//===----------------------------------------------------------------------===//

struct Result {
  Shape shape;
  const char *kind;
  double seconds; // per call
  double tflops;
};

template <typename F> double timeCalls(int warmup, int iters, F call) {
  for (int i = 0; i < warmup; ++i)
    call();
  if (par_gpu_synchronize() != 0)
    gpuFatal("par_gpu_synchronize");
  double start = par_rt_now_seconds();
  for (int i = 0; i < iters; ++i)
    call();
  if (par_gpu_synchronize() != 0)
    gpuFatal("par_gpu_synchronize");
  return (par_rt_now_seconds() - start) / iters;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<Shape> shapes;
  int64_t batch = 1;
  int iters = 20, warmup = 3;
  std::string jsonPath;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        fatal(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--shape")
      shapes.push_back(parseShape(value()));
    else if (arg == "--batch")
      batch = std::atoll(value());
    else if (arg == "--iters")
      iters = std::atoi(value());
    else if (arg == "--warmup")
      warmup = std::atoi(value());
    else if (arg == "--json")
      jsonPath = value();
    else if (arg == "--check")
      check = true;
    else if (arg == "--help" || arg == "-h") {
      std::printf("usage: par-gemm-bench [--shape MxNxK]... [--batch B] "
                  "[--iters N] [--warmup N] [--json FILE] [--check]\n");
      return 0;
    } else
      fatal("unknown argument '" + arg + "'");
  }
  if (batch < 1 || iters < 1 || warmup < 0)
    fatal("--batch and --iters must be positive, --warmup non-negative");
  if (shapes.empty() && !check)
    shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}};

  par_rt_options_t options;
  par_rt_options_initialize(&options);
  options.backend = PAR_BACKEND_CUDA;
  options.world = PAR_WORLD_LOCAL;
  par_rt_context_t *ctx = nullptr;
  if (par_rt_context_create(&options, &argc, &argv, &ctx) != PAR_OK)
    fatal(std::string("cannot create a CUDA context: ") +
          par_rt_context_last_error(nullptr));

  if (check)
    runChecks();

  std::vector<Result> results;
  for (const Shape &s : shapes) {
    double flops = 2.0 * double(batch) * double(s.M) * double(s.N) *
                   double(s.K);
    size_t ab16 = size_t(batch * s.M * s.K) * 2, bb16 = size_t(batch * s.K * s.N) * 2,
           cb = size_t(batch * s.M * s.N) * 4;
    // Random operands (zeros would flatter the power-limited clocks).
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    {
      DeviceBuffer a(ab16), b(bb16), c(cb);
      std::vector<uint16_t> host(std::max(ab16, bb16) / 2);
      for (uint16_t &h : host)
        h = toBf16(dist(gen));
      a.upload(host.data(), ab16);
      b.upload(host.data(), bb16);
      double t = timeCalls(warmup, iters, [&] {
        par_rt_k_batch_matmul_mixed(a.address(), b.address(), c.address(),
                                    batch, s.M, s.N, s.K, 0, 0, PAR_BF16,
                                    PAR_BF16, 0);
      });
      results.push_back({s, "bf16", t, flops / t / 1e12});
    }
    {
      DeviceBuffer a(ab16 * 2), b(bb16 * 2), c(cb);
      std::vector<float> host(std::max(ab16, bb16) / 2);
      for (float &f : host)
        f = dist(gen);
      a.upload(host.data(), ab16 * 2);
      b.upload(host.data(), bb16 * 2);
      double t = timeCalls(warmup, iters, [&] {
        if (batch == 1)
          par_rt_k_matmul(a.address(), b.address(), c.address(), s.M, s.N,
                          s.K, PAR_F32, 0);
        else
          par_rt_k_batch_matmul(a.address(), b.address(), c.address(), batch,
                                s.M, s.N, s.K, 0, 0, PAR_F32, 0);
      });
      results.push_back({s, "f32", t, flops / t / 1e12});
    }
  }
  const char *tf32 = std::getenv("PAR_CUDA_TF32");
  bool tf32On = tf32 && std::strcmp(tf32, "1") == 0;
  for (const Result &r : results)
    std::printf("%lldx%lldx%lld batch %lld %-4s%s: %10.4f ms  %8.1f TFLOP/s\n",
                (long long)r.shape.M, (long long)r.shape.N,
                (long long)r.shape.K, (long long)batch, r.kind,
                std::strcmp(r.kind, "f32") == 0 && tf32On ? " (tf32)" : "",
                r.seconds * 1e3, r.tflops);
  if (!jsonPath.empty()) {
    FILE *f = std::fopen(jsonPath.c_str(), "w");
    if (!f)
      fatal("cannot write '" + jsonPath + "'");
    std::fprintf(f, "{\"batch\": %lld, \"iters\": %d, \"tf32\": %s, "
                    "\"check_failures\": %d, \"results\": [",
                 (long long)batch, iters, tf32On ? "true" : "false",
                 failures);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result &r = results[i];
      std::fprintf(f,
                   "%s\n  {\"M\": %lld, \"N\": %lld, \"K\": %lld, "
                   "\"dtype\": \"%s\", \"seconds\": %.9g, \"tflops\": %.6g}",
                   i ? "," : "", (long long)r.shape.M, (long long)r.shape.N,
                   (long long)r.shape.K, r.kind, r.seconds, r.tflops);
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  par_rt_context_destroy(ctx);
  if (failures)
    std::fprintf(stderr, "par-gemm-bench: %d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
