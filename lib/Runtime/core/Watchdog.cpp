//===- Watchdog.cpp - Ending a job whose collective never completes -------===//
//
// See Watchdog.h for the design. The shared table lives in a POSIX
// shared-memory object ("/par-rt-<pid>-<n>", created by rank 0 and unlinked
// as soon as every rank has it mapped, so a killed job leaves nothing in
// /dev/shm); a rank that cannot map it keeps a private slot and reports
// the others as unknown. The thread reads only atomics and its own copy of
// the mesh (taken under a mutex when the mesh is set), never the context.
//
//===----------------------------------------------------------------------===//

#include "Watchdog.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace par::rt;

namespace {

/// One rank's published state; written by its own main thread only.
struct alignas(64) Slot {
  std::atomic<uint64_t> seq;    // collectives entered so far
  std::atomic<uint32_t> inside; // 1 while in collective #seq
  std::atomic<uint32_t> id;     // what #seq is (kKernelNames or HostWait)
  std::atomic<int64_t> since;   // when it entered #seq (steady ns)
  std::atomic<int64_t> axes;    // its group's axes code
  std::atomic<int64_t> peer;    // its peer's world rank; -1 for a group
  std::atomic<uint32_t> mapped; // 1 once the rank uses this slot
};
static_assert(sizeof(Slot) == 64, "one cache line per rank");
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "slots are shared between processes");

const char *waitName(uint32_t id) {
  static const char *host[] = {"barrier", "broadcast_world", "gather_world",
                               "wait_sends", "request_wait"};
  if (id < uint32_t(kNumKernels))
    return kKernelNames[id];
  id -= kNumKernels;
  return id < sizeof(host) / sizeof(host[0]) ? host[id] : "collective";
}

int64_t nowNs() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch())
      .count();
}

/// PAR_COLLECTIVE_TIMEOUT in seconds (default 600; 0 or less disables).
double timeoutSeconds() {
  const char *v = std::getenv("PAR_COLLECTIVE_TIMEOUT");
  if (!v || !*v)
    return 600;
  char *end = nullptr;
  double s = std::strtod(v, &end);
  if (*end || !(s >= 0)) {
    std::fprintf(stderr,
                 "par runtime: PAR_COLLECTIVE_TIMEOUT='%s' is not a number of "
                 "seconds; using 600\n",
                 v);
    return 600;
  }
  return s;
}

std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

} // namespace

namespace par::rt {

class Watchdog {
public:
  Watchdog(int64_t rank, int64_t world, double timeout, Slot *table,
           size_t mappedBytes)
      : rank(rank), world(world), timeoutNs(int64_t(timeout * 1e9)),
        timeout(timeout), table(table), mappedBytes(mappedBytes),
        shared(table != nullptr) {
    if (!table) {
      own = new Slot();
      self = own;
    } else {
      self = &table[rank];
    }
    self->peer.store(-1, std::memory_order_relaxed);
    self->mapped.store(1, std::memory_order_release);
    thread = std::thread([this] { watch(); });
  }

  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    thread.join();
    if (table)
      munmap(table, mappedBytes);
    delete own;
  }

  void enter(int id, int64_t axes, int64_t peer) {
    self->since.store(nowNs(), std::memory_order_relaxed);
    self->id.store(uint32_t(id), std::memory_order_relaxed);
    self->axes.store(axes, std::memory_order_relaxed);
    self->peer.store(peer, std::memory_order_relaxed);
    self->seq.store(self->seq.load(std::memory_order_relaxed) + 1,
                    std::memory_order_relaxed);
    self->inside.store(1, std::memory_order_release);
  }
  void leave() { self->inside.store(0, std::memory_order_release); }

  void setMesh(const std::vector<int64_t> &sizes) {
    std::lock_guard<std::mutex> lock(mutex);
    meshSizes = sizes;
  }

private:
  int64_t rank, world;
  int64_t timeoutNs;
  double timeout;
  Slot *table;       // world slots, or null without a shared table
  size_t mappedBytes;
  bool shared;
  Slot *own = nullptr; // this rank's slot without a shared table
  Slot *self;

