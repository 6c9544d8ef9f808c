//===- Launcher.cpp - Starting the ranks of a job -------------------------===//
//
// The job's ranks inherit PAR_RUN_WORKER (so that they run instead of
// launching again), PAR_RUN_SESSION (the session directory), the fault
// injection variables (PAR_RUN_INJECT_CRASH, _HANG, _KILL), PAR_RUN_PID_DIR
// and PAR_COLLECTIVE_TIMEOUT; a rank that fails takes the job down quickly
// (OpenMPI's orte_abort_on_non_zero_status).
//
// Each process mpirun starts is a supervisor (superviseLaunchedRank): it
// forks the worker that runs the program (PR_SET_PDEATHSIG: the worker
// dies with it), forwards SIGTERM/SIGINT/SIGHUP to it, waits, and writes
// a status record to <session>/ranks/rank-R: how the worker ended (exit
// code or signal), whether the supervisor had been told to stop (by
// mpirun, tearing the job down), and when. After mpirun returns, launchJob
// reads the records and names the rank that failed first:
//
//   par-run: error: rank 3 was killed by signal 9 (SIGKILL); the job
//   stopped (the other 7 ranks were stopped by the launcher)
//
// (without "error:" when the first rank exited with a code: it printed
// its own error before exiting).
//
// Testing hook: with PAR_RUN_PID_DIR=DIR each worker writes DIR/rank-R.pid
// (its pid, a line) at start, so that a test can kill a rank with a real
// signal.
//
//===----------------------------------------------------------------------===//

#include "par/Tooling/Launcher.h"

#include "par/Tooling/Diagnostics.h"
#include "par/Runtime/par_runtime.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <ftw.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace par::tooling {

int64_t availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
}

bool threadsFitCores(int64_t ranks, int64_t threads) {
  return ranks * threads <= availableCores();
}

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

