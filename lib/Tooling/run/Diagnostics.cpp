//===- Diagnostics.cpp - How the tooling reports bad input ----------------===//
//
// One error format for every tooling file and the drivers over them.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Diagnostics.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

namespace par::tooling {

namespace {
std::string &name() {
  static std::string n = "par-tool";
  return n;
}

std::vector<void (*)()> &cleanups() {
  static std::vector<void (*)()> c;
  return c;
}
} // namespace

void setToolName(const std::string &n) { name() = n; }

const std::string &toolName() { return name(); }

namespace {
void report(const std::string &line) {
  fprintf(stderr, "%s: %s\n", name().c_str(), line.c_str());
  fflush(stderr);
  fflush(stdout);
  for (void (*cleanup)() : cleanups())
    cleanup();
}
} // namespace

void fatal(const std::string &msg) {
  report("error: " + msg);
  _exit(1);
}

void crash(const std::string &msg) {
  report(msg);
  abort();
}

void atFatal(void (*cleanup)()) { cleanups().push_back(cleanup); }

void checkRuntime(par_status_t s, par_rt_context_t *ctx,
                  const std::string &what) {
  if (s != PAR_OK)
    fatal(what + ": " + par_rt_context_last_error(ctx));
}

} // namespace par::tooling
