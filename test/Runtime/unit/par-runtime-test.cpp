//===- par-runtime-test.cpp - MPI tests of the par runtime ----------------===//
//
// Run under mpirun, e.g.  mpirun -n 6 par-runtime-test --mesh 2,3, or as a
// single process without mpirun (the local backend: no MPI loaded at all;
// --expect-no-mpi checks that, --world picks the world explicitly).
//
// Every kernel of par_runtime.h is checked against a reference each process
// computes locally: inputs are a deterministic function of (rank, element,
// salt), so any process knows what any other holds. Checks cover the dtypes
// and reductions, every ordered list of mesh axes (so multi-axis groups in
// both orders), send/recv between coordinates, the world-size mismatch
// message, the statistics' ring formulas (in total and per kernel), the
// exchanges of compressed gradients (i8/i32/f32 all_to_all and all_gather
// with full-range values), the host collectives and the f16/bf16
// conversions. With --backend cuda the CUDA backend is tried:
// without a GPU (as here) it must fail with PAR_ERR_UNAVAILABLE and its
// message, and the test goes on with the CPU backend; with a GPU the same
// checks run on device memory (one process per GPU: NCCL refuses two ranks
// on one device).
//
// Each process records pass/fail per check; at the end rank 0 gathers them
// and prints one line per check ("PASS <name>" or "FAIL <name> (ranks ...)")
// and then exactly "N passed, M failed". Every process exits non-zero if any
// check failed anywhere. A watchdog (alarm) ends a hung process, which makes
// mpirun tear the job down: the test can fail, never hang.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_runtime.h"

#include "common/Float16.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// Whether the build made libpar_runtime_cuda.so (set by CMake): decides which
// failure a GPU-less machine must report.
#ifndef PAR_RUNTIME_TEST_HAVE_CUDA_BACKEND
#define PAR_RUNTIME_TEST_HAVE_CUDA_BACKEND 0
#endif

using namespace par::rt;

namespace {

using Bytes = std::vector<unsigned char>;

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

struct Options {
  std::vector<int64_t> mesh; // --mesh 2,3 (default: one axis of world size)
  par_backend_t backend = PAR_BACKEND_CPU; // --backend cpu|cuda
  bool expectNotBuilt = false;             // --expect-cuda-not-built
  par_world_t world = PAR_WORLD_AUTO;      // --world auto|mpi|local
  bool expectNoMpi = false;                // --expect-no-mpi
  std::string abortTest;                   // --abort-test KIND
  int injectFailure = -1;                  // --inject-failure RANK
  int hang = -1;                           // --hang RANK
  unsigned timeout = 60;                   // --timeout SECONDS
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "par-runtime-test: %s\n"
               "usage: par-runtime-test [--mesh N[,N...]] [--backend cpu|cuda]"
               " [--world auto|mpi|local] [--expect-no-mpi]"
               " [--expect-cuda-not-built] [--abort-test "
               "dtype|axes|no-mesh|one-rank|wait] [--inject-failure RANK] "
               "[--hang RANK] [--timeout SECONDS]\n",
               why);
  std::exit(2);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--mesh") {
      std::string v = value();
      size_t pos = 0;
      while (pos <= v.size()) {
        size_t comma = v.find(',', pos);
        std::string part = v.substr(pos, comma == std::string::npos
                                             ? std::string::npos
                                             : comma - pos);
        char *end = nullptr;
        long long n = std::strtoll(part.c_str(), &end, 10);
        if (part.empty() || *end || n < 1)
          usage(("bad mesh " + v).c_str());
        o.mesh.push_back(n);
        if (comma == std::string::npos)
          break;
        pos = comma + 1;
      }
    } else if (a == "--backend") {
      std::string v = value();
      if (v == "cpu")
        o.backend = PAR_BACKEND_CPU;
      else if (v == "cuda")
        o.backend = PAR_BACKEND_CUDA;
      else
        usage(("unknown backend " + v).c_str());
    } else if (a == "--expect-cuda-not-built") {
      o.expectNotBuilt = true;
    } else if (a == "--world") {
      std::string v = value();
      if (v == "auto")
        o.world = PAR_WORLD_AUTO;
      else if (v == "mpi")
        o.world = PAR_WORLD_MPI;
      else if (v == "local")
        o.world = PAR_WORLD_LOCAL;
      else
        usage(("unknown world " + v).c_str());
    } else if (a == "--expect-no-mpi") {
      o.expectNoMpi = true;
    } else if (a == "--abort-test") {
      o.abortTest = value();
    } else if (a == "--inject-failure") {
      o.injectFailure = std::atoi(value().c_str());
    } else if (a == "--hang") {
      o.hang = std::atoi(value().c_str());
    } else if (a == "--timeout") {
      o.timeout = unsigned(std::atoi(value().c_str()));
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  return o;
}

//===----------------------------------------------------------------------===//
// Watchdog
//===----------------------------------------------------------------------===//

int gRank = -1;

/// The number of processes and this one's rank before a context exists,
/// from the launcher's environment (Open MPI, or PMI for others).
int envInt(const char *a, const char *b, int fallback) {
  for (const char *var : {a, b})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return fallback;
}
int worldSizeHint() { return envInt("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", 1); }
int rankHint() { return envInt("OMPI_COMM_WORLD_RANK", "PMI_RANK", 0); }

void onAlarm(int) {
  // Only async-signal-safe calls here.
  char text[96];
  int len = std::snprintf(text, sizeof(text),
                          "par-runtime-test: rank %d: timed out\n", gRank);
  if (len > 0)
    (void)!write(2, text, size_t(len));
  _exit(124);
}

//===----------------------------------------------------------------------===//
// Device memory through the CUDA runtime, loaded with dlopen so that the
// test needs no CUDA at build time. Used only when a CUDA context exists.
//===----------------------------------------------------------------------===//

struct Cudart {
  int (*malloc)(void **, size_t) = nullptr;
  int (*free)(void *) = nullptr;
  int (*memcpy)(void *, const void *, size_t, int) = nullptr;
  bool loaded = false;

  bool load() {
    // The backend already loaded libcudart; these find the same instance.
    for (const char *name : {"libcudart.so", "libcudart.so.13",
                             "libcudart.so.12", "libcudart.so.11.0"}) {
      void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (!lib)
        continue;
      malloc = reinterpret_cast<int (*)(void **, size_t)>(
          dlsym(lib, "cudaMalloc"));
      free = reinterpret_cast<int (*)(void *)>(dlsym(lib, "cudaFree"));
      memcpy = reinterpret_cast<int (*)(void *, const void *, size_t, int)>(
          dlsym(lib, "cudaMemcpy"));
      loaded = malloc && free && memcpy;
      if (loaded)
        return true;
    }
    return false;
  }
} gCudart;

bool gDevice = false; // kernel buffers live in device memory

/// The context under test (the kernels act on it as the current context).
par_rt_context_t *gContext = nullptr;

/// Whether an MPI library (libmpi, or the runtime's MPI backend) is loaded
/// in this process.
bool mpiLoaded() {
  bool found = false;
  dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t, void *data) {
        const char *name = info->dlpi_name ? info->dlpi_name : "";
        if (std::strstr(name, "libmpi") || std::strstr(name, "runtime_mpi"))
          *static_cast<bool *>(data) = true;
        return 0;
      },
      &found);
  return found;
}

/// How many GPUs this machine has, asked of the driver directly
/// (independently of the runtime under test); 0 without a driver.
int gpuCount() {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return 0;
  auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<int (*)(int *)>(dlsym(lib, "cuDeviceGetCount"));
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0)
    return 0;
  return n;
}

