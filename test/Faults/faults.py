#!/usr/bin/env python3
"""Drives the fault tests of test/Faults on real ranks.

  faults.py kill-trials --par-run PAR_RUN --workdir DIR --trials N --seed S
                        --ranks R [--max-delay SECONDS] -- PAR_RUN_ARGS...
      N trials of a real SIGKILL of a random rank at a random time of a
      par-run job (PAR_RUN_PID_DIR tells the workers' pids). Each trial
      checks: every worker process is gone within 10 s of the kill, par-run
      exits non-zero within 10 s (both x load_factor()), and its stderr names the killed rank and
      signal 9. Seeded: the victims and delays are the same on every run.
      Prints one line per trial and "N trials: PASS".

  faults.py timed --max-seconds T [--ranks R --pid-dir DIR] -- COMMAND...
      Runs COMMAND (its stdout and stderr pass through), then prints
      "exit status N in T s"; fails when COMMAND ran longer than T seconds
      times load_factor() (it is killed 30 s later) or exited 0. With --ranks and
      --pid-dir (a par-run job: PAR_RUN_PID_DIR=DIR tells its workers'
      pids), also that all R workers started and are gone within the
      bound: prints "all R ranks gone".

A trial is run_trial (start the job, kill, observe) followed by the checks
in check_trial; a later check (e.g. --resume from the last checkpoint) is a
function of the trial's record added to TRIAL_CHECKS.
"""

import argparse
import csv
import os
import random
import signal
import subprocess
import sys
import time

KILL_DEADLINE = 10.0  # seconds: every rank gone, par-run returned


def load_factor():
    """How much slower than idle this machine runs now: the 1-minute load
    average per core, at least 1 and at most 4. The time bounds here are
    for an idle machine and are multiplied by it, so a suite running tests
    in parallel (or a busy CI host) does not flake, while a real hang (the
    injected one sleeps for an hour) still fails any bound."""
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 1.0
    return min(4.0, max(1.0, per_core))


def alive(pid):
    """Whether `pid` runs (a zombie has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def read_pids(piddir, ranks):
    pids = {}
    for r in range(ranks):
        path = os.path.join(piddir, "rank-%d.pid" % r)
        try:
            with open(path) as f:
                pids[r] = int(f.read().strip())
        except (FileNotFoundError, ValueError):
            pass
    return pids


class Trial:
    """One trial's record: what was done and what was seen."""

    def __init__(self, index, workdir):
        self.index = index
        self.workdir = workdir
        self.victim = None
        self.delay = None
        self.returncode = None
        self.stderr = ""
        self.exit_after = None  # seconds from the kill to par-run's exit
        self.gone_after = None  # seconds from the kill to the last worker's end
        self.pids = {}
        self.stuck = ""  # the job's processes when it did not end
        self.resumed = None  # --checkpoint-every: the step resumed from