std::vector<std::string> mpirunArgs(int64_t ranks, const HostList &hosts,
                                    int64_t threads, const std::string &session,
                                    int argc, char **argv) {
  std::vector<std::string> args = {"mpirun", "-n", std::to_string(ranks),
                                   "--oversubscribe", "--mca",
                                   "orte_tmpdir_base", session};
  // Binding. OpenMPI binds each rank to one core by default (up to 2
  // ranks), which would put a rank's T threads on one core; T cores a rank
  // when they fit, no binding when the cores are shared anyway.
  bool local = hosts.hostfile.empty() && hosts.hosts.empty();
  if (local && threads > 1) {
    if (threadsFitCores(ranks, threads))
      args.insert(args.end(), {"--map-by", "slot:PE=" + std::to_string(threads),
                               "--bind-to", "core"});
    else
      args.insert(args.end(), {"--bind-to", "none"});
  }
  if (!hosts.hostfile.empty())
    args.insert(args.end(), {"--hostfile", hosts.hostfile});
  if (!hosts.hosts.empty())
    args.insert(args.end(), {"-H", hosts.hosts});
  // Only the ranks' own failures: the par line below names them.
  args.push_back("--quiet");
  for (const char *var : {"PAR_RUN_WORKER", "PAR_RUN_SESSION"}) {
    args.push_back("-x");
    args.push_back(var);
  }
  // Ranks on other hosts do not inherit the launcher's environment.
  for (const char *var :
       {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "KMP_BLOCKTIME",
        "PAR_RUN_INJECT_CRASH", "PAR_RUN_INJECT_HANG", "PAR_RUN_INJECT_KILL",
        "PAR_RUN_PID_DIR", "PAR_COLLECTIVE_TIMEOUT", "PAR_RT_DEFER_STARTED"})
    if (getenv(var)) {
      args.push_back("-x");
      args.push_back(var);
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

/// One rank's status record (superviseLaunchedRank writes, launchJob reads).
struct RankRecord {
  int64_t rank = -1;
  int signal = 0;       // the worker's terminating signal, or 0
  int code = 0;         // its exit code when signal == 0
  bool stopped = false; // the supervisor was told to stop first
  int64_t timeNs = 0;   // CLOCK_MONOTONIC when it ended
};

int64_t monotonicNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// "SIGKILL" for 9 (glibc's abbreviation), or "signal N".
std::string signalName(int sig) {
  const char *abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe(const RankRecord &r) {
  std::string who = "rank " + std::to_string(r.rank);
  if (r.signal)
    return who + " was killed by signal " + std::to_string(r.signal) + " (" +
           signalName(r.signal) + ")";
  // The runtime's collective watchdog (lib/Runtime/core/Watchdog.h).
  if (r.code == 124)
    return who + " exited with code 124 (a collective timed out)";
  return who + " exited with code " + std::to_string(r.code);
}

std::vector<RankRecord> readRecords(const std::string &dir) {
  std::vector<RankRecord> out;
  DIR *d = opendir(dir.c_str());
  if (!d)
    return out;
  while (dirent *e = readdir(d)) {
    if (strncmp(e->d_name, "rank-", 5) != 0 || strchr(e->d_name, '.'))
      continue;
    FILE *f = fopen((dir + "/" + e->d_name).c_str(), "r");
    if (!f)
      continue;
    RankRecord r;
    long long rank, timeNs;
    int stopped;
    if (fscanf(f, "rank %lld signal %d code %d stopped %d time %lld", &rank,
               &r.signal, &r.code, &stopped, &timeNs) == 5) {
      r.rank = rank;
      r.stopped = stopped != 0;
      r.timeNs = timeNs;
      out.push_back(r);
    }
    fclose(f);
  }
  closedir(d);
  return out;
}

/// Prints which rank ended the job, from the ranks' records. Returns
/// whether a rank failed on its own.
bool reportRanks(const std::string &dir, int64_t ranks, int mpirunStatus) {
  std::vector<RankRecord> records = readRecords(dir);
  std::vector<RankRecord> failed;
  int64_t finished = 0;
  for (const RankRecord &r : records) {
    bool ok = r.signal == 0 && r.code == 0;
    if (!r.stopped && !ok)
      failed.push_back(r);
    else if (!r.stopped && ok)
      ++finished;
  }
  if (failed.empty()) {
    if (mpirunStatus != 0)
      fprintf(stderr,
              "%s: error: the job failed (mpirun exited with status %d) "
              "without a rank reporting a failure\n",
              toolName().c_str(), mpirunStatus);
    return false;
  }
  // A signal is more likely the cause than an exit code (a rank that
  // noticed a dead peer exits on its own, maybe before the dead rank's
  // supervisor wakes up); then the earliest.
  std::sort(failed.begin(), failed.end(),
            [](const RankRecord &a, const RankRecord &b) {
              if ((a.signal != 0) != (b.signal != 0))
                return a.signal != 0;
              return a.timeNs < b.timeNs;
            });
  std::string msg = describe(failed[0]) + "; the job stopped (";
  std::vector<std::string> parts;
  if (failed.size() > 1) {
    // The others by how they ended: "then ranks 1, 7 exited with code 124".
    std::vector<std::pair<std::string, std::vector<int64_t>>> groups;
    for (size_t i = 1; i < failed.size(); ++i) {
      RankRecord r = failed[i];
      r.rank = -1;
      std::string how = describe(r).substr(std::string("rank -1 ").size());
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](auto &e) { return e.first == how; });
      if (g == groups.end())
        groups.push_back({how, {failed[i].rank}});
      else
        g->second.push_back(failed[i].rank);
    }
    std::string then = "then ";
    for (size_t i = 0; i < groups.size(); ++i) {
      std::string who;
      for (int64_t r : groups[i].second)
        who += (who.empty() ? "" : ", ") + std::to_string(r);
      std::string how = groups[i].first;
      if (groups[i].second.size() > 1 && how.rfind("was ", 0) == 0)
        how = "were " + how.substr(4);
      then += (i ? ", " : "") +
              std::string(groups[i].second.size() > 1 ? "ranks " : "rank ") +
              who + " " + how;
    }
    parts.push_back(then);
  }
  if (finished)
    parts.push_back(std::to_string(finished) + " rank" +
                    (finished == 1 ? "" : "s") + " had finished");
  int64_t stopped = ranks - int64_t(failed.size()) - finished;
  if (stopped > 0)
    parts.push_back(stopped == 1 ? std::string("the other rank was stopped "
                                               "by the launcher")
                                 : "the other " + std::to_string(stopped) +
                                       " ranks were stopped by the launcher");
  for (size_t i = 0; i < parts.size(); ++i)
    msg += (i ? "; " : "") + parts[i];
  msg += ")";
  // A rank that exited with a code said why itself (par's errors print
  // before they exit): the summary is then a note, not a second error.
  fprintf(stderr, "%s: %s%s\n", toolName().c_str(),
          failed[0].signal != 0 ? "error: " : "", msg.c_str());
  return true;
}

/// This process's rank in the job mpirun (or srun) started, or -1.
int64_t launchedRank() {
  for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                          "SLURM_PROCID"})
    if (const char *v = getenv(var))
      return strtoll(v, nullptr, 10);
  return -1;
}

/// PAR_RUN_PID_DIR/rank-R.pid for this worker (testing hook).
void writePidFile() {
  const char *dir = getenv("PAR_RUN_PID_DIR");
  int64_t rank = launchedRank();
  if (!dir || !*dir || rank < 0)
    return;
  std::string path = std::string(dir) + "/rank-" + std::to_string(rank);
  if (FILE *f = fopen((path + ".tmp").c_str(), "w")) {
    fprintf(f, "%lld\n", (long long)getpid());
    fclose(f);
    rename((path + ".tmp").c_str(), (path + ".pid").c_str());
  }
}

