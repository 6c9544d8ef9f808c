"""Starts many par-run jobs at once, several rounds, under CPU load, and
checks that every one succeeds and that no session directory is left behind.

OpenMPI 4 keeps its session files in one directory per user and node under
$TMPDIR; concurrent mpirun jobs race on creating and removing it
("mkdir ... File exists ... orte_session_dir failed"). par-run gives each job
a private directory, also when the user sets TMPDIR (here: one shared by all
jobs, as a user's would be).

usage: concurrent_launch.py PAR_RUN ARTIFACT TMPDIR [JOBS] [ROUNDS]
"""
import multiprocessing
import os
import subprocess
import sys


def burn(stop):
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) % 2147483648


def main():
    par_run, artifact, tmpdir = sys.argv[1:4]
    jobs = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    os.makedirs(tmpdir, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmpdir)
    stop = multiprocessing.Event()
    load = [multiprocessing.Process(target=burn, args=(stop,)) for _ in range(2)]
    for p in load:
        p.start()
    failures = 0
    try:
        for r in range(rounds):
            procs = [subprocess.Popen([par_run, "-n", "2", artifact, "--verify",
                                       "--seed", str(r * jobs + j)],
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
                     for j in range(jobs)]
            for j, p in enumerate(procs):
                out, _ = p.communicate(timeout=600)
                if p.returncode != 0 or "OK" not in out:
                    failures += 1
                    print(f"round {r} job {j}: exit {p.returncode}\n{out}")
            print(f"round {r}: {jobs} jobs, {failures} failures so far")
    finally:
        stop.set()
        for p in load:
            p.join()
    left = sorted(os.listdir(tmpdir))
    print(f"left in TMPDIR: {left}")
    print("PASS" if failures == 0 and not left else "FAIL")
    return 0 if failures == 0 and not left else 1


if __name__ == "__main__":
    sys.exit(main())
