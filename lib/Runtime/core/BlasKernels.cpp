//===- BlasKernels.cpp - Which OpenBLAS kernel set the GEMMs run on -------===//
//
// par's CPU matmuls are OpenBLAS's (Debian's libopenblas0, a DYNAMIC_ARCH
// build: every x86-64 kernel set is in the library and one is picked by
// the CPU at load time). OpenBLAS 0.3.21 picks from a table of CPU models;
// a CPU newer than the table (AMD Zen 4/5, recent Intel parts) falls back
// to an older set: Haswell (AVX2) or even Prescott (SSE3), 2-8x slower
// than the AVX-512 kernels the CPU runs (docs/RationaleCPUKernels.md,
// "BLAS"). The choice here goes by the CPU's features instead of its model
// name: AVX-512 F/CD/DQ/BW/VL with the OS saving ZMM state -> SkylakeX,
// plus AVX512_BF16 -> Cooperlake; AVX2 + FMA -> Haswell. It only ever
// upgrades: a set as strong as that is kept, whether OpenBLAS picked it or
// OPENBLAS_CORETYPE named it; a weaker OPENBLAS_CORETYPE (machines set it
// for other programs: these ones say Haswell) is overridden, and the report
// says so. PAR_BLAS_CORETYPE forces a set.
//
// The switch is OpenBLAS's own: gotoblas_dynamic_quit() and
// gotoblas_dynamic_init() with OPENBLAS_CORETYPE set, which is what the
// library's load-time constructor runs; it happens in this library's
// constructor, before any GEMM (OpenBLAS allocates its buffers on the first
// call), and the variable stays set so that processes started from this
// one (mpirun's ranks) load the same set directly.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/par_runtime.h"

#include "Context.h"

#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <omp.h>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace {

// A plain array: this library's constructor may run before the static
// constructors of its own globals.
char description[512];

void describe(const std::string &text) {
  snprintf(description, sizeof(description), "%s", text.c_str());
}

/// How strong an OpenBLAS x86-64 kernel set is for sgemm/dgemm: 0 for the
/// SSE-era sets, 1 AVX2 (Haswell's; OpenBLAS's Zen sets are the same
/// kernels), 2 AVX-512 (SkylakeX), 3 AVX-512 with BF16 (Cooperlake and
/// Sapphire Rapids).
int strength(const std::string &core) {
  std::string c;
  for (char ch : core)
    c += char(tolower((unsigned char)ch));
  if (c == "cooperlake" || c == "sapphirerapids")
    return 3;
  if (c == "skylakex")
    return 2;
  if (c == "haswell" || c == "zen" || c == "excavator")
    return 1;
  return 0;
}

/// The strongest set this CPU runs, and why, from CPUID; "" when none
/// beyond the SSE-era sets applies (or not x86-64).
std::string bestForCpu(std::string &why) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return "";
  bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx)
    return "";
  unsigned xlo, xhi;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  bool ymmState = (xlo & 0x6) == 0x6;   // XMM and YMM
  bool zmmState = (xlo & 0xe6) == 0xe6; // plus opmask, ZMM_Hi256, Hi16_ZMM
  if (__get_cpuid_max(0, nullptr) < 7)
    return "";
  __cpuid_count(7, 0, a, b, c, d);
  bool avx2 = b & (1u << 5);
  bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 28)) &&
                (b & (1u << 30)) && (b & (1u << 31)); // F DQ CD BW VL
  unsigned a1 = 0, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  bool bf16 = a1 & (1u << 5);
  if (avx512 && zmmState) {
    why = bf16 ? "AVX-512 with BF16" : "AVX-512";
    return bf16 ? "Cooperlake" : "SkylakeX";
  }
  if (avx2 && fma && ymmState) {
    why = "AVX2 and FMA";
    return "Haswell";
  }
#else
  (void)why;
#endif
  return "";
}

using CorenameFn = char *(*)();
using VoidFn = void (*)();

std::string corename() {
  auto fn = (CorenameFn)dlsym(RTLD_DEFAULT, "openblas_get_corename");
  return fn ? std::string(fn()) : std::string();
}

std::string version() {
  auto fn = (CorenameFn)dlsym(RTLD_DEFAULT, "openblas_get_config");
  if (!fn)
    return "OpenBLAS";
  std::string config = fn(); // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  size_t sp = config.find(' ', config.find(' ') + 1);
  return config.substr(0, sp);
}

/// Makes `core` OpenBLAS's kernel set (as its load-time constructor would
/// with OPENBLAS_CORETYPE=core); returns the set now in use.
std::string switchTo(const std::string &core) {
  auto quit = (VoidFn)dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
  auto init = (VoidFn)dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
  if (!quit || !init)
    return corename();
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  quit();
  init();
  return corename();
}

__attribute__((constructor)) void selectBlasKernels() {
  // par splits its GEMMs over the rank's OpenMP threads (HostKernels.cpp):
  // OpenBLAS's own pool would compete with them for the cores.
  using SetFn = void (*)(int);
  if (auto set = (SetFn)dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))
    set(1);
  std::string loaded = corename();
  if (loaded.empty()) {
    describe("a BLAS without OpenBLAS's kernel sets");
    return;
  }
  std::string lib = version();
  // A set forced for par (tests, comparisons).
  if (const char *forced = getenv("PAR_BLAS_CORETYPE"); forced && *forced) {
    std::string now = switchTo(forced);
    describe(lib + ", " + now + " kernels (PAR_BLAS_CORETYPE=" + forced + ")");
    return;
  }
  // What picked the loaded set: OPENBLAS_CORETYPE (often set machine-wide
  // for other programs) or OpenBLAS's table of CPU models.
  const char *env = getenv("OPENBLAS_CORETYPE");
  std::string picker = env && *env ? "OPENBLAS_CORETYPE=" + std::string(env)
                                   : "OpenBLAS's choice";
  std::string why;
  std::string best = bestForCpu(why);
  if (best.empty() || strength(best) <= strength(loaded)) {
    describe(lib + ", " + loaded + " kernels (" + picker + ")");
    return;
  }
  std::string now = switchTo(best);
  std::string instead = env && *env ? "instead of " + picker
                                    : "OpenBLAS had picked " + loaded;
  describe(lib + ", " + now + " kernels (par's choice: the CPU has " + why +
           "; " + instead + "; PAR_BLAS_CORETYPE forces a set)");
}

} // namespace

PAR_RT_EXPORT const char *par_rt_blas_kernels(void) { return description; }

PAR_RT_EXPORT void par_rt_set_threads(int threads) {
  if (threads >= 1)
    omp_set_num_threads(threads);
}

PAR_RT_EXPORT int par_rt_threads(void) { return omp_get_max_threads(); }
