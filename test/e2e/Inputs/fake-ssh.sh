#!/bin/sh
# mpirun's rsh agent for a test: "ssh HOST CMD..." runs CMD on this machine
# (each "host" gets its own orted, as a real node would).
echo "$1" >> "${FAKE_SSH_LOG:-/dev/null}"
shift
exec /bin/sh -c "$*"