/// A kernel buffer: host bytes, mirrored in device memory in device mode.
class Buffer {
public:
  explicit Buffer(Bytes init) : host_(std::move(init)) {
    if (gDevice) {
      gCudart.malloc(&dev_, std::max<size_t>(host_.size(), 1));
      gCudart.memcpy(dev_, host_.data(), host_.size(), /*HostToDevice=*/1);
    }
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer() {
    if (dev_)
      gCudart.free(dev_);
  }
  int64_t addr() {
    return int64_t(reinterpret_cast<intptr_t>(dev_ ? dev_ : host_.data()));
  }
  const Bytes &read() {
    if (dev_)
      gCudart.memcpy(host_.data(), dev_, host_.size(), /*DeviceToHost=*/2);
    return host_;
  }

private:
  Bytes host_;
  void *dev_ = nullptr;
};

//===----------------------------------------------------------------------===//
// Values and references
//===----------------------------------------------------------------------===//

const int32_t kAllDtypes[] = {PAR_F32, PAR_F64, PAR_F16, PAR_BF16,
                              PAR_I32, PAR_I64, PAR_I8,  PAR_I1};
const int32_t kReductions[] = {PAR_SUM, PAR_MAX, PAR_MIN, PAR_AVG};

int64_t sizeOf(int32_t dtype) {
  switch (dtype) {
  case PAR_F64: case PAR_I64: return 8;
  case PAR_F32: case PAR_I32: return 4;
  case PAR_F16: case PAR_BF16: return 2;
  default: return 1;
  }
}

const char *nameOf(int32_t dtype) {
  static const char *names[] = {"f32", "f64", "f16", "bf16",
                                "i32", "i64", "i8",  "i1"};
  return names[dtype];
}

const char *redName(int32_t r) {
  static const char *names[] = {"sum", "max", "min", "avg"};
  return names[r];
}

bool isFloat(int32_t dtype) {
  return dtype == PAR_F32 || dtype == PAR_F64 || dtype == PAR_F16 ||
         dtype == PAR_BF16;
}

/// Element i of the buffer process `rank` starts with. Small integers: sums
/// over a group stay exact in every dtype (even bf16 and i8).
double valueOf(int64_t rank, int64_t i, int salt, int32_t dtype) {
  if (dtype == PAR_I1)
    return (rank * 5 + i * 3 + salt) % 3 == 0 ? 1 : 0;
  return double((rank * 7 + i * 3 + salt * 5) % 13) - 6;
}

void put(int32_t dtype, Bytes &b, int64_t i, double v) {
  unsigned char *p = b.data() + i * sizeOf(dtype);
  switch (dtype) {
  case PAR_F32: { float x = float(v); std::memcpy(p, &x, 4); break; }
  case PAR_F64: std::memcpy(p, &v, 8); break;
  case PAR_F16: { uint16_t x = floatToHalf(float(v)); std::memcpy(p, &x, 2); break; }
  case PAR_BF16: { uint16_t x = floatToBf16(float(v)); std::memcpy(p, &x, 2); break; }
  case PAR_I32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
  case PAR_I64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
  case PAR_I8: { int8_t x = int8_t(v); std::memcpy(p, &x, 1); break; }
  default: *p = v != 0; break;
  }
}

double get(int32_t dtype, const Bytes &b, int64_t i) {
  const unsigned char *p = b.data() + i * sizeOf(dtype);
  switch (dtype) {
  case PAR_F32: { float x; std::memcpy(&x, p, 4); return x; }
  case PAR_F64: { double x; std::memcpy(&x, p, 8); return x; }
  case PAR_F16: { uint16_t x; std::memcpy(&x, p, 2); return halfToFloat(x); }
  case PAR_BF16: { uint16_t x; std::memcpy(&x, p, 2); return bf16ToFloat(x); }
  case PAR_I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
  case PAR_I64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
  case PAR_I8: { int8_t x; std::memcpy(&x, p, 1); return x; }
  default: return *p;
  }
}

Bytes input(int64_t rank, int64_t count, int salt, int32_t dtype) {
  Bytes b(size_t(count * sizeOf(dtype)));
  for (int64_t i = 0; i < count; ++i)
    put(dtype, b, i, valueOf(rank, i, salt, dtype));
  return b;
}

/// Element i of process `rank`'s buffer for the checks of compressed
/// exchanges: every i8 value (-128..127: sign bits show), i32s far beyond
/// a byte, f32s with fractions, so that a mix-up of widths or signs shows.
double wideValue(int64_t rank, int64_t i, int salt, int32_t dtype) {
  int64_t k = (rank * 37 + i * 11 + salt * 3) % 256 - 128;
  switch (dtype) {
  case PAR_I8: return double(k);
  case PAR_I32: return double(k * 1000003);
  default: return double(k) * 0.375;
  }
}

Bytes wideInput(int64_t rank, int64_t count, int salt, int32_t dtype) {
  Bytes b(size_t(count * sizeOf(dtype)));
  for (int64_t i = 0; i < count; ++i)
    put(dtype, b, i, wideValue(rank, i, salt, dtype));
  return b;
}

/// Every kernel's statistics record (par_rt_context_kernel_stats).
std::vector<par_rt_kernel_stats_t> kernelRecords(par_rt_context_t *ctx) {
  int64_t n = par_rt_context_kernel_stats(ctx, nullptr, 0);
  std::vector<par_rt_kernel_stats_t> out(size_t(std::max<int64_t>(n, 0)));
  par_rt_context_kernel_stats(ctx, out.data(), n);
  return out;
}

/// The record named `kernel` of `records` (zeros if there is none).
par_rt_kernel_stats_t recordOf(const std::vector<par_rt_kernel_stats_t> &records,
                               const std::string &kernel) {
  for (const par_rt_kernel_stats_t &r : records)
    if (r.kernel && kernel == r.kernel)
      return r;
  return par_rt_kernel_stats_t{nullptr, 0, 0.0, 0.0};
}

/// A buffer of garbage, so that an untouched output never passes by luck.
Bytes garbage(int64_t count, int32_t dtype) {
  return Bytes(size_t(count * sizeOf(dtype)), 0xA5);
}

/// The reduction of `vals` with the runtime's semantics for `dtype`.
double reduce(const std::vector<double> &vals, int32_t dtype, int32_t red) {
  if (dtype == PAR_I1) {
    bool any = false, all = true;
    for (double v : vals) {
      any = any || v != 0;
      all = all && v != 0;
    }
    return red == PAR_MIN ? all : any;
  }
  double sum = 0, mx = vals[0], mn = vals[0];
  for (double v : vals) {
    sum += v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  switch (red) {
  case PAR_MAX: return mx;
  case PAR_MIN: return mn;
  case PAR_SUM: return sum;
  default: break;
  }
  double n = double(vals.size());
  if (dtype == PAR_F64)
    return sum / n;
  if (isFloat(dtype)) // f32, and f16/bf16 which reduce in f32
    return double(float(sum) / float(n));
  return double(int64_t(sum) / int64_t(vals.size())); // truncates like C
}

/// Empty if `got` matches `want` element for element, else the first
/// mismatch. Floats allow a last-bit difference: NCCL's avg pre-scales.
std::string compare(int32_t dtype, const Bytes &got, const Bytes &want) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + " != " +
           std::to_string(want.size());
  int64_t count = int64_t(want.size()) / sizeOf(dtype);
  double tol = dtype == PAR_F32    ? 1e-6
               : dtype == PAR_F64  ? 1e-12
               : dtype == PAR_F16  ? 1e-3
               : dtype == PAR_BF16 ? 1e-2
                                   : 0;
  for (int64_t i = 0; i < count; ++i) {
    double g = get(dtype, got, i), w = get(dtype, want, i);
    if (std::fabs(g - w) > tol * std::max(1.0, std::fabs(w)) ||
        std::isnan(g) != std::isnan(w)) {
      char text[160];
      std::snprintf(text, sizeof(text), "element %lld: got %g, want %g",
                    (long long)i, g, w);
      return text;
    }
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Mesh arithmetic, written independently of the runtime's
//===----------------------------------------------------------------------===//

struct Mesh {
  std::vector<int64_t> sizes;
  int64_t rank = 0;

  std::vector<int64_t> coordsOf(int64_t r) const {
    std::vector<int64_t> c(sizes.size());
    for (size_t a = sizes.size(); a-- > 0;) {
      c[a] = r % sizes[a];
      r /= sizes[a];
    }
    return c;
  }
  int64_t rankOf(const std::vector<int64_t> &c) const {
    int64_t r = 0;
    for (size_t a = 0; a < sizes.size(); ++a)
      r = r * sizes[a] + c[a];
    return r;
  }
  int64_t groupSize(const std::vector<int> &axes) const {
    int64_t n = 1;
    for (int a : axes)
      n *= sizes[a];
    return n;
  }
  /// Coordinates on the listed axes of group index j.
  std::vector<int64_t> listedCoords(const std::vector<int> &axes,
                                    int64_t j) const {
    std::vector<int64_t> c(axes.size());
    for (size_t k = axes.size(); k-- > 0;) {
      c[k] = j % sizes[axes[k]];
      j /= sizes[axes[k]];
    }
    return c;
  }
  /// World ranks of this process's group, by group index.
  std::vector<int64_t> members(const std::vector<int> &axes) const {
    std::vector<int64_t> out;
    for (int64_t j = 0; j < groupSize(axes); ++j) {
      std::vector<int64_t> c = coordsOf(rank);
      std::vector<int64_t> lc = listedCoords(axes, j);
      for (size_t k = 0; k < axes.size(); ++k)
        c[axes[k]] = lc[k];
      out.push_back(rankOf(c));
    }
    return out;
  }
  int64_t index(const std::vector<int> &axes) const {
    std::vector<int64_t> m = members(axes);
    return std::find(m.begin(), m.end(), rank) - m.begin();
  }
};

int64_t axesCode(const std::vector<int> &axes) {
  int64_t code = 0;
  for (size_t k = 0; k < axes.size(); ++k)
    code |= int64_t(axes[k] + 1) << (8 * k);
  return code;
}

int64_t coordsCode(const std::vector<int64_t> &c) {
  int64_t code = 0;
  for (size_t k = 0; k < c.size(); ++k)
    code |= c[k] << (16 * k);
  return code;
}

std::string axesName(const std::vector<int> &axes) {
  std::string s = "[";
  for (size_t k = 0; k < axes.size(); ++k)
    s += (k ? "," : "") + std::to_string(axes[k]);
  return s + "]";
}

/// Every ordered list of distinct axes, up to three long, and the empty one.
std::vector<std::vector<int>> axisLists(int numAxes) {
  std::vector<std::vector<int>> out = {{}};
  for (size_t start = 0; start < out.size(); ++start) {
    if (out[start].size() >= 3)
      continue;
    for (int a = 0; a < numAxes; ++a)
      if (std::find(out[start].begin(), out[start].end(), a) ==
          out[start].end()) {
        std::vector<int> l = out[start];
        l.push_back(a);
        out.push_back(l);
      }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Check bookkeeping
//===----------------------------------------------------------------------===//

std::vector<std::string> gNames;
Bytes gOk;

void check(const std::string &name, const std::string &failure) {
  gNames.push_back(name);
  gOk.push_back(failure.empty());
  if (!failure.empty())
    std::fprintf(stderr, "rank %d: FAIL %s: %s\n", gRank, name.c_str(),
                 failure.c_str());
}

void check(const std::string &name, bool ok, const std::string &why = "") {
  check(name, ok ? std::string() : why.empty() ? "failed" : why);
}

//===----------------------------------------------------------------------===//
// Kernel checks
//===----------------------------------------------------------------------===//

class Tester {
public:
  Tester(const Mesh &mesh, bool cuda) : mesh(mesh), cuda(cuda) {}

  void run() {
    for (const std::vector<int> &axes : axisLists(int(mesh.sizes.size()))) {
      for (int32_t dt : kAllDtypes) {
        for (int32_t red : kReductions) {
          if (dt == PAR_I1 && red == PAR_AVG)
            continue;
          allReduce(axes, dt, red, false);
          reduceScatter(axes, dt, red, 2, 3);
        }
        allGather(axes, dt, 2, 3);
        allGather(axes, dt, 1, 4);
        allGather(axes, dt, 2, 3, /*started=*/true);
        allGather(axes, dt, 1, 4, /*started=*/true);
        allToAll(axes, dt, 2, 3, 3, 2);
        allToAll(axes, dt, 1, 4, 1, 4);
        allSlice(axes, dt, 2, 3);
        int64_t n = mesh.groupSize(axes);
        broadcast(axes, dt, 0);
        broadcast(axes, dt, n - 1);
      }
      allReduce(axes, PAR_F32, PAR_SUM, /*inPlace=*/true);
      for (int32_t dt : {PAR_F32, PAR_F64, PAR_BF16, PAR_I32, PAR_I1})
        for (int32_t red : kReductions) {
          if (dt == PAR_I1 && red == PAR_AVG)
            continue;
          bucket(axes, dt, red, /*started=*/false);
          bucket(axes, dt, red, /*started=*/true);
        }
      bucketsOutOfOrder(axes);
      compressedExchanges(axes);
      reduceScatter(axes, PAR_F32, PAR_SUM, 1, 5);
      if (axes.size() <= 4 && mesh.groupSize(axes) > 1) {
        for (int32_t dt : {PAR_F32, PAR_BF16, PAR_I1, PAR_I64})
          sendRecv(axes, dt);
        if (!cuda) { // NCCL has no tags; its async send is synchronous
          tags(axes);
          sendAsync(axes);
        }
      }
      if (mesh.groupSize(axes) == 1 && !cuda) // NCCL would wait for itself
        sendToSelf(axes);
    }
    for (int32_t dt : kAllDtypes)
      for (int acc = 0; acc < 2; ++acc) {
        matmul(dt, 3, 4, 5, acc);
        matmul(dt, 1, 1, 1, acc);
        matmul(dt, 2, 3, 0, acc);
      }
    matmul(PAR_F32, 64, 48, 32, 1);
    matmul(PAR_F64, 33, 17, 65, 0);
    stats();
    kernelStats();
  }

private:
  const Mesh &mesh;
  bool cuda;

  std::string where(const std::vector<int> &axes, int32_t dt) const {
    return std::string(nameOf(dt)) + " axes=" + axesName(axes) +
           " n=" + std::to_string(mesh.groupSize(axes));
  }

  void allReduce(const std::vector<int> &axes, int32_t dt, int32_t red,
                 bool inPlace) {
    const int64_t count = 7;
    int salt = dt * 4 + red;
    std::vector<int64_t> m = mesh.members(axes);
    Buffer in(input(mesh.rank, count, salt, dt));
    Buffer out(garbage(count, dt));
    Buffer &dst = inPlace ? in : out;
    par_rt_k_all_reduce(in.addr(), dst.addr(), count, dt, red, axesCode(axes));
    Bytes want(size_t(count * sizeOf(dt)));
    for (int64_t i = 0; i < count; ++i) {
      std::vector<double> vals;
      for (int64_t r : m)
        vals.push_back(valueOf(r, i, salt, dt));
      put(dt, want, i, reduce(vals, dt, red));
    }
    check(std::string("all_reduce ") + redName(red) + (inPlace ? " in-place " : " ") +
              where(axes, dt),
          compare(dt, dst.read(), want));
  }

  /// A bucket's members and the (in, out, count) triples the kernels take;
  /// member 1 is empty, member 2 reduced in place.
  struct BucketBuffers {
    std::vector<std::unique_ptr<Buffer>> ins, outs;
    std::vector<int64_t> triples;
    std::vector<int64_t> counts{7, 0, 13, 1};
    int64_t total = 21;

    BucketBuffers(int64_t rank, int salt, int32_t dt) {
      for (size_t i = 0; i < counts.size(); ++i) {
        ins.push_back(std::make_unique<Buffer>(
            input(rank, counts[i], salt + 50 * int(i), dt)));
        outs.push_back(std::make_unique<Buffer>(garbage(counts[i], dt)));
        triples.insert(triples.end(),
                       {ins[i]->addr(),
                        i == 2 ? ins[i]->addr() : outs[i]->addr(), counts[i]});
      }
    }
    int64_t addr() { return int64_t(intptr_t(triples.data())); }
    int64_t size() const { return int64_t(counts.size()); }
    Buffer &result(size_t i) { return i == 2 ? *ins[i] : *outs[i]; }
  };

  /// Every member of `b` against the reduction of the group's inputs.
  std::string checkBucket(BucketBuffers &b, const std::vector<int> &axes,
                          int salt, int32_t dt, int32_t red) {
    std::vector<int64_t> m = mesh.members(axes);
    for (size_t k = 0; k < b.counts.size(); ++k) {
      Bytes want(size_t(b.counts[k] * sizeOf(dt)));
      for (int64_t i = 0; i < b.counts[k]; ++i) {
        std::vector<double> vals;
        for (int64_t r : m)
          vals.push_back(valueOf(r, i, salt + 50 * int(k), dt));
        put(dt, want, i, reduce(vals, dt, red));
      }
      std::string why = compare(dt, b.result(k).read(), want);
      if (!why.empty())
        return "member " + std::to_string(k) + ": " + why;
    }
    return {};
  }

  /// One bucket of four members: one message (statistics: one collective,
  /// the ring bytes of all members), blocking or started; while started, a
  /// matmul runs (the runtime advances the transfer at kernel entries) and
  /// the triples are overwritten (the start copied them); a second wait on
  /// the finished handle is a status, not a crash.
  void bucket(const std::vector<int> &axes, int32_t dt, int32_t red,
              bool started) {
    int salt = 300 + dt * 4 + red;
    BucketBuffers b(mesh.rank, salt, dt);
    int64_t code = axesCode(axes);
    par_rt_stats_t before, after;
    par_rt_context_stats(gContext, &before);
    std::string why;
    if (started) {
      int64_t h = par_rt_k_all_reduce_start(b.addr(), b.size(), dt, red, code);
      std::vector<int64_t> saved = b.triples;
      std::fill(b.triples.begin(), b.triples.end(), 0);
      Buffer x(input(mesh.rank, 12, 1, PAR_F32)), y(input(mesh.rank, 20, 2, PAR_F32));
      Buffer z(garbage(15, PAR_F32));
      par_rt_k_matmul(x.addr(), y.addr(), z.addr(), 3, 5, 4, PAR_F32, 0);
      par_rt_k_wait(h);
      b.triples = saved;
      if (h <= 0)
        why = "handle " + std::to_string(h) + " is not positive";
      else if (par_rt_request_wait(gContext, h) != PAR_ERR_INVALID_ARGUMENT ||
               std::string(par_rt_context_last_error(gContext))
                       .find("unknown or already complete") ==
                   std::string::npos)
        why = "a second wait did not fail with a status";
    } else {
      par_rt_k_bucket_all_reduce(b.addr(), b.size(), dt, red, code);
    }
    par_rt_context_stats(gContext, &after);
    double n = double(mesh.groupSize(axes));
    double bytes = 2 * (n - 1) / n * double(b.total * sizeOf(dt));
    if (why.empty())
      why = checkBucket(b, axes, salt, dt, red);
    if (why.empty() &&
        (after.collectives - before.collectives != 1 ||
         std::fabs(after.bytes_sent - before.bytes_sent - bytes) > 1e-9))
      why = "statistics: " +
            std::to_string(after.collectives - before.collectives) +
            " collectives, " +
            std::to_string(after.bytes_sent - before.bytes_sent) +
            " bytes; want 1 and " + std::to_string(bytes);
    check(std::string(started ? "bucket start/wait " : "bucket ") +
              redName(red) + " " + where(axes, dt),
          why);
  }

  /// Two buckets in flight at once, a blocking all_reduce in between,
  /// waited for in the opposite order.
  void bucketsOutOfOrder(const std::vector<int> &axes) {
    int64_t code = axesCode(axes);
    BucketBuffers a(mesh.rank, 500, PAR_F32), b(mesh.rank, 600, PAR_I64);
    int64_t ha = par_rt_k_all_reduce_start(a.addr(), a.size(), PAR_F32,
                                           PAR_SUM, code);
    int64_t hb = par_rt_k_all_reduce_start(b.addr(), b.size(), PAR_I64,
                                           PAR_MAX, code);
    Buffer in(input(mesh.rank, 5, 700, PAR_F32)), out(garbage(5, PAR_F32));
    par_rt_k_all_reduce(in.addr(), out.addr(), 5, PAR_F32, PAR_SUM, code);
    par_rt_k_wait(hb);
    par_rt_k_wait(ha);
    std::string why = checkBucket(a, axes, 500, PAR_F32, PAR_SUM);
    if (why.empty())
      why = checkBucket(b, axes, 600, PAR_I64, PAR_MAX);
    if (why.empty() && ha == hb)
      why = "two buckets got the same handle";
    if (why.empty() && par_rt_request_wait(gContext, int64_t(1) << 40) !=
                           PAR_ERR_INVALID_ARGUMENT)
      why = "a wait on a handle never started did not fail with a status";
    check("bucket two in flight, waited out of order axes=" + axesName(axes),
          why);
  }

  /// `started`: par_rt_k_all_gather_start, a matmul (other work that
  /// lets it progress), then par_rt_k_wait; C > 1 is the non-leading
  /// layout the backends re-lay out after the transfer.
  void allGather(const std::vector<int> &axes, int32_t dt, int64_t C,
                 int64_t D, bool started = false) {
    int salt = 40 + dt;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size());
    Buffer in(input(mesh.rank, C * D, salt, dt));
    Buffer out(garbage(C * n * D, dt));
    if (started) {
      int64_t h = par_rt_k_all_gather_start(in.addr(), out.addr(), C, D, dt,
                                            axesCode(axes));
      Buffer x(input(mesh.rank, 12, 1, PAR_F32));
      Buffer y(input(mesh.rank, 20, 2, PAR_F32));
      Buffer z(garbage(15, PAR_F32));
      par_rt_k_matmul(x.addr(), y.addr(), z.addr(), 3, 5, 4, PAR_F32, 0);
      par_rt_k_wait(h);
    } else {
      par_rt_k_all_gather(in.addr(), out.addr(), C, D, dt, axesCode(axes));
    }
    Bytes want(size_t(C * n * D * sizeOf(dt)));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < D; ++d)
          put(dt, want, (c * n + j) * D + d, valueOf(m[j], c * D + d, salt, dt));
    check(std::string(started ? "all_gather start/wait" : "all_gather") +
              " C=" + std::to_string(C) + " D=" + std::to_string(D) + " " +
              where(axes, dt),
          compare(dt, out.read(), want));
  }

  void reduceScatter(const std::vector<int> &axes, int32_t dt, int32_t red,
                     int64_t A, int64_t B) {
    int salt = 60 + dt * 4 + red;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size()), idx = mesh.index(axes);
    Buffer in(input(mesh.rank, A * n * B, salt, dt));
    Buffer out(garbage(A * B, dt));
    par_rt_k_reduce_scatter(in.addr(), out.addr(), A, B, dt, red,
                            axesCode(axes));
    Bytes want(size_t(A * B * sizeOf(dt)));
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> vals;
        for (int64_t r : m)
          vals.push_back(valueOf(r, (a * n + idx) * B + b, salt, dt));
        put(dt, want, a * B + b, reduce(vals, dt, red));
      }
    check(std::string("reduce_scatter ") + redName(red) +
              " A=" + std::to_string(A) + " B=" + std::to_string(B) + " " +
              where(axes, dt),
          compare(dt, out.read(), want));
  }

  void allToAll(const std::vector<int> &axes, int32_t dt, int64_t A,
                int64_t B, int64_t C, int64_t D) {
    int salt = 100 + dt;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size()), idx = mesh.index(axes);
    Buffer in(input(mesh.rank, A * n * B, salt, dt));
    Buffer out(garbage(C * n * D, dt));
    par_rt_k_all_to_all(in.addr(), out.addr(), A, B, C, D, dt,
                        axesCode(axes));
    // Block j of the output, as [C][D], is block idx of process j's input,
    // as [A][B]: element e of it sits at [e / B][idx][e % B] there.
    Bytes want(size_t(C * n * D * sizeOf(dt)));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t d = 0; d < D; ++d) {
          int64_t e = c * D + d;
          put(dt, want, (c * n + j) * D + d,
              valueOf(m[j], ((e / B) * n + idx) * B + e % B, salt, dt));
        }
    check("all_to_all A=" + std::to_string(A) + " B=" + std::to_string(B) +
              " C=" + std::to_string(C) + " D=" + std::to_string(D) + " " +
              where(axes, dt),
          compare(dt, out.read(), want));
  }

  /// The exchange of compressed gradients (par-compress-gradients): each
  /// process's [n, M] (row j for process j) split along dim 0 and
  /// concatenated along dim 1 into [1, n*M], block j from process j: A = C
  /// = 1, B = D = M. Returns its input bytes.
  int64_t compressedAllToAll(const std::vector<int> &axes, int32_t dt,
                             int64_t M) {
    int salt = 200 + dt;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size()), idx = mesh.index(axes);
    Buffer in(wideInput(mesh.rank, n * M, salt, dt));
    Buffer out(garbage(n * M, dt));
    par_rt_k_all_to_all(in.addr(), out.addr(), 1, M, 1, M, dt,
                        axesCode(axes));
    Bytes want(size_t(n * M * sizeOf(dt)));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < M; ++d)
        put(dt, want, j * M + d, wideValue(m[j], idx * M + d, salt, dt));
    check("compressed all_to_all [n," + std::to_string(M) +
              "] split 0 concat 1 " + where(axes, dt),
          compare(dt, out.read(), want));
    return n * M * sizeOf(dt);
  }

  /// All-gathers each process's [R, M] along `dim`: [n*R, M] (dim 0: C = 1,
  /// D = R*M) or [R, n*M] (dim 1: C = R, D = M). Returns the output bytes.
  int64_t compressedAllGather(const std::vector<int> &axes, int32_t dt,
                              int64_t R, int64_t M, int dim) {
    int salt = 220 + dt + 16 * dim;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size());
    Buffer in(wideInput(mesh.rank, R * M, salt, dt));
    Buffer out(garbage(n * R * M, dt));
    int64_t C = dim == 0 ? 1 : R, D = dim == 0 ? R * M : M;
    par_rt_k_all_gather(in.addr(), out.addr(), C, D, dt, axesCode(axes));
    Bytes want(size_t(n * R * M * sizeOf(dt)));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t d = 0; d < M; ++d)
          put(dt, want,
              dim == 0 ? (j * R + r) * M + d : (r * n + j) * M + d,
              wideValue(m[j], r * M + d, salt, dt));
    check("compressed all_gather [" + std::to_string(R) + "," +
              std::to_string(M) + "] dim " + std::to_string(dim) + " " +
              where(axes, dt),
          compare(dt, out.read(), want));
    return n * R * M * sizeOf(dt);
  }

  /// The exchanges of compressed gradients on i8 (int8 values, sign bits),
  /// i32 (top-k indices) and f32 (scales, top-k values), and the per-kernel
  /// statistics they add: all_to_all (n-1)/n of its input, all_gather
  /// (n-1)/n of its output, nothing under any other kernel.
  void compressedExchanges(const std::vector<int> &axes) {
    double n = double(mesh.groupSize(axes)), ring = (n - 1) / n;
    std::vector<par_rt_kernel_stats_t> before = kernelRecords(gContext);
    par_rt_stats_t totalBefore, totalAfter;
    par_rt_context_stats(gContext, &totalBefore);
    double a2a = 0, ag = 0;
    for (int32_t dt : {PAR_I8, PAR_I32, PAR_F32}) {
      a2a += ring * double(compressedAllToAll(axes, dt, 5));
      ag += ring * double(compressedAllGather(axes, dt, 1, 7, 0));
      ag += ring * double(compressedAllGather(axes, dt, 2, 3, 1));
    }
    std::vector<par_rt_kernel_stats_t> after = kernelRecords(gContext);
    par_rt_context_stats(gContext, &totalAfter);
    std::string why;
    char text[240];
    for (const par_rt_kernel_stats_t &r : after) {
      std::string k = r.kernel ? r.kernel : "(null)";
      par_rt_kernel_stats_t b = recordOf(before, k);
      int64_t calls = k == "all_to_all" ? 3 : k == "all_gather" ? 6 : 0;
      double bytes = k == "all_to_all" ? a2a : k == "all_gather" ? ag : 0;
      if (why.empty() && (r.calls - b.calls != calls ||
                          std::fabs(r.bytes_sent - b.bytes_sent - bytes) >
                              1e-9 * std::max(1.0, bytes))) {
        std::snprintf(text, sizeof(text),
                      "%s: %lld calls and %.3f bytes added, want %lld and "
                      "%.3f",
                      k.c_str(), (long long)(r.calls - b.calls),
                      r.bytes_sent - b.bytes_sent, (long long)calls, bytes);
        why = text;
      }
    }
    if (why.empty() &&
        (totalAfter.collectives - totalBefore.collectives != 9 ||
         std::fabs(totalAfter.bytes_sent - totalBefore.bytes_sent - a2a -
                   ag) > 1e-9 * std::max(1.0, a2a + ag)))
      why = "the totals do not add up to the kernels' records";
    check("compressed exchanges: per-kernel ring-formula bytes axes=" +
              axesName(axes) + " n=" + std::to_string(int64_t(n)),
          why);
  }

  void allSlice(const std::vector<int> &axes, int32_t dt, int64_t A,
                int64_t B) {
    int salt = 120 + dt;
    int64_t n = mesh.groupSize(axes), idx = mesh.index(axes);
    Buffer in(input(mesh.rank, A * n * B, salt, dt));
    Buffer out(garbage(A * B, dt));
    par_rt_k_all_slice(in.addr(), out.addr(), A, B, dt, axesCode(axes));
    Bytes want(size_t(A * B * sizeOf(dt)));
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        put(dt, want, a * B + b,
            valueOf(mesh.rank, (a * n + idx) * B + b, salt, dt));
    check("all_slice " + where(axes, dt), compare(dt, out.read(), want));
  }

  void broadcast(const std::vector<int> &axes, int32_t dt, int64_t root) {
    const int64_t count = 9;
    int salt = 140 + dt;
    std::vector<int64_t> m = mesh.members(axes);
    Buffer in(input(mesh.rank, count, salt, dt));
    Buffer out(garbage(count, dt));
    par_rt_k_broadcast(in.addr(), out.addr(), count, dt, root,
                       axesCode(axes));
    check("broadcast root=" + std::to_string(root) + " " + where(axes, dt),
          compare(dt, out.read(), input(m[size_t(root)], count, salt, dt)));
  }

  /// Each process sends to the next in its group (by index) and receives
  /// from the previous. Even indices send first, odd ones receive first:
  /// deadlock-free even where a send waits for its receive (NCCL, large MPI
  /// messages), including odd ring lengths.
  void sendRecv(const std::vector<int> &axes, int32_t dt) {
    const int64_t count = 6;
    int salt = 160 + dt;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size()), idx = mesh.index(axes);
    int64_t next = (idx + 1) % n, prev = (idx + n - 1) % n;
    Buffer payload(input(mesh.rank, count, salt, dt));
    Buffer got(garbage(count, dt));
    int64_t code = axesCode(axes);
    int64_t to = coordsCode(mesh.listedCoords(axes, next));
    int64_t from = coordsCode(mesh.listedCoords(axes, prev));
    if (idx % 2 == 0) {
      par_rt_k_send(payload.addr(), count, dt, code, to, 3);
      par_rt_k_recv(got.addr(), count, dt, code, from, 3);
    } else {
      par_rt_k_recv(got.addr(), count, dt, code, from, 3);
      par_rt_k_send(payload.addr(), count, dt, code, to, 3);
    }
    check("send/recv " + where(axes, dt),
          compare(dt, got.read(), input(m[size_t(prev)], count, salt, dt)));
  }

  /// In a group of one the peer is this process: a small send completes
  /// before its receive (MPI sends it eagerly, the local backend buffers it).
  void sendToSelf(const std::vector<int> &axes) {
    const int64_t count = 6;
    Buffer payload(input(mesh.rank, count, 170, PAR_I32));
    Buffer got(garbage(count, PAR_I32));
    int64_t code = axesCode(axes);
    int64_t self = coordsCode(mesh.listedCoords(axes, 0));
    par_rt_k_send(payload.addr(), count, PAR_I32, code, self, 4);
    par_rt_k_recv(got.addr(), count, PAR_I32, code, self, 4);
    check("send/recv to self axes=" + axesName(axes),
          compare(PAR_I32, got.read(), input(mesh.rank, count, 170, PAR_I32)));
  }

  /// par_rt_send_async returns before the peer receives: every process
  /// starts its send to the next, then receives from the previous (a ring
  /// that would need the even/odd order with blocking sends), then
  /// completes its sends. With tracing on, the receive is recorded.
  void sendAsync(const std::vector<int> &axes) {
    const int64_t count = 5;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size()), idx = mesh.index(axes);
    int64_t code = axesCode(axes);
    int64_t to = coordsCode(mesh.listedCoords(axes, (idx + 1) % n));
    int64_t from = coordsCode(mesh.listedCoords(axes, (idx + n - 1) % n));
    Buffer payload(input(mesh.rank, count, 7, PAR_F32));
    Buffer got(garbage(count, PAR_F32));
    par_rt_trace_enable(gContext, 1);
    std::string why;
    if (par_rt_send_async(gContext, (const void *)(intptr_t)payload.addr(),
                          count, PAR_F32, code, to, 21) != PAR_OK)
      why = std::string("send_async: ") + par_rt_context_last_error(gContext);
    par_rt_k_recv(got.addr(), count, PAR_F32, code, from, 21);
    if (why.empty() && par_rt_wait_sends(gContext) != PAR_OK)
      why = std::string("wait_sends: ") + par_rt_context_last_error(gContext);
    par_rt_trace_event_t ev[4];
    int64_t recorded = par_rt_trace_take(gContext, ev, 4);
    par_rt_trace_enable(gContext, 0);
    if (why.empty())
      why = compare(PAR_F32, got.read(),
                    input(m[size_t((idx + n - 1) % n)], count, 7, PAR_F32));
    if (why.empty() && (recorded != 1 || std::string(ev[0].kernel) != "recv" ||
                        ev[0].end < ev[0].start))
      why = "the trace recorded " + std::to_string(recorded) +
            " kernel(s), expected the one recv";
    check("send_async/trace axes=" + axesName(axes), why);
  }

  /// Tags select the message: received in the opposite order of sending.
  void tags(const std::vector<int> &axes) {
    const int64_t count = 3;
    std::vector<int64_t> m = mesh.members(axes);
    int64_t n = int64_t(m.size()), idx = mesh.index(axes);
    int64_t code = axesCode(axes);
    int64_t to = coordsCode(mesh.listedCoords(axes, (idx + 1) % n));
    int64_t from = coordsCode(mesh.listedCoords(axes, (idx + n - 1) % n));
    int64_t prevRank = m[size_t((idx + n - 1) % n)];
    Buffer a(input(mesh.rank, count, 1, PAR_I32));
    Buffer b(input(mesh.rank, count, 2, PAR_I32));
    Buffer ra(garbage(count, PAR_I32)), rb(garbage(count, PAR_I32));
    // Small messages: MPI sends them eagerly, so both sends complete first.
    par_rt_k_send(a.addr(), count, PAR_I32, code, to, 11);
    par_rt_k_send(b.addr(), count, PAR_I32, code, to, 12);
    par_rt_k_recv(rb.addr(), count, PAR_I32, code, from, 12);
    par_rt_k_recv(ra.addr(), count, PAR_I32, code, from, 11);
    std::string why = compare(PAR_I32, ra.read(), input(prevRank, count, 1, PAR_I32));
    if (why.empty())
      why = compare(PAR_I32, rb.read(), input(prevRank, count, 2, PAR_I32));
    check("send/recv tags axes=" + axesName(axes), why);
  }

  void matmul(int32_t dt, int64_t M, int64_t N, int64_t K, int acc) {
    int salt = 180 + dt * 2 + acc;
    Bytes a = input(mesh.rank, M * K, salt, dt);
    Bytes b = input(mesh.rank + 1, K * N, salt, dt);
    Bytes c0 = input(mesh.rank + 2, M * N, salt, dt);
    Buffer ba(a), bb(b), bc(acc ? c0 : garbage(M * N, dt));
    par_rt_k_matmul(ba.addr(), bb.addr(), bc.addr(), M, N, K, dt, acc);
    Bytes want(size_t(M * N * sizeOf(dt)));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = acc ? get(dt, c0, i * N + j) : 0;
        bool any = acc && s != 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = get(dt, a, i * K + k), y = get(dt, b, k * N + j);
          s += x * y;
          any = any || (x != 0 && y != 0);
        }
        if (dt == PAR_I1)
          s = any;
        else if (dt == PAR_I8) // two's complement wrap-around
          s = double(int8_t(uint8_t(int64_t(s) & 0xFF)));
        put(dt, want, i * N + j, s);
      }
    check(std::string("matmul ") + nameOf(dt) + " " + std::to_string(M) +
              "x" + std::to_string(N) + "x" + std::to_string(K) +
              (acc ? " accumulate" : ""),
          compare(dt, bc.read(), want));
  }

  /// The statistics follow par-comm-report's ring formulas.
  void stats() {
    std::vector<int> all;
    for (size_t a = 0; a < mesh.sizes.size(); ++a)
      all.push_back(int(a));
    int64_t code = axesCode(all);
    double n = double(mesh.groupSize(all)), ring = (n - 1) / n;
    par_rt_context_reset_stats(gContext);
    Buffer in(input(mesh.rank, 64 * int64_t(n), 1, PAR_F32));
    Buffer out(garbage(64 * int64_t(n), PAR_F32));
    double want = 0;
    int64_t calls = 0;
    par_rt_k_all_reduce(in.addr(), out.addr(), 10, PAR_F32, PAR_SUM, code);
    want += 2 * ring * 40, ++calls;
    par_rt_k_all_gather(in.addr(), out.addr(), 2, 3, PAR_F32, code);
    want += ring * (2 * n * 3 * 4), ++calls;
    par_rt_k_reduce_scatter(out.addr(), in.addr(), 2, 3, PAR_F32, PAR_SUM,
                            code);
    want += ring * (2 * n * 3 * 4), ++calls;
    par_rt_k_all_to_all(in.addr(), out.addr(), 2, 3, 3, 2, PAR_F32, code);
    want += ring * (6 * n * 4), ++calls;
    par_rt_k_broadcast(in.addr(), out.addr(), 7, PAR_F32, 0, code);
    want += n > 1 ? 28 : 0, ++calls;
    par_rt_k_all_slice(out.addr(), in.addr(), 2, 3, PAR_F32, code); // local
    if (n > 1) {
      // A ring along the whole mesh: every process sends 16 bytes.
      int64_t idx = mesh.index(all);
      int64_t to = coordsCode(mesh.listedCoords(all, (idx + 1) % int64_t(n)));
      int64_t from =
          coordsCode(mesh.listedCoords(all, (idx + int64_t(n) - 1) % int64_t(n)));
      if (all.size() <= 4) {
        if (idx % 2 == 0) {
          par_rt_k_send(in.addr(), 4, PAR_F32, code, to, 1);
          par_rt_k_recv(out.addr(), 4, PAR_F32, code, from, 1);
        } else {
          par_rt_k_recv(out.addr(), 4, PAR_F32, code, from, 1);
          par_rt_k_send(in.addr(), 4, PAR_F32, code, to, 1);
        }
        want += 16, calls += 2;
      }
    }
    par_rt_stats_t s;
    par_rt_context_stats(gContext, &s);
    char why[200];
    std::snprintf(why, sizeof(why),
                  "collectives %lld (want %lld), bytes %.3f (want %.3f), "
                  "seconds %g",
                  (long long)s.collectives, (long long)calls, s.bytes_sent,
                  want, s.seconds);
    check("stats ring-formula bytes n=" + std::to_string(int64_t(n)),
          s.collectives == calls &&
              std::fabs(s.bytes_sent - want) <= 1e-9 * std::max(1.0, want) &&
              s.seconds >= 0,
          why);
    par_rt_context_reset_stats(gContext);
    par_rt_context_stats(gContext, &s);
    check("stats reset", s.collectives == 0 && s.bytes_sent == 0 &&
                             s.seconds == 0);
  }

  /// The per-kernel statistics table: every name once, the count the same
  /// however it is asked.
  void kernelTable() {
    std::vector<par_rt_kernel_stats_t> recs = kernelRecords(gContext);
    std::string why;
    for (size_t i = 0; i < recs.size() && why.empty(); ++i) {
      if (!recs[i].kernel)
        why = "record " + std::to_string(i) + " has no name";
      for (size_t j = 0; j < i && why.empty(); ++j)
        if (std::string(recs[i].kernel) == recs[j].kernel)
          why = std::string("kernel ") + recs[i].kernel + " listed twice";
    }
    par_rt_kernel_stats_t one[1];
    if (why.empty() &&
        (recs.size() < 10 ||
         par_rt_context_kernel_stats(gContext, one, 1) !=
             int64_t(recs.size()) ||
         std::string(one[0].kernel) != recs[0].kernel ||
         par_rt_context_kernel_stats(nullptr, one, 1) != 0))
      why = "the count depends on the capacity, or a NULL context has "
            "records";
    for (const char *k : {"all_reduce", "bucket_all_reduce",
                          "all_reduce_start", "wait", "all_gather",
                          "all_gather_start",
                          "reduce_scatter", "all_to_all", "broadcast", "send",
                          "send_async", "recv"})
      if (why.empty() && !recordOf(recs, k).kernel)
        why = std::string("no record for ") + k;
    check("kernel stats: one record per kernel", why);
  }

  /// Per-kernel statistics over the whole mesh: the table (kernelTable),
  /// every communicating kernel (blocking and started buckets, sends
  /// started and blocking) against its ring formula, the records' sums
  /// against the totals, and the reset.
  void kernelStats() {
    std::vector<int> all;
    for (size_t a = 0; a < mesh.sizes.size(); ++a)
      all.push_back(int(a));
    int64_t code = axesCode(all);
    int64_t ni = mesh.groupSize(all), idx = mesh.index(all);
    double n = double(ni), ring = (n - 1) / n;
    kernelTable();

    par_rt_context_reset_stats(gContext);
    // Expected (calls, bytes) per kernel.
    std::vector<std::pair<std::string, std::pair<int64_t, double>>> want;
    auto expect = [&](const std::string &k, double bytes) {
      for (auto &w : want)
        if (w.first == k) {
          w.second.first += 1;
          w.second.second += bytes;
          return;
        }
      want.push_back({k, {1, bytes}});
    };
    Buffer in(input(mesh.rank, 64 * ni, 1, PAR_F32));
    Buffer out(garbage(64 * ni, PAR_F32));
    par_rt_k_all_reduce(in.addr(), out.addr(), 10, PAR_F32, PAR_SUM, code);
    expect("all_reduce", 2 * ring * 40);
    par_rt_k_all_reduce(in.addr(), out.addr(), 3, PAR_I8, PAR_MAX, code);
    expect("all_reduce", 2 * ring * 3);
    par_rt_k_all_gather(in.addr(), out.addr(), 1, 5, PAR_I8, code);
    expect("all_gather", ring * (n * 5));
    int64_t g = par_rt_k_all_gather_start(in.addr(), out.addr(), 2, 3,
                                          PAR_F32, code);
    par_rt_k_wait(g);
    expect("all_gather_start", ring * (n * 6 * 4));
    expect("wait", 0);
    par_rt_k_all_to_all(in.addr(), out.addr(), 1, 5, 1, 5, PAR_I8, code);
    expect("all_to_all", ring * (n * 5));
    par_rt_k_all_to_all(in.addr(), out.addr(), 1, 3, 1, 3, PAR_I32, code);
    expect("all_to_all", ring * (n * 3 * 4));
    par_rt_k_reduce_scatter(out.addr(), in.addr(), 2, 3, PAR_F32, PAR_SUM,
                            code);
    expect("reduce_scatter", ring * (2 * n * 3 * 4));
    par_rt_k_broadcast(in.addr(), out.addr(), 7, PAR_F32, 0, code);
    expect("broadcast", n > 1 ? 28 : 0);
    par_rt_k_all_slice(out.addr(), in.addr(), 2, 3, PAR_F32, code); // local
    BucketBuffers blocking(mesh.rank, 900, PAR_F32);
    par_rt_k_bucket_all_reduce(blocking.addr(), blocking.size(), PAR_F32,
                               PAR_SUM, code);
    expect("bucket_all_reduce", 2 * ring * double(blocking.total * 4));
    BucketBuffers started(mesh.rank, 950, PAR_I32);
    int64_t h = par_rt_k_all_reduce_start(started.addr(), started.size(),
                                          PAR_I32, PAR_SUM, code);
    par_rt_k_wait(h);
    expect("all_reduce_start", 2 * ring * double(started.total * 4));
    expect("wait", 0);
    if (ni > 1 && all.size() <= 4) {
      int64_t to = coordsCode(mesh.listedCoords(all, (idx + 1) % ni));
      int64_t from = coordsCode(mesh.listedCoords(all, (idx + ni - 1) % ni));
      if (idx % 2 == 0) {
        par_rt_k_send(in.addr(), 4, PAR_F32, code, to, 2);
        par_rt_k_recv(out.addr(), 4, PAR_F32, code, from, 2);
      } else {
        par_rt_k_recv(out.addr(), 4, PAR_F32, code, from, 2);
        par_rt_k_send(in.addr(), 4, PAR_F32, code, to, 2);
      }
      expect("send", 16);
      expect("recv", 0);
      if (!cuda) { // NCCL's started send is synchronous: no ring
        par_rt_send_async(gContext, (const void *)(intptr_t)in.addr(), 5,
                          PAR_F32, code, to, 22);
        par_rt_k_recv(out.addr(), 5, PAR_F32, code, from, 22);
        par_rt_wait_sends(gContext);
        expect("send_async", 20);
        expect("recv", 0);
      }
    }
    par_rt_stats_t s;
    par_rt_context_stats(gContext, &s);
    std::vector<par_rt_kernel_stats_t> recs = kernelRecords(gContext);
    std::string why;
    char text[240];
    int64_t calls = 0;
    double bytes = 0, seconds = 0;
    for (const par_rt_kernel_stats_t &r : recs) {
      std::string k = r.kernel;
      std::pair<int64_t, double> w{0, 0.0};
      for (auto &e : want)
        if (e.first == k)
          w = e.second;
      if (why.empty() &&
          (r.calls != w.first ||
           std::fabs(r.bytes_sent - w.second) >
               1e-9 * std::max(1.0, w.second) ||
           r.seconds < 0 || (r.calls == 0 && r.seconds != 0))) {
        std::snprintf(text, sizeof(text),
                      "%s: %lld calls, %.3f bytes, %g s; want %lld calls and "
                      "%.3f bytes",
                      k.c_str(), (long long)r.calls, r.bytes_sent, r.seconds,
                      (long long)w.first, w.second);
        why = text;
      }
      if (k != "wait" && k != "send_async")
        calls += r.calls;
      bytes += r.bytes_sent;
      seconds += r.seconds;
    }
    if (why.empty() &&
        (calls != s.collectives ||
         std::fabs(bytes - s.bytes_sent) > 1e-9 * std::max(1.0, bytes) ||
         std::fabs(seconds - s.seconds) > 1e-9 * std::max(1.0, seconds))) {
      std::snprintf(text, sizeof(text),
                    "the records sum to %lld calls, %.3f bytes, %g s; the "
                    "totals are %lld, %.3f, %g",
                    (long long)calls, bytes, seconds,
                    (long long)s.collectives, s.bytes_sent, s.seconds);
      why = text;
    }
    check("kernel stats: ring-formula bytes per kernel n=" +
              std::to_string(ni),
          why);

    par_rt_context_reset_stats(gContext);
    why.clear();
    std::vector<par_rt_kernel_stats_t> cleared = kernelRecords(gContext);
    for (size_t i = 0; i < cleared.size(); ++i)
      if (cleared[i].calls || cleared[i].bytes_sent || cleared[i].seconds ||
          std::string(cleared[i].kernel) != recs[i].kernel)
        why = std::string(cleared[i].kernel) + " survived the reset";
    check("kernel stats reset", why);
  }
};

