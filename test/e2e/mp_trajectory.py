#!/usr/bin/python3
"""Mixed-precision training against f32 (issue 10): loss trajectories.

mp_trajectory.py GEN_TRANSFORMER PAR_COMPILE PAR_RUN DATA WORKDIR

One GPT (gen_transformer.py --gpt, 2 layers, d_model 32, 4 heads, seq 16,
vocab 96, global batch 8, dp 2: 2 ranks) is compiled three times with
par-compile --options="optimizer=adamw lr=3e-3 weight-decay=0 precision=P"
for P = f32, bf16 (loss scaling auto = none) and f16 (auto = dynamic,
PyTorch GradScaler's defaults: init 2^16, x2 every 2000 finite steps, x0.5),
and trained for STEPS steps by par-run on DATA with the same --seed: the
same initial weights and the same batches for the three. Checks: every
loss is finite, and the final loss (mean of the last WINDOW steps) of bf16
and of f16 is within TOL (relative) of f32's; also prints the mean relative
gap over the whole run and, for f16, the skipped steps and the final scale.

Prints one line per check and `N passed, M failed`; exits 1 on a failure.
"""
import csv
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

STEPS = 300
WINDOW = 20
TOL = 0.02
SEED = 7
MODEL = ["--gpt", "--layers", "2", "--batch", "8", "--seq", "16", "--dmodel", "32",
         "--heads", "4", "--vocab", "96", "--dp", "2", "--tp", "1"]
RANKS = 2
OPTIONS = "optimizer=adamw lr=3e-3 weight-decay=0"


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(" ".join(cmd) + "\n" + p.stdout[-4000:] + p.stderr[-4000:])
        sys.exit("mp_trajectory: %s failed" % os.path.basename(cmd[0]))
    return p.stdout


def main():
    gen, compiler, runner, data, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "gpt.mlir")
    run(["/usr/bin/python3", gen] + MODEL + ["-o", model])

    def build(precision):
        art = os.path.join(work, precision)
        run([compiler, model, "-o", art, "--no-reference",
             "--options=%s precision=%s" % (OPTIONS, precision)])
        return art

    precisions = ["f32", "bf16", "f16"]
    with ThreadPoolExecutor(2) as pool:
        arts = dict(zip(precisions, pool.map(build, precisions)))

    losses, logs = {}, {}
    for p in precisions:
        path = os.path.join(work, p + ".csv")
        logs[p] = run([runner, "-n", str(RANKS), arts[p], "--entry", "gpt_step", "--data", data,
                       "--steps", str(STEPS), "--seed", str(SEED), "--loss-csv", path])
        rows = list(csv.DictReader(open(path)))
        losses[p] = rows

    passed = failed = 0

    def check(name, ok):
        nonlocal passed, failed
        passed += ok
        failed += not ok
        print("%s %s" % (name, "OK" if ok else "FAIL"), flush=True)

    final = {}
    for p in precisions:
        ls = [float(r["loss"]) for r in losses[p]]
        final[p] = sum(ls[-WINDOW:]) / WINDOW
        check("%s: %d steps, all losses finite, loss %.4f -> %.4f (mean of the last %d)"
              % (p, len(ls), ls[0], final[p], WINDOW),
              len(ls) == STEPS and all(math.isfinite(x) for x in ls))
    ref = [float(r["loss"]) for r in losses["f32"]]
    for p in ("bf16", "f16"):
        ls = [float(r["loss"]) for r in losses[p]]
        gap = (final[p] - final["f32"]) / final["f32"]
        mean_gap = sum(abs(a - b) / b for a, b in zip(ls, ref)) / len(ref)
        extra = ""
        if "scale" in losses[p][-1]:
            extra = ", %s steps skipped, scale %s" % (losses[p][-1]["skipped"],
                                                      losses[p][-1]["scale"])
        print("%s: mean |loss - f32| / f32 over all steps %.4f%s" % (p, mean_gap, extra))
        check("%s: final loss %.4f vs f32 %.4f: gap %+.4f (tolerance %.2f)"
              % (p, final[p], final["f32"], gap, TOL), abs(gap) <= TOL)
    f16_log = logs["f16"]
    check("f16: every rank took the same step/skip decisions",
          "all %d ranks took the same step/skip decision" % RANKS in f16_log)

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
