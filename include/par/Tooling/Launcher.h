//===- Launcher.h - Starting the ranks of a job -----------------*- C++ -*-===//
//
// A driver started outside an MPI job re-launches itself on N ranks
// through `mpirun -n N` (inside an mpirun or srun job it runs directly); a
// single rank runs in the process itself. Either way OpenMPI gets a
// private session directory: concurrent jobs sharing OpenMPI 4's per-user
// one race on creating and removing it ("mkdir ... File exists ...
// orte_session_dir failed"). Each launched rank runs under a supervisor
// process that records how it ended, so that the launcher names the rank
// that failed and its signal or exit code (Launcher.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TOOLING_LAUNCHER_H
#define PAR_TOOLING_LAUNCHER_H

#include <cstdint>
#include <string>

namespace par::tooling {

/// Whether this process is a rank of an MPI job (mpirun, srun, or a job
/// launchJob started).
bool insideMPIJob();

/// The cores this process may run on (its affinity mask; at least 1).
int64_t availableCores();
/// Whether `ranks` ranks of `threads` threads each have a core per thread
/// here (they are then bound and their idle threads spin briefly).
bool threadsFitCores(int64_t ranks, int64_t threads);

/// A fresh directory under $TMPDIR (or /tmp) for one job's session files;
/// fatal if it cannot be made.
std::string makeSessionDir();
/// Removes `dir` and everything in it.
void removeTree(const std::string &dir);

/// Where a job's ranks run: mpirun's --hostfile FILE or -H host:slots,...
/// (both empty: this machine). Every host needs the executable and the
/// artifact at the same paths; the ranks get the launcher's OpenMP,
/// OpenBLAS, watchdog and testing variables (mpirun -x).
struct HostList {
  std::string hostfile;
  std::string hosts;
};

/// Runs this executable (/proc/self/exe) with argv[1..] as the ranks of
/// `mpirun -n ranks` on `hosts` with a private session directory, forwarding SIGINT,
/// SIGTERM and SIGHUP; returns the job's exit status (non-zero when a rank
/// failed). When a rank fails, prints which one and how, from the ranks'
/// records: "<tool>: error: rank 3 was killed by signal 9 (SIGKILL); the
/// job stopped (the other 7 ranks were stopped by the launcher)".
/// `threadsPerRank` places the ranks: on this machine, when the ranks'
/// threads fit its cores, each rank is bound to that many cores of its own
/// (mpirun --map-by slot:PE=T --bind-to core); when they do not, no rank is
/// bound (time-shared cores, as the kernel schedules them).
int launchJob(int64_t ranks, const HostList &hosts, int64_t threadsPerRank,
              int argc, char **argv);

/// Called first by a driver's main. In a process launchJob's mpirun
/// started: forks; the child (the worker) returns and runs the program,
/// this process supervises it (forwards SIGTERM/SIGINT/SIGHUP, waits,
/// records how it ended for launchJob) and exits with its status (128+N for
/// signal N). In any rank process, also writes $PAR_RUN_PID_DIR/rank-R.pid
/// when that is set (testing hook). Elsewhere does nothing.
void superviseLaunchedRank();

/// For a single rank in this process (an MPI singleton): points OpenMPI's
/// session directory and TMPDIR at a fresh directory, removed at exit.
void usePrivateSessionDir();

} // namespace par::tooling

#endif // PAR_TOOLING_LAUNCHER_H