//===----------------------------------------------------------------------===//
// Host API and conversion checks
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// memrefCopy (MLIR's strided copy, provided by the runtime)
//===----------------------------------------------------------------------===//

/// A ranked memref descriptor of rank <= 4: sizes in dims[0..r), strides in
/// dims[r..2r), as MLIR lays it out.
struct Descriptor {
  void *allocated, *aligned;
  int64_t offset;
  int64_t dims[8];
};

struct StridedView {
  int64_t offset;
  std::vector<int64_t> strides;
};

/// Copies `sizes` elements (int32) from a buffer of `srcLen` elements with
/// view `src` into one of `dstLen` with view `dst` through memrefCopy, and
/// checks every destination element against an element-wise reference
/// (untouched elements must keep their garbage).
void memrefCopyCheck(const std::string &name,
                     const std::vector<int64_t> &sizes, const StridedView &src,
                     int64_t srcLen, const StridedView &dst, int64_t dstLen) {
  std::vector<int32_t> in(static_cast<size_t>(srcLen)),
      out(static_cast<size_t>(dstLen), -7),
      want(size_t(dstLen), -7);
  for (int64_t i = 0; i < srcLen; ++i)
    in[size_t(i)] = int32_t(100 + i);
  int64_t rank = int64_t(sizes.size()), total = 1;
  Descriptor ds = {in.data(), in.data(), src.offset, {}};
  Descriptor dd = {out.data(), out.data(), dst.offset, {}};
  for (int64_t k = 0; k < rank; ++k) {
    ds.dims[k] = dd.dims[k] = sizes[size_t(k)];
    ds.dims[rank + k] = src.strides[size_t(k)];
    dd.dims[rank + k] = dst.strides[size_t(k)];
    total *= sizes[size_t(k)];
  }
  for (int64_t e = 0; e < total; ++e) {
    int64_t rest = e, so = src.offset, d = dst.offset;
    for (int64_t k = rank; k-- > 0;) {
      int64_t i = rest % sizes[size_t(k)];
      rest /= sizes[size_t(k)];
      so += i * src.strides[size_t(k)];
      d += i * dst.strides[size_t(k)];
    }
    want[size_t(d)] = in[size_t(so)];
  }
  par_rt_unranked_memref_t us = {rank, &ds}, ud = {rank, &dd};
  memrefCopy(sizeof(int32_t), &us, &ud);
  check("memrefCopy " + name, out == want);
}