def run_trial(args, index, rng):
    workdir = os.path.join(args.workdir, "trial-%d" % index)
    piddir = os.path.join(workdir, "pids")
    os.makedirs(piddir, exist_ok=True)
    t = Trial(index, workdir)
    t.victim = rng.randrange(args.ranks)
    t.delay = rng.uniform(0.0, args.max_delay)
    env = dict(os.environ, PAR_RUN_PID_DIR=piddir)
    command = list(args.command)
    if args.checkpoint_every:
        command += ["--checkpoint", os.path.join(workdir, "ck"),
                    "--save-every", str(args.checkpoint_every), "--keep", "2"]
    errpath = os.path.join(workdir, "stderr.txt")
    with open(errpath, "w") as err:
        job = subprocess.Popen([args.par_run] + command, env=env,
                               stdout=subprocess.DEVNULL, stderr=err,
                               start_new_session=True)
        try:
            start = time.monotonic()
            while len(t.pids) < args.ranks:
                if job.poll() is not None:
                    raise RuntimeError("par-run exited (%d) before every rank "
                                       "started" % job.returncode)
                if time.monotonic() - start > 120:
                    raise RuntimeError("the ranks did not start within 120 s")
                time.sleep(0.02)
                t.pids = read_pids(piddir, args.ranks)
            # With checkpoints, every other trial kills after the first one
            # (the others mostly during start-up, before any).
            while (args.checkpoint_every and index % 2 == 1 and
                   newest_checkpoint(os.path.join(workdir, "ck")) == 0):
                if job.poll() is not None or time.monotonic() - start > 120:
                    raise RuntimeError("no checkpoint within 120 s")
                time.sleep(0.02)
            time.sleep(t.delay)
            if job.poll() is not None:
                raise RuntimeError("par-run exited (%d) before the kill; give "
                                   "it more steps" % job.returncode)
            os.kill(t.pids[t.victim], signal.SIGKILL)
            killed = time.monotonic()
            try:
                job.wait(timeout=KILL_DEADLINE + 20)
            except subprocess.TimeoutExpired:
                # What still runs, for the report.
                t.stuck = subprocess.run(
                    ["ps", "-s", str(job.pid), "-o", "pid,ppid,stat,wchan:24,args"],
                    capture_output=True, text=True).stdout
            t.exit_after = time.monotonic() - killed
            while (any(alive(p) for p in t.pids.values()) and
                   time.monotonic() - killed < KILL_DEADLINE + 20):
                time.sleep(0.02)
            t.gone_after = time.monotonic() - killed
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
            t.returncode = job.returncode
            for p in t.pids.values():
                if alive(p):
                    os.kill(p, signal.SIGKILL)
    with open(errpath) as f:
        t.stderr = f.read()
    return t


def check_trial(t):
    """The checks every trial must pass; returns the failures."""
    failures = []
    deadline = KILL_DEADLINE * load_factor()
    if t.exit_after > deadline:
        failures.append("par-run ran %.1f s after the kill" % t.exit_after)
    if t.gone_after > deadline:
        failures.append("a rank ran %.1f s after the kill" % t.gone_after)
    if t.returncode == 0:
        failures.append("par-run exited 0")
    expected = "rank %d was killed by signal 9 (SIGKILL)" % t.victim
    if expected not in t.stderr:
        failures.append("stderr does not say '%s'" % expected)
    return failures


def newest_checkpoint(ck):
    """The newest complete checkpoint's step in `ck` (0 if none)."""
    steps = [int(n[5:]) for n in (os.listdir(ck) if os.path.isdir(ck) else [])
             if n.startswith("step-") and
             os.path.exists(os.path.join(ck, n, "manifest.json"))]
    return max(steps, default=0)


def resume_check(args, t):
    """--checkpoint-every: the killed run's newest complete checkpoint
    resumes; its next step's loss is the straight run's (--reference CSV),
    bit for bit."""
    if not args.checkpoint_every:
        return []
    ck = os.path.join(t.workdir, "ck")
    k = newest_checkpoint(ck)
    t.resumed = k
    if k == 0:
        return []  # killed before the first checkpoint: nothing to resume
    cmd = list(args.command)
    cmd[cmd.index("--steps") + 1] = str(k + 1)
    csv_path = os.path.join(t.workdir, "resumed.csv")
    r = subprocess.run([args.par_run] + cmd + ["--resume", ck, "--loss-csv",
                                               csv_path],
                       capture_output=True, text=True, timeout=300)
    failures = []
    if r.returncode != 0:
        return ["--resume exited %d: %s" % (r.returncode, r.stderr[-2000:])]
    if "resumed from %s/step-%08d (step %d;" % (ck, k, k) not in r.stdout:
        failures.append("--resume did not start from step %d" % k)
    with open(csv_path) as f:
        got = {int(row["step"]): row["loss"] for row in csv.DictReader(f)}
    with open(args.reference) as f:
        ref = {int(row["step"]): row["loss"] for row in csv.DictReader(f)}
    if k + 1 not in ref:
        failures.append("the reference run has no step %d; give it more "
                        "steps" % (k + 1))
    elif got.get(k + 1) != ref[k + 1]:
        failures.append("step %d's loss after --resume is %s, the straight "
                        "run's %s" % (k + 1, got.get(k + 1), ref[k + 1]))
    return failures


