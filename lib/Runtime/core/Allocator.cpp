//===- Allocator.cpp - the buffer pool of compiled CPU programs -----------===//
//
// par-lower-cpu lowers memref.alloc/dealloc to MLIR's generic allocation
// functions (finalize-memref-to-llvm use-generic-functions), defined here:
// a cache of freed blocks by size class, so that a train step's
// intermediates reuse the blocks the previous step freed (no malloc, no
// mmap and page faults per intermediate in the steady state). See
// docs/RationaleRuntime.md, "Memory plan".
//
// Block layout: [kAlign bytes: header at the end][user bytes]. The header
// (magic, class) sits right before the user pointer; a pointer without the
// magic (a plain malloc'd buffer) is released with free().
//
//===----------------------------------------------------------------------===//

#include "Context.h"
#include "par/Runtime/par_runtime.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unistd.h>
#include <vector>

namespace {

constexpr size_t kAlign = 64;           // header size and block alignment
constexpr uint64_t kMagic = 0x7061726c6f6f70ULL; // "parpool"
constexpr uint64_t kFreed = 0x70617266726565ULL; // "parfree": cached
constexpr int kSubClasses = 4;          // per power of two: <= 25% waste
constexpr int kClasses = 64 * kSubClasses;

struct Header {
  uint64_t magic;
  uint64_t cls;
  uint64_t bytes; // as asked
};

/// What programs hold (asked bytes of pool blocks plus reservations), its
/// high-water mark and the limit (docs/RationaleMemory.md).
struct Tracker {
  std::atomic<int64_t> live{0}, peak{0}, limit{0};
  std::atomic<par_rt_out_of_memory_fn> handler{nullptr};
  std::atomic<void *> user{nullptr};
  std::atomic<const char *> scope{nullptr};

  /// Counts `bytes`; false (nothing counted) past the limit.
  bool take(int64_t bytes) {
    int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t cap = limit.load(std::memory_order_relaxed);
    if (cap > 0 && now > cap) {
      live.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen &&
           !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed))
      ;
    return true;
  }
  void give(int64_t bytes) { live.fetch_sub(bytes, std::memory_order_relaxed); }

  /// An allocation of `bytes` was refused: the handler, else a message;
  /// the process ends either way (a program cannot take a null buffer).
  [[noreturn]] void outOfMemory(int64_t bytes) {
    int64_t now = live.load(), cap = limit.load();
    if (par_rt_out_of_memory_fn h = handler.load())
      h(bytes, now, cap, user.load());
    const char *fn = scope.load();
    fprintf(stderr,
            "par runtime: out of memory%s%s%s: allocating %lld bytes with "
            "%lld of the %lld-byte limit in use\n",
            fn ? " in '" : "", fn ? fn : "", fn ? "'" : "", (long long)bytes,
            (long long)now, (long long)cap);
    fflush(stderr);
    _exit(1);
  }
};

Tracker &tracker() {
  static Tracker *t = new Tracker();
  return *t;
}

/// Size class of `bytes`: the smallest of 2^k, 1.25 2^k, 1.5 2^k,
/// 1.75 2^k (k >= 6) that holds it.
int classOf(size_t bytes, size_t &classBytes) {
  if (bytes < kAlign)
    bytes = kAlign;
  int k = 63 - __builtin_clzll(bytes);
  size_t base = size_t(1) << k;
  if (base == bytes) {
    classBytes = base;
    return k * kSubClasses;
  }
  size_t step = base / kSubClasses;
  size_t sub = (bytes - base + step - 1) / step; // 1..4
  classBytes = base + sub * step;
  if (sub == kSubClasses)
    return (k + 1) * kSubClasses;
  return k * kSubClasses + int(sub);
}

size_t bytesOfClass(int cls) {
  int k = cls / kSubClasses, sub = cls % kSubClasses;
  size_t base = size_t(1) << k;
  return base + sub * (base / kSubClasses);
}

struct Pool {
  std::mutex mutex;
  std::vector<void *> free[kClasses]; // raw block pointers
  int64_t cachedBytes = 0;
  int64_t limit;
  std::atomic<int64_t> systemAllocs{0}, poolHits{0}, frees{0}, liveBytes{0};

  Pool() {
    const char *env = getenv("PAR_RT_POOL_LIMIT");
    char *end = nullptr;
    long long v = env && *env ? strtoll(env, &end, 10) : -1;
    limit = (end && *end == 0 && v >= 0) ? v : (int64_t(8) << 30);
  }