void memrefCopyChecks() {
  // A transpose: row-major [3][4] into a column-major [3][4].
  memrefCopyCheck("rank 2 transposed", {3, 4}, {0, {4, 1}}, 12, {0, {1, 3}},
                  12);
  // A window of a [2][5][2] buffer: the inner two dimensions collapse.
  memrefCopyCheck("rank 3 window", {2, 3, 2}, {2, {10, 2, 1}}, 20,
                  {0, {6, 2, 1}}, 12);
  // Every other element, into a padded destination.
  memrefCopyCheck("rank 2 strided both", {2, 3}, {1, {8, 2}}, 16,
                  {3, {5, 1}}, 13);
  memrefCopyCheck("rank 1 reversed", {5}, {4, {-1}}, 5, {0, {1}}, 5);
  memrefCopyCheck("rank 4 size-1 dims", {1, 2, 1, 3}, {0, {99, 3, 7, 1}}, 6,
                  {1, {0, 1, 5, 2}}, 7);
  memrefCopyCheck("rank 0", {}, {3, {}}, 4, {1, {}}, 2);
  memrefCopyCheck("empty", {2, 0, 3}, {0, {0, 3, 1}}, 1, {0, {0, 3, 1}}, 1);
}

void conversionChecks() {
  struct Case {
    float in;
    uint16_t half, bf16;
  };
  const float sub24 = std::ldexp(1.0f, -24), sub25 = std::ldexp(1.0f, -25);
  const Case cases[] = {
      {1.0f, 0x3C00, 0x3F80},
      {-2.0f, 0xC000, 0xC000},
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {65504.0f, 0x7BFF, 0x4780},
      {65519.0f, 0x7BFF, 0x4780},                 // below the half tie
      {65520.0f, 0x7C00, 0x4780},                 // half: tie -> inf
      {1.0f + std::ldexp(1.0f, -11), 0x3C00, 0x3F80}, // half tie -> even
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3C02, 0x3F80},
      {bitsToFloat(0x3F808000), 0x3C04, 0x3F80}, // bf16 tie -> even (down)
      {bitsToFloat(0x3F818000), 0x3C0C, 0x3F82}, // bf16 tie -> even (up)
      {bitsToFloat(0x3F808001), 0x3C04, 0x3F81}, // above the tie
      {sub24, 0x0001, 0x3380},                    // smallest half subnormal
      {sub25, 0x0000, 0x3300},                    // tie with 0 -> 0
      {1.5f * sub25, 0x0001, 0x3340},
      {std::ldexp(1.0f, -14), 0x0400, 0x3880}, // smallest normal half
      {std::ldexp(1023.5f, -24), 0x0400, 0x3880}, // rounds up into normal
      {bitsToFloat(0x7F7FFFFF), 0x7C00, 0x7F80},  // FLT_MAX: inf in both
      {INFINITY, 0x7C00, 0x7F80},
      {-INFINITY, 0xFC00, 0xFF80},
  };
  std::string why;
  for (const Case &c : cases) {
    uint16_t h = floatToHalf(c.in), b = floatToBf16(c.in);
    if (h != c.half || b != c.bf16) {
      char text[128];
      std::snprintf(text, sizeof(text),
                    "%a: half 0x%04x (want 0x%04x), bf16 0x%04x (want 0x%04x)",
                    double(c.in), h, c.half, b, c.bf16);
      why = text;
      break;
    }
  }
  check("conversions f32 -> f16/bf16 round to nearest even", why);

  // Every non-NaN 16-bit pattern survives widening and rounding back.
  why.clear();
  for (uint32_t x = 0; x < 0x10000 && why.empty(); ++x) {
    uint16_t v = uint16_t(x);
    bool halfNan = (v & 0x7C00) == 0x7C00 && (v & 0x3FF);
    bool bfNan = (v & 0x7F80) == 0x7F80 && (v & 0x7F);
    if (!halfNan && floatToHalf(halfToFloat(v)) != v)
      why = "half 0x" + std::to_string(x) + " does not round-trip";
    if (!bfNan && floatToBf16(bf16ToFloat(v)) != v)
      why = "bf16 0x" + std::to_string(x) + " does not round-trip";
  }
  check("conversions f16/bf16 round-trip exhaustively", why);
  check("conversions NaN stays NaN",
        std::isnan(halfToFloat(floatToHalf(NAN))) &&
            std::isnan(bf16ToFloat(floatToBf16(NAN))) &&
            halfToFloat(0x0001) == std::ldexp(1.0f, -24) &&
            halfToFloat(0x7BFF) == 65504.0f);
}

