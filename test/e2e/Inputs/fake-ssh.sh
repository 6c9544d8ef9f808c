#!/bin/sh
# mpirun's rsh agent for test/e2e/multi-node.test: "ssh HOST CMD..." runs
# CMD (an OpenMPI daemon) on this machine, as ssh would on HOST, and logs
# HOST. A real node has its own /tmp: each fake one gets its own session
# directory (the daemons of one machine would race on creating a shared one).
host=$1
shift
echo "$host" >> "${FAKE_SSH_LOG:-/dev/null}"
cmd=$(printf '%s' "$*" | sed "s|orte_tmpdir_base \"\([^\"]*\)\"|orte_tmpdir_base \"\1/$host\"|")
base=$(printf '%s' "$cmd" | sed -n "s|.*orte_tmpdir_base \"\([^\"]*\)\".*|\1|p")
[ -n "$base" ] && mkdir -p "$base"
exec /bin/sh -c "$cmd"