  void *allocate(size_t bytes) {
    if (!tracker().take(int64_t(bytes)))
      tracker().outOfMemory(int64_t(bytes));
    size_t classBytes;
    int cls = classOf(bytes, classBytes);
    void *raw = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!free[cls].empty()) {
        raw = free[cls].back();
        free[cls].pop_back();
        cachedBytes -= classBytes;
      }
    }
    if (raw) {
      poolHits.fetch_add(1, std::memory_order_relaxed);
    } else {
      if (posix_memalign(&raw, kAlign, kAlign + classBytes) != 0) {
        tracker().give(int64_t(bytes));
        return nullptr;
      }
      systemAllocs.fetch_add(1, std::memory_order_relaxed);
    }
    liveBytes.fetch_add(classBytes, std::memory_order_relaxed);
    char *user = static_cast<char *>(raw) + kAlign;
    Header h{kMagic, uint64_t(cls), uint64_t(bytes)};
    memcpy(user - sizeof(Header), &h, sizeof(Header));
    return user;
  }

  void release(void *ptr) {
    if (!ptr)
      return;
    char *user = static_cast<char *>(ptr);
    Header h;
    memcpy(&h, user - sizeof(Header), sizeof(Header));
    if (h.magic == kFreed && h.cls < uint64_t(kClasses)) {
      // A second release of a cached block would put it on the list twice
      // (and hand one block to two buffers): name it and stop.
      fprintf(stderr, "par runtime: buffer %p freed twice\n", ptr);
      abort();
    }
    if (h.magic != kMagic || h.cls >= uint64_t(kClasses)) {
      ::free(ptr); // not a pool block
      return;
    }
    int cls = int(h.cls);
    size_t classBytes = bytesOfClass(cls);
    h.magic = kFreed;
    memcpy(user - sizeof(Header), &h, sizeof(Header));
    void *raw = user - kAlign;
    frees.fetch_add(1, std::memory_order_relaxed);
    tracker().give(int64_t(h.bytes));
    liveBytes.fetch_sub(classBytes, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (cachedBytes + int64_t(classBytes) <= limit) {
        free[cls].push_back(raw);
        cachedBytes += classBytes;
        return;
      }
    }
    ::free(raw);
  }
};

Pool &pool() {
  // Never destroyed: programs may free buffers during static destruction.
  static Pool *p = new Pool();
  return *p;
}

} // namespace

PAR_RT_EXPORT void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return pool().allocate(bytes);
}

PAR_RT_EXPORT void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  // Every block is kAlign-aligned; a larger alignment (never asked by
  // par's bufferization, whose buffers are 64-byte aligned) comes from the
  // system (its release finds no header and frees it).
  if (alignment <= kAlign)
    return pool().allocate(bytes);
  void *p = nullptr;
  return posix_memalign(&p, alignment, bytes ? bytes : 1) == 0 ? p : nullptr;
}

PAR_RT_EXPORT void _mlir_memref_to_llvm_free(void *ptr) { pool().release(ptr); }

PAR_RT_EXPORT void par_rt_free(void *buffer) { pool().release(buffer); }

PAR_RT_EXPORT int64_t par_rt_alloc_bytes(const void *buffer) {
  if (!buffer)
    return -1;
  Header h;
  memcpy(&h, static_cast<const char *>(buffer) - sizeof(Header),
         sizeof(Header));
  return h.magic == kMagic && h.cls < uint64_t(kClasses) ? int64_t(h.bytes)
                                                          : -1;
}

PAR_RT_EXPORT void par_rt_alloc_stats(par_rt_alloc_stats_t *out) {
  if (!out)
    return;
  Pool &p = pool();
  out->system_allocs = p.systemAllocs.load();
  out->pool_hits = p.poolHits.load();
  out->frees = p.frees.load();
  out->live_bytes = p.liveBytes.load();
  std::lock_guard<std::mutex> lock(p.mutex);
  out->cached_bytes = p.cachedBytes;
}


PAR_RT_EXPORT void par_rt_memory_stats(par_rt_memory_stats_t *out) {
  if (!out)
    return;
  Tracker &t = tracker();
  out->live_bytes = t.live.load();
  out->peak_bytes = t.peak.load();
  out->limit_bytes = t.limit.load();
}

PAR_RT_EXPORT void par_rt_memory_reset_peak(void) {
  Tracker &t = tracker();
  t.peak.store(t.live.load());
}

PAR_RT_EXPORT void par_rt_memory_set_limit(int64_t limit_bytes,
                                           par_rt_out_of_memory_fn handler,
                                           void *user) {
  Tracker &t = tracker();
  t.handler.store(handler);
  t.user.store(user);
  t.limit.store(limit_bytes > 0 ? limit_bytes : 0);
}

PAR_RT_EXPORT int par_rt_memory_reserve(int64_t bytes) {
  return tracker().take(bytes) ? 0 : -1;
}

PAR_RT_EXPORT void par_rt_memory_release(int64_t bytes) {
  tracker().give(bytes);
}

PAR_RT_EXPORT void par_rt_memory_set_scope(const char *function_name) {
  tracker().scope.store(function_name);
}

PAR_RT_EXPORT const char *par_rt_memory_scope(void) {
  return tracker().scope.load();
}