void hostChecks(par_rt_context_t *ctx, const Mesh &mesh) {
  int64_t world = par_rt_context_world_size(ctx);
  int64_t rank = par_rt_context_rank(ctx);

  // A mesh that does not fit the world is refused, with the message.
  int64_t wrong[2] = {world + 1, 2};
  par_status_t st = par_rt_context_set_mesh(ctx, 1, wrong);
  std::string msg = par_rt_context_last_error(ctx);
  std::string want = "world size " + std::to_string(world) +
                     " does not match the mesh's " +
                     std::to_string(world + 1) + " devices";
  check("set_mesh world-size mismatch [" + std::to_string(world + 1) + "]",
        st == PAR_ERR_INVALID_ARGUMENT && msg == want, "got '" + msg + "'");
  int64_t wrong2[2] = {world, 2};
  st = par_rt_context_set_mesh(ctx, 2, wrong2);
  msg = par_rt_context_last_error(ctx);
  want = "world size " + std::to_string(world) + " does not match the mesh's " +
         std::to_string(2 * world) + " devices";
  check("set_mesh world-size mismatch 2 axes",
        st == PAR_ERR_INVALID_ARGUMENT && msg == want, "got '" + msg + "'");
  int64_t zero[1] = {0};
  check("set_mesh rejects a zero-size axis",
        par_rt_context_set_mesh(ctx, 1, zero) == PAR_ERR_INVALID_ARGUMENT);

  st = par_rt_context_set_mesh(ctx, int64_t(mesh.sizes.size()),
                               mesh.sizes.data());
  check("set_mesh " + std::to_string(mesh.sizes.size()) + " axes", st == PAR_OK,
        par_rt_context_last_error(ctx));
  std::vector<int64_t> coords;
  for (size_t a = 0; a < mesh.sizes.size(); ++a)
    coords.push_back(par_rt_context_coordinate(ctx, int64_t(a)));
  check("rank and coordinates are row-major",
        mesh.rankOf(coords) == rank && coords == mesh.coordsOf(rank) &&
            par_rt_context_coordinate(ctx, -1) == -1 &&
            par_rt_context_coordinate(ctx, int64_t(mesh.sizes.size())) == -1);

  check("barrier", par_rt_barrier(ctx) == PAR_OK);
  double t0 = par_rt_now_seconds(), t1 = par_rt_now_seconds();
  check("now_seconds is monotonic", t1 >= t0 && t0 > 0);

  // broadcast_world from the last rank.
  Bytes buf(1000);
  for (size_t i = 0; i < buf.size(); ++i)
    buf[i] = rank == world - 1 ? uint8_t(i * 7 + 3) : 0;
  st = par_rt_broadcast_world(ctx, buf.data(), int64_t(buf.size()), world - 1);
  bool ok = st == PAR_OK;
  for (size_t i = 0; i < buf.size(); ++i)
    ok = ok && buf[i] == uint8_t(i * 7 + 3);
  check("broadcast_world root=" + std::to_string(world - 1), ok);

  // gather_world: rank r contributes 24 bytes of r-dependent data.
  Bytes local(24), all(rank == 0 ? 24 * size_t(world) : 0);
  for (size_t i = 0; i < local.size(); ++i)
    local[i] = uint8_t(rank * 31 + int64_t(i));
  st = par_rt_gather_world(ctx, local.data(), 24, rank == 0 ? all.data() : nullptr);
  ok = st == PAR_OK;
  if (rank == 0)
    for (int64_t r = 0; r < world; ++r)
      for (size_t i = 0; i < 24; ++i)
        ok = ok && all[size_t(r) * 24 + i] == uint8_t(r * 31 + int64_t(i));
  check("gather_world", ok);
}