  std::mutex mutex; // guards stopping and meshSizes
  std::condition_variable wake;
  bool stopping = false;
  std::vector<int64_t> meshSizes;
  std::thread thread;

  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(100));
      if (stopping)
        break;
      if (!self->inside.load(std::memory_order_acquire))
        continue;
      int64_t since = self->since.load(std::memory_order_relaxed);
      if (nowNs() - since <= timeoutNs)
        continue;
      std::string message = report();
      // One write, so that the ranks' lines do not interleave.
      ssize_t ignored = ::write(2, message.data(), message.size());
      (void)ignored;
      _exit(kTimeoutExitCode);
    }
  }

  std::vector<int64_t> coordsOf(int64_t r) const {
    std::vector<int64_t> c(meshSizes.size());
    for (size_t a = meshSizes.size(); a-- > 0;) {
      c[a] = r % meshSizes[a];
      r /= meshSizes[a];
    }
    return c;
  }

  /// The world ranks of this rank's group of axes code `code` (the ranks
  /// that agree with it on the unlisted axes), and the listed axes.
  std::vector<int64_t> members(int64_t code, std::vector<int> &listed) const {
    listed.clear();
    for (int k = 0; k < 8; ++k) {
      unsigned byte = (uint64_t(code) >> (8 * k)) & 0xFF;
      if (!byte)
        break;
      listed.push_back(int(byte) - 1);
    }
    std::vector<int64_t> out;
    int64_t devices = 1;
    for (int64_t s : meshSizes)
      devices *= s;
    if (listed.empty() || meshSizes.empty() || devices != world) {
      for (int64_t r = 0; r < world; ++r)
        out.push_back(r);
      return out;
    }
    std::vector<int64_t> mine = coordsOf(rank);
    for (int64_t r = 0; r < world; ++r) {
      std::vector<int64_t> c = coordsOf(r);
      bool same = true;
      for (size_t a = 0; a < c.size() && same; ++a) {
        bool isListed = false;
        for (int l : listed)
          isListed |= l == int(a);
        same = isListed || c[a] == mine[a];
      }
      if (same)
        out.push_back(r);
    }
    return out;
  }

  static std::string rankList(const std::vector<int64_t> &ranks) {
    bool contiguous = ranks.size() > 2;
    for (size_t i = 1; i < ranks.size(); ++i)
      contiguous &= ranks[i] == ranks[i - 1] + 1;
    if (contiguous)
      return std::to_string(ranks.front()) + "-" +
             std::to_string(ranks.back());
    std::string s;
    for (int64_t r : ranks)
      s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
  }

  /// What rank `r` is doing, when it is not in this rank's collective.
  std::string stateOf(int64_t r) const {
    const Slot &s = table[r];
    if (!s.mapped.load(std::memory_order_acquire))
      return "its state is unknown";
    uint64_t seq = s.seq.load(std::memory_order_relaxed);
    uint32_t id = s.id.load(std::memory_order_relaxed);
    if (s.inside.load(std::memory_order_acquire)) {
      double waited =
          double(nowNs() - s.since.load(std::memory_order_relaxed)) / 1e9;
      char buf[160];
      std::snprintf(buf, sizeof(buf), "it waits in %s #%llu, for %.1f s",
                    waitName(id), (unsigned long long)seq, waited);
      return buf;
    }
    if (seq == 0)
      return "it has not entered any collective";
    return "its last collective was #" + std::to_string(seq) + ", " +
           waitName(id);
  }

  std::string report() {
    uint64_t seq = self->seq.load(std::memory_order_relaxed);
    uint32_t id = self->id.load(std::memory_order_relaxed);
    int64_t axes = self->axes.load(std::memory_order_relaxed);
    int64_t peer = self->peer.load(std::memory_order_relaxed);
    std::string what = std::string(waitName(id)) + " #" + std::to_string(seq);
    std::vector<int64_t> group;
    if (peer >= 0) {
      what += (std::strcmp(waitName(id), "recv") == 0 ? " from rank "
                                                       : " to rank ") +
              std::to_string(peer);
      group = {peer};
    } else {
      std::vector<int> listed;
      group = members(axes, listed);
      if (!listed.empty()) {
        what += " over mesh axes {";
        for (size_t i = 0; i < listed.size(); ++i)
          what += (i ? ", " : "") + std::to_string(listed[i]);
        what += "}";
      }
      what += " (ranks " + rankList(group) + ")";
    }
    std::string head = "par runtime: rank " + std::to_string(rank) + ": " +
                       what + " did not complete within " +
                       fmtSeconds(timeout) + " s: ";
    if (!shared)
      return head + "the other ranks' state is unknown (no shared memory "
                    "with them)\n";
    // The members that are not in the same collective: not reached it.
    std::vector<std::string> missing;
    std::vector<int64_t> named;
    for (int64_t r : group) {
      if (r == rank)
        continue;
      const Slot &s = table[r];
      bool same = s.inside.load(std::memory_order_acquire) &&
                  s.seq.load(std::memory_order_relaxed) == seq &&
                  s.id.load(std::memory_order_relaxed) == id;
      if (same)
        continue;
      missing.push_back("rank " + std::to_string(r) +
                        " has not reached it (" + stateOf(r) + ")");
      named.push_back(r);
    }
    std::string body;
    for (size_t i = 0; i < missing.size(); ++i)
      body += (i ? "; " : "") + missing[i];
    if (missing.empty())
      body = "every rank of it has reached it (a lost message?)";
    // The ranks not waiting in any collective (stuck in compute), when
    // they are elsewhere than this rank's group.
    std::vector<int64_t> idle;
    for (int64_t r = 0; r < world; ++r) {
      bool listed = r == rank;
      for (int64_t n : named)
        listed |= n == r;
      if (!listed && table[r].mapped.load(std::memory_order_acquire) &&
          !table[r].inside.load(std::memory_order_acquire))
        idle.push_back(r);
    }
    if (!idle.empty()) {
      body += "; not in any collective: ";
      for (size_t i = 0; i < idle.size(); ++i)
        body += (i ? ", " : "") + std::string("rank ") +
                std::to_string(idle[i]) + " (last #" +
                std::to_string(table[idle[i]].seq.load()) + ")";
    }
    return head + body + "\n";
  }
};

} // namespace par::rt