pid_t supervisedWorker = -1;
volatile sig_atomic_t toldToStop = 0;

void stopWorker(int sig) {
  toldToStop = 1;
  if (supervisedWorker > 0)
    kill(supervisedWorker, sig);
}

/// Waits for mpirun and returns its status. OpenMPI 4's mpirun can hang
/// itself when a rank dies while it connects to the PMIx server (MPI_Init),
/// with every rank already gone: once a rank's record says it failed, or
/// every rank has a record, mpirun gets a few seconds to end before it is
/// stopped (SIGTERM, then SIGKILL; the ranks' supervisors die with it).
int waitForJob(pid_t pid, const std::string &records, int64_t ranks) {
  int status = 0;
  int64_t deadline = -1, killAt = -1;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR))
      return status;
    int64_t now = monotonicNs();
    if (deadline < 0) {
      std::vector<RankRecord> rs = readRecords(records);
      bool failed = int64_t(rs.size()) == ranks;
      for (const RankRecord &r : rs)
        failed |= !r.stopped && (r.signal || r.code);
      if (failed)
        deadline = now + 2000000000LL;
    } else if (now > deadline && killAt < 0) {
      kill(pid, SIGTERM);
      killAt = now + 1000000000LL;
    } else if (killAt >= 0 && now > killAt) {
      kill(pid, SIGKILL);
      killAt = INT64_MAX;
    }
    usleep(50000);
  }
}

} // namespace

void superviseLaunchedRank() {
  const char *session = getenv("PAR_RUN_SESSION");
  if (!session || !*session || !getenv("PAR_RUN_WORKER") ||
      getenv("PAR_RUN_SUPERVISED")) {
    if (insideMPIJob())
      writePidFile();
    return;
  }
  setenv("PAR_RUN_SUPERVISED", "1", 1);
  pid_t supervisor = getpid();
  fflush(stdout);
  fflush(stderr);
  // Forward the stop signals from the start (a stop between fork and the
  // handlers would otherwise miss the worker).
  struct sigaction sa = {};
  sa.sa_handler = stopWorker;
  sigemptyset(&sa.sa_mask);
  sigset_t block, old;
  sigemptyset(&block);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t worker = fork();
  if (worker < 0) { // run unsupervised
    sigprocmask(SIG_SETMASK, &old, nullptr);
    writePidFile();
    return;
  }
  if (worker == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != supervisor)
      _exit(128 + SIGKILL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    writePidFile();
    return;
  }
  supervisedWorker = worker;
  // Stopped with the launcher, should it die without stopping this rank.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    sigaction(sig, &sa, nullptr);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  while (waitpid(worker, &status, 0) < 0 && errno == EINTR) {
  }
  RankRecord r;
  r.rank = launchedRank();
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  r.stopped = toldToStop != 0;
  r.timeNs = monotonicNs();
  std::string dir = std::string(session) + "/ranks";
  std::string path = dir + "/rank-" + std::to_string(r.rank);
  if (FILE *f = fopen((path + ".tmp").c_str(), "w")) {
    fprintf(f, "rank %lld signal %d code %d stopped %d time %lld\n",
            (long long)r.rank, r.signal, r.code, int(r.stopped),
            (long long)r.timeNs);
    fclose(f);
    rename((path + ".tmp").c_str(), path.c_str());
  }
  _exit(r.signal ? 128 + r.signal : r.code);
}

int launchJob(int64_t ranks, const HostList &hosts, int64_t threadsPerRank,
              int argc, char **argv) {
  std::string session = makeSessionDir();
  allowRoot();
  // A rank that fails takes the job down (OpenMPI's default); keep it quick.
  setenv("OMPI_MCA_orte_abort_on_non_zero_status", "1", 0);
  setenv("PAR_RUN_WORKER", "1", 1);
  setenv("PAR_RUN_SESSION", session.c_str(), 1);
  std::string records = session + "/ranks";
  mkdir(records.c_str(), 0700);
  std::vector<std::string> args = mpirunArgs(ranks, hosts, threadsPerRank, session, argc, argv);
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
  int status = waitForJob(pid, records, ranks);
  int code = WIFEXITED(status) ? WEXITSTATUS(status)
                               : 128 + (WIFSIGNALED(status) ? WTERMSIG(status)
                                                            : 0);
  bool rankFailed = reportRanks(records, ranks, code);
  removeTree(session);
  return code == 0 && rankFailed ? 1 : code;
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