/// Gathers every process's results on rank 0, prints them, and returns the
/// number of failed checks (on every process).
int64_t report(par_rt_context_t *ctx, int64_t world, int64_t rank) {
  // Processes should have run the same checks; pad to the longest list so
  // that a mismatch shows up as failures instead of a corrupt gather.
  int64_t mine = int64_t(gOk.size()), most = 0;
  std::vector<int64_t> counts(static_cast<size_t>(world));
  par_rt_gather_world(ctx, &mine, sizeof(mine), counts.data());
  if (rank == 0)
    most = *std::max_element(counts.begin(), counts.end());
  par_rt_broadcast_world(ctx, &most, sizeof(most), 0);
  Bytes flags = gOk;
  flags.resize(size_t(most), 0);
  Bytes all(rank == 0 ? size_t(most * world) : 0);
  par_rt_gather_world(ctx, flags.data(), most, all.data());

  int64_t failed = 0, passed = 0;
  if (rank == 0) {
    for (int64_t i = 0; i < most; ++i) {
      std::string ranks;
      for (int64_t r = 0; r < world; ++r)
        if (!all[size_t(r * most + i)])
          ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      std::string name =
          i < int64_t(gNames.size()) ? gNames[size_t(i)] : "(missing check)";
      if (ranks.empty()) {
        std::printf("PASS %s\n", name.c_str());
        ++passed;
      } else {
        std::printf("FAIL %s (ranks %s)\n", name.c_str(), ranks.c_str());
        ++failed;
      }
    }
    for (int64_t r = 0; r < world; ++r)
      if (counts[size_t(r)] != mine) {
        std::printf("FAIL rank %lld ran %lld checks, rank 0 ran %lld\n",
                    (long long)r, (long long)counts[size_t(r)],
                    (long long)mine);
        ++failed;
      }
    std::printf("%lld passed, %lld failed\n", (long long)passed,
                (long long)failed);
    std::fflush(stdout);
  }
  par_rt_broadcast_world(ctx, &failed, sizeof(failed), 0);
  return failed;
}

