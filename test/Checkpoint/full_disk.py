"""Drives the full-disk test of par-run --checkpoint.

full_disk.py PAR_RUN ARTIFACT CORPUS WORKDIR

A checkpoint directory on a file system that holds one checkpoint and a
half: the step-2 checkpoint fits, the step-4 one does not (--keep 1 prunes
only after a successful save). The run must stop with a message naming the
file and the error, and leave step-00000002 complete (no half-written
directory visible); resuming from it continues the straight run's losses
bit for bit. The small file system is a tmpfs mounted in a private mount
namespace (`unshare -m` as root, `unshare -rm` otherwise; lit's feature
'tmpfs' says whether either is allowed). A file-size limit cannot stand in
for it: RLIMIT_FSIZE also stops mpirun's own session files.
"""
import os
import shlex
import subprocess
import sys

par_run, art, corpus, work = sys.argv[1:5]
common = [par_run, "-n", "4", art, "--entry", "gpt_step", "--data", corpus]
os.makedirs(work, exist_ok=True)


def sh(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


# The straight run, and the size of one checkpoint.
subprocess.run(common + ["--steps", "6", "--loss-csv", work + "/full.csv",
                         "--checkpoint", work + "/probe"],
               check=True, stdout=subprocess.DEVNULL)
size = 0
for root, _, files in os.walk(work + "/probe/step-00000006"):
    size += sum(os.path.getsize(os.path.join(root, f)) for f in files)

mnt = work + "/mnt"
os.makedirs(mnt, exist_ok=True)
ck = mnt + "/ck"
save = common + ["--steps", "6", "--checkpoint", ck, "--save-every", "2",
                 "--keep", "1"]
resume = common + ["--steps", "6", "--resume", ck, "--loss-csv",
                   work + "/res.csv"]
listing = [sys.executable, os.path.dirname(__file__) + "/ckcheck.py",
           "files", ck]
script = "; ".join([
    "mount -t tmpfs -o size=%dk tmpfs %s" % ((size * 3 // 2) // 1024 + 1, mnt),
    sh(save) + " > /dev/null; echo exit $?",
    sh(listing),
    sh(resume) + " | grep resumed",
])
mode = None
candidates = ([["unshare", "-m"]] if os.geteuid() == 0 else []) + \
    [["unshare", "-rm"]]
for prefix in candidates:
    probe = subprocess.run(prefix + ["sh", "-c", "mount -t tmpfs tmpfs " + mnt],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    if probe.returncode == 0:
        mode = prefix
        break
if not mode:
    sys.exit("full_disk.py: cannot mount a tmpfs in a private mount namespace "
             "(lit.local.cfg's 'tmpfs' feature should have said so)")
kib = (size * 3 // 2) // 1024 + 1
print("full disk: a tmpfs of %d KiB" % kib)
sys.stdout.flush()
sys.exit(subprocess.run(mode + ["sh", "-c", script]).returncode)