# Checks run after check_trial: each takes (args, trial) and returns a list
# of failures.
TRIAL_CHECKS = [resume_check]


def kill_trials(args):
    rng = random.Random(args.seed)
    failed = 0
    for i in range(args.trials):
        t = run_trial(args, i, rng)
        failures = check_trial(t)
        for check in TRIAL_CHECKS:
            failures += check(args, t)
        resumed = ("" if t.resumed is None else
                   ", resumed from step %d" % t.resumed if t.resumed else
                   ", no checkpoint yet")
        print("trial %d: killed rank %d after %.2f s: par-run exited %d "
              "%.1f s later, every rank gone in %.1f s%s: %s" %
              (i, t.victim, t.delay, t.returncode, t.exit_after,
               t.gone_after, resumed, "OK" if not failures else "FAIL"))
        for f in failures:
            print("  " + f)
        if failures:
            failed += 1
            print("  stderr:\n" + t.stderr)
            if t.stuck:
                print("  still running:\n" + t.stuck)
        sys.stdout.flush()
    print("%d trials: %s" % (args.trials, "PASS" if not failed else
                             "%d FAILED" % failed))
    return 1 if failed else 0


def timed(args):
    factor = load_factor()
    if factor > 1:
        print("machine load: bound %g s x %.2f" % (args.max_seconds, factor))
        args.max_seconds *= factor
    env = dict(os.environ)
    if args.pid_dir:
        os.makedirs(args.pid_dir, exist_ok=True)
        env["PAR_RUN_PID_DIR"] = args.pid_dir
    start = time.monotonic()
    try:
        rc = subprocess.run(args.command, env=env,
                            timeout=args.max_seconds + 30).returncode
    except subprocess.TimeoutExpired:
        rc = None
    sys.stderr.flush()
    if args.pid_dir:
        pids = read_pids(args.pid_dir, args.ranks)
        while (any(alive(p) for p in pids.values()) and
               time.monotonic() - start < args.max_seconds):
            time.sleep(0.1)
        left = sorted(r for r, p in pids.items() if alive(p))
    elapsed = time.monotonic() - start
    print("exit status %s in %.1f s" % (rc, elapsed))
    if rc is None or elapsed > args.max_seconds:
        print("FAIL: ran longer than %g s" % args.max_seconds)
        return 1
    if rc == 0:
        print("FAIL: exited 0")
        return 1
    if args.pid_dir:
        if len(pids) != args.ranks:
            print("FAIL: %d of %d ranks wrote their pid" % (len(pids), args.ranks))
            return 1
        if left:
            print("FAIL: ranks %s still running" % left)
            return 1
        print("all %d ranks gone" % args.ranks)
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    k = sub.add_parser("kill-trials")
    k.add_argument("--par-run", required=True)
    k.add_argument("--workdir", required=True)
    k.add_argument("--trials", type=int, default=20)
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--ranks", type=int, required=True)
    k.add_argument("--max-delay", type=float, default=1.0)
    k.add_argument("--checkpoint-every", type=int, default=0,
                   help="add --checkpoint TRIAL/ck --save-every N and check "
                        "that --resume continues from its newest complete "
                        "checkpoint (the next loss equals --reference's)")
    k.add_argument("--reference", help="the straight run's --loss-csv")
    k.add_argument("command", nargs=argparse.REMAINDER)
    t = sub.add_parser("timed")
    t.add_argument("--max-seconds", type=float, required=True)
    t.add_argument("--ranks", type=int, default=0)
    t.add_argument("--pid-dir")
    t.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    return kill_trials(args) if args.mode == "kill-trials" else timed(args)


if __name__ == "__main__":
    sys.exit(main())
