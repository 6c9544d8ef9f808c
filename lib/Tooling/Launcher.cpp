//===- Launcher.cpp - Starting the ranks of a job -------------------------===//
//
// The job's ranks inherit PAR_RUN_WORKER (so that they run instead of
// launching again) and PAR_RUN_INJECT_CRASH; a rank that fails takes the
// job down quickly (OpenMPI's orte_abort_on_non_zero_status).
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Launcher.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Runtime/par_runtime.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace par::tooling {

bool insideMPIJob() {
  // The runtime's test, plus the mark a re-launched par-run carries.
  return par_rt_inside_mpi_job() || getenv("PAR_RUN_WORKER");
}

std::string makeSessionDir() {
  const char *base = getenv("TMPDIR");
  std::string tmpl =
      std::string(base && *base ? base : "/tmp") + "/par-run.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back(0);
  if (!mkdtemp(buf.data()))
    fatal("cannot create a session directory '" + tmpl +
          "': " + strerror(errno));
  return buf.data();
}

void removeTree(const std::string &dir) {
  nftw(
      dir.c_str(),
      [](const char *path, const struct stat *, int, struct FTW *) {
        remove(path);
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

namespace {

pid_t launchedJob = -1;

void forwardSignal(int sig) {
  if (launchedJob > 0)
    kill(launchedJob, sig);
}

/// OpenMPI refuses to run as root unless told.
void allowRoot() {
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
}

std::string selfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return "/proc/self/exe";
  buf[n] = 0;
  return buf;
}

std::vector<std::string> mpirunArgs(int64_t ranks, const std::string &session,
                                    int argc, char **argv) {
  std::vector<std::string> args = {"mpirun", "-n", std::to_string(ranks),
                                   "--oversubscribe", "--mca",
                                   "orte_tmpdir_base", session};
  args.push_back("-x");
  args.push_back("PAR_RUN_WORKER");
  if (getenv("PAR_RUN_INJECT_CRASH")) {
    args.push_back("-x");
    args.push_back("PAR_RUN_INJECT_CRASH");
  }
  args.push_back(selfPath());
  for (int i = 1; i < argc; ++i)
    args.push_back(argv[i]);
  return args;
}

std::string privateSession; // removed at exit by usePrivateSessionDir

void removePrivateSession() {
  if (!privateSession.empty())
    removeTree(privateSession);
}

} // namespace

int launchJob(int64_t ranks, int argc, char **argv) {
  std::string session = makeSessionDir();
  allowRoot();
  // A rank that fails takes the job down (OpenMPI's default); keep it quick.
  setenv("OMPI_MCA_orte_abort_on_non_zero_status", "1", 0);
  setenv("PAR_RUN_WORKER", "1", 1);
  std::vector<std::string> args = mpirunArgs(ranks, session, argc, argv);
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    removeTree(session);
    fatal(std::string("cannot start mpirun: ") + strerror(errno));
  }
  if (pid == 0) {
    // Everything the job writes to a temporary directory (OpenMPI's and
    // PMIx's session files included) lands in the private one.
    setenv("TMPDIR", session.c_str(), 1);
    execvp("mpirun", cargs.data());
    fprintf(stderr, "%s: error: cannot start mpirun: %s (install "
                    "openmpi-bin)\n", toolName().c_str(), strerror(errno));
    _exit(127);
  }
  launchedJob = pid;
  signal(SIGINT, forwardSignal);
  signal(SIGTERM, forwardSignal);
  signal(SIGHUP, forwardSignal);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  removeTree(session);
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void usePrivateSessionDir() {
  privateSession = makeSessionDir();
  allowRoot();
  setenv("OMPI_MCA_orte_tmpdir_base", privateSession.c_str(), 1);
  setenv("TMPDIR", privateSession.c_str(), 1);
  atexit(removePrivateSession);
  atFatal(removePrivateSession);
}

} // namespace par::tooling
