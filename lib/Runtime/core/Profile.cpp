//===- Profile.cpp - Time per kernel, as torch.profiler's table -----------===//
//
// Off, a kernel's hooks cost a load and a branch each (par_rt_k_profile_begin
// returns 0 and _end returns at once). On, the clock is read around each
// call (CLOCK_MONOTONIC, about 20 ns) and the record found by name.
//
//===----------------------------------------------------------------------===//

#include "Profile.h"

#include "Context.h"

#include "par/Runtime/par_kernel_abi.h"
#include "par/Runtime/par_runtime.h"

#include <ctime>
#include <map>
#include <vector>

namespace {

struct Record {
  int64_t calls = 0;
  double seconds = 0, flops = 0, bytes = 0;
};

bool on = false;
std::map<std::string, Record> records;
std::vector<std::pair<std::string, Record>> snapshot; // for _get's names

int64_t nowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

} // namespace

bool par::rt::profiling() { return on; }

void par::rt::profileRecord(const std::string &name, double seconds,
                            double flops, double bytes) {
  Record &r = records[name];
  r.calls += 1;
  r.seconds += seconds;
  r.flops += flops;
  r.bytes += bytes;
}

PAR_RT_EXPORT int64_t par_rt_k_profile_begin(void) { return on ? nowNs() : 0; }

PAR_RT_EXPORT void par_rt_k_profile_end(const char *name, int64_t start) {
  if (!start || !on)
    return;
  par::rt::profileRecord(name, double(nowNs() - start) * 1e-9, 0, 0);
}

PAR_RT_EXPORT void par_rt_profile_start(void) {
  records.clear();
  snapshot.clear();
  on = true;
}

PAR_RT_EXPORT void par_rt_profile_stop(void) { on = false; }

PAR_RT_EXPORT int64_t par_rt_profile_count(void) {
  snapshot.assign(records.begin(), records.end());
  return int64_t(snapshot.size());
}

PAR_RT_EXPORT par_status_t par_rt_profile_get(int64_t index,
                                              par_rt_profile_entry_t *out) {
  if (!out || index < 0 || index >= int64_t(snapshot.size()))
    return PAR_ERR_INVALID_ARGUMENT;
  const auto &[name, r] = snapshot[index];
  out->name = name.c_str();
  out->calls = r.calls;
  out->seconds = r.seconds;
  out->flops = r.flops;
  out->bytes = r.bytes;
  return PAR_OK;
}
