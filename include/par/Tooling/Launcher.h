//===- Launcher.h - Starting the ranks of a job -----------------*- C++ -*-===//
//
// A driver started outside an MPI job re-launches itself on N ranks
// through `mpirun -n N` (inside an mpirun or srun job it runs directly); a
// single rank runs in the process itself. Either way OpenMPI gets a
// private session directory: concurrent jobs sharing OpenMPI 4's per-user
// one race on creating and removing it ("mkdir ... File exists ...
// orte_session_dir failed").
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

/// A fresh directory under $TMPDIR (or /tmp) for one job's session files;
/// fatal if it cannot be made.
std::string makeSessionDir();
/// Removes `dir` and everything in it.
void removeTree(const std::string &dir);

/// Runs this executable (/proc/self/exe) with argv[1..] as the ranks of
/// `mpirun -n ranks` with a private session directory, forwarding SIGINT,
/// SIGTERM and SIGHUP; returns the job's exit status.
int launchJob(int64_t ranks, int argc, char **argv);

/// For a single rank in this process (an MPI singleton): points OpenMPI's
/// session directory and TMPDIR at a fresh directory, removed at exit.
void usePrivateSessionDir();

} // namespace par::tooling

#endif // PAR_TOOLING_LAUNCHER_H
