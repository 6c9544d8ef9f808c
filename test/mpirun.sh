#!/bin/sh
# %mpirun in the lit tests: `mpirun --oversubscribe -n "$@"` with a private
# OpenMPI session directory, removed afterwards. Concurrent mpirun jobs that
# share OpenMPI 4's per-user session directory race on creating it (lit runs
# tests in parallel); par-run does the same for the jobs it launches.
dir=$(mktemp -d "${TMPDIR:-/tmp}/par-mpirun.XXXXXX") || exit 1
TMPDIR=$dir mpirun --mca orte_tmpdir_base "$dir" --oversubscribe -n "$@"
status=$?
rm -rf "$dir"
exit $status