namespace {

/// Rank 0 creates the table and names it over the world broadcast; every
/// rank maps it; after a barrier rank 0 unlinks it. Every rank makes the
/// same world calls whatever fails, and a failure only costs the shared
/// view. Returns the mapped table or null.
Slot *mapSharedTable(par_rt_context_t &ctx, size_t bytes) {
  const Backend &w = ctx.world;
  char name[64] = "";
  int fd = -1;
  if (ctx.rank == 0) {
    static int counter = 0;
    std::snprintf(name, sizeof(name), "/par-rt-%d-%d", int(getpid()),
                  counter++);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) {
      if (fd >= 0) {
        close(fd);
        shm_unlink(name);
      }
      fd = -1;
      name[0] = 0;
    }
  }
  if (w.ops->broadcast_world(w.state, name, sizeof(name), 0) != PAR_OK)
    name[0] = 0;
  name[sizeof(name) - 1] = 0;
  if (ctx.rank != 0 && name[0])
    fd = shm_open(name, O_RDWR, 0600);
  void *table = MAP_FAILED;
  if (fd >= 0) {
    table = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  (void)w.ops->barrier(w.state);
  if (ctx.rank == 0 && name[0])
    shm_unlink(name);
  return table == MAP_FAILED ? nullptr : static_cast<Slot *>(table);
}

} // namespace

void par::rt::startWatchdog(par_rt_context_t &ctx) {
  double timeout = timeoutSeconds();
  if (ctx.worldSize <= 1 || timeout <= 0)
    return;
  size_t bytes = sizeof(Slot) * size_t(ctx.worldSize);
  Slot *table = mapSharedTable(ctx, bytes);
  ctx.watchdog = new Watchdog(ctx.rank, ctx.worldSize, timeout, table, bytes);
}

void par::rt::stopWatchdog(par_rt_context_t &ctx) {
  delete ctx.watchdog;
  ctx.watchdog = nullptr;
}

void par::rt::watchdogSetMesh(par_rt_context_t &ctx) {
  if (ctx.watchdog)
    ctx.watchdog->setMesh(ctx.meshSizes);
}

void par::rt::enterCollective(par_rt_context_t &ctx, int id, int64_t axes,
                              int64_t peer) {
  if (ctx.watchdog)
    ctx.watchdog->enter(id, axes, peer);
}

void par::rt::leaveCollective(par_rt_context_t &ctx) {
  if (ctx.watchdog)
    ctx.watchdog->leave();
}
