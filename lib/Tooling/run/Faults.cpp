//===- Faults.cpp - Faults injected on purpose, for the fault tests -------===//
//
// Faults.h: PAR_RUN_INJECT_HANG and PAR_RUN_INJECT_KILL, read once; a
// malformed value is a fatal error naming the variable.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Faults.h"

#include "par/Tooling/Diagnostics.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace par::tooling {

namespace {

/// One fault: the rank and step of "R:S", or rank -1 when not asked for.
struct StepFault {
  int64_t rank = -1, step = -1;
};

StepFault parseFault(const char *var) {
  StepFault f;
  const char *v = getenv(var);
  if (!v || !*v)
    return f;
  char *end = nullptr;
  long long r = strtoll(v, &end, 10);
  long long s = -1;
  if (end != v && *end == ':') {
    const char *at = end + 1;
    s = strtoll(at, &end, 10);
    if (end == at)
      s = -1;
  }
  if (r < 0 || s < 1 || *end)
    fatal(std::string(var) + " needs RANK:STEP (a rank >= 0, a step >= 1), "
                             "got '" + v + "'");
  f.rank = r;
  f.step = s;
  return f;
}

void say(const std::string &msg) {
  fprintf(stderr, "%s: %s\n", toolName().c_str(), msg.c_str());
  fflush(stderr);
}

} // namespace

void injectStepFaults(int64_t rank, int64_t step) {
  static const StepFault hang = parseFault("PAR_RUN_INJECT_HANG");
  static const StepFault kill = parseFault("PAR_RUN_INJECT_KILL");
  std::string where =
      "rank " + std::to_string(rank) + ", before step " + std::to_string(step);
  if (kill.rank == rank && kill.step == step) {
    say(where + ": killing itself with SIGKILL on purpose "
                "(PAR_RUN_INJECT_KILL)");
    raise(SIGKILL);
  }
  if (hang.rank == rank && hang.step == step) {
    say(where + ": hanging in compute on purpose (PAR_RUN_INJECT_HANG)");
    for (int i = 0; i < 3600; ++i)
      sleep(1);
  }
}

void injectCrash(int64_t rank) {
  const char *inject = getenv("PAR_RUN_INJECT_CRASH");
  if (!inject || strtoll(inject, nullptr, 10) != rank)
    return;
  crash("rank " + std::to_string(rank) +
        ": crashing on purpose (PAR_RUN_INJECT_CRASH)");
}

} // namespace par::tooling