void abortTest(const std::string &kind, int64_t rank, int64_t world) {
  Buffer buf(Bytes(64, 0));
  if (kind == "dtype")
    par_rt_k_all_reduce(buf.addr(), buf.addr(), 4, 99, PAR_SUM, 1);
  else if (kind == "axes")
    par_rt_k_all_gather(buf.addr(), buf.addr(), 1, 1, PAR_F32,
                        0x0501); // axes 0 and 4
  else if (kind == "one-rank") {
    // Only the last rank fails; the others wait in a barrier that can never
    // complete. MPI_Abort must still end everyone.
    if (rank == world - 1)
      par_rt_k_broadcast(buf.addr(), buf.addr(), 4, PAR_F32, 99, 1);
    else
      par_rt_barrier(gContext);
  } else if (kind == "wait") {
    par_rt_k_wait(12345); // never started
  } else {
    usage(("unknown abort test " + kind).c_str());
  }
  std::printf("UNREACHABLE: the kernel returned\n");
}

/// Tries a CUDA context (gContext on success) and checks that it fails or
/// works as this machine allows. Returns whether kernels run on the device.
bool cudaContext(const Options &opts, int &argc, char **&argv) {
  par_rt_options_t o;
  par_rt_options_initialize(&o);
  o.backend = PAR_BACKEND_CUDA;
  o.world = opts.world;
  par_status_t st = par_rt_context_create(&o, &argc, &argv, &gContext);
  std::string msg = par_rt_context_last_error(nullptr);
  if (!msg.empty() && rankHint() == 0)
    std::printf("par-runtime-test: cuda context_create: %s\n", msg.c_str());
  int gpus = gpuCount();
  const std::string notBuilt =
      "CUDA backend not built (libpar_runtime_cuda.so not found)";
  if (opts.expectNotBuilt || !PAR_RUNTIME_TEST_HAVE_CUDA_BACKEND) {
    check("cuda backend: not built",
          st == PAR_ERR_UNAVAILABLE && msg == notBuilt,
          "status " + std::to_string(st) + ", '" + msg + "'");
  } else if (gpus == 0) {
    const std::string prefix = "CUDA backend: no GPU or driver available: ";
    check("cuda backend: unavailable without a GPU",
          st == PAR_ERR_UNAVAILABLE && msg.rfind(prefix, 0) == 0 &&
              msg.size() > prefix.size(),
          "status " + std::to_string(st) + ", '" + msg + "'");
  } else if (gpus < worldSizeHint()) {
    // Processes would share a GPU (single node assumed), which NCCL
    // refuses: every process must see the failure, none may hang.
    check("cuda backend: fails with more processes than GPUs",
          st != PAR_OK && !msg.empty(), "status " + std::to_string(st));
  } else {
    check("cuda backend: available with a GPU", st == PAR_OK,
          "status " + std::to_string(st) + ", '" + msg + "'");
  }
  if (st != PAR_OK)
    return false;
  check("cuda: device memory through libcudart", gCudart.load());
  gDevice = gCudart.loaded;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  Options opts = parseOptions(argc, argv);
  std::signal(SIGALRM, onAlarm);
  alarm(opts.timeout);
  setvbuf(stdout, nullptr, _IOLBF, 0);

  // Before any context: a NULL out pointer is refused, and says so.
  check("context_create rejects a NULL out_context",
        par_rt_context_create(nullptr, &argc, &argv, nullptr) ==
                PAR_ERR_INVALID_ARGUMENT &&
            std::string(par_rt_context_last_error(nullptr)) ==
                "out_context is NULL");

  check("api version", par_rt_api_version() == PAR_RT_API_VERSION,
        "library " + std::to_string(par_rt_api_version()) + ", header " +
            std::to_string(PAR_RT_API_VERSION));

  if (opts.abortTest == "no-mesh") {
    par_rt_options_t o;
    par_rt_options_initialize(&o);
    o.world = opts.world;
    par_rt_context_create(&o, &argc, &argv, &gContext);
    float x = 0;
    par_rt_k_all_reduce(int64_t(reinterpret_cast<intptr_t>(&x)),
                        int64_t(reinterpret_cast<intptr_t>(&x)), 1, PAR_F32,
                        PAR_SUM, 0);
    std::printf("UNREACHABLE: the kernel returned\n");
    return 0;
  }

  bool onDevice =
      opts.backend == PAR_BACKEND_CUDA && cudaContext(opts, argc, argv);
  if (!gContext) {
    // The CPU backend, also as the fallback after a CUDA failure: MPI stays
    // initialized across a failed create.
    par_rt_options_t o;
    par_rt_options_initialize(&o);
    o.world = opts.world;
    par_status_t st = par_rt_context_create(&o, &argc, &argv, &gContext);
    if (st != PAR_OK) {
      std::fprintf(stderr, "par-runtime-test: context_create: status %d: %s\n",
                   int(st), par_rt_context_last_error(nullptr));
      return 1;
    }
    check("context_create clears the create error",
          std::string(par_rt_context_last_error(nullptr)).empty());
  }

  int64_t rank = par_rt_context_rank(gContext);
  int64_t world = par_rt_context_world_size(gContext);
  gRank = int(rank);
  Mesh mesh;
  mesh.sizes = opts.mesh.empty() ? std::vector<int64_t>{world} : opts.mesh;
  mesh.rank = rank;
  if (rank == 0) {
    std::string shape;
    for (int64_t s : mesh.sizes)
      shape += (shape.empty() ? "" : ",") + std::to_string(s);
    std::printf("par-runtime-test: world %lld, mesh [%s], backend %s\n",
                (long long)world, shape.c_str(), onDevice ? "cuda" : "cpu");
  }

  int64_t product = 1;
  for (int64_t s : mesh.sizes)
    product *= s;
  if (product != world) {
    // The mesh does not fit: nothing else can run. Show the runtime's
    // message, report and stop.
    par_status_t st = par_rt_context_set_mesh(
        gContext, int64_t(mesh.sizes.size()), mesh.sizes.data());
    if (rank == 0)
      std::printf("par-runtime-test: set_mesh: status %d: %s\n", int(st),
                  par_rt_context_last_error(gContext));
    check("--mesh matches the number of processes", false,
          "mesh has " + std::to_string(product) + " devices, world " +
              std::to_string(world));
    int64_t failed = report(gContext, world, rank);
    par_rt_context_destroy(gContext);
    return failed ? 1 : 0;
  }
  if (opts.expectNoMpi)
    check("local world: no MPI library loaded", !mpiLoaded());
  hostChecks(gContext, mesh);

  if (!opts.abortTest.empty()) {
    abortTest(opts.abortTest, rank, world);
    return 0;
  }
  if (opts.hang >= 0) {
    if (rank == opts.hang)
      for (;;)
        pause(); // until the watchdog fires
    par_rt_barrier(gContext);
  }

  conversionChecks();
  memrefCopyChecks();
  Tester(mesh, onDevice).run();
  if (opts.injectFailure >= 0)
    check("injected failure", rank != opts.injectFailure,
          "--inject-failure " + std::to_string(opts.injectFailure));

  int64_t failed = report(gContext, world, rank);
  par_rt_context_destroy(gContext);
  return failed ? 1 : 0;
}
