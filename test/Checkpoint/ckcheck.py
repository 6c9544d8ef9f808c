"""Checks for the checkpoint tests (par-run --checkpoint / --resume).

  same FULL.csv RESUMED.csv      the resumed run's steps have the straight
                                 run's losses (and loss scales), bit for bit
                                 (the CSV's %.9g round-trips an f32 loss)
  near FULL.csv RESUMED.csv TOL  the same within TOL relative (another
                                 layout sums in another order)
  files DIR                      the checkpoint directories in DIR, sorted
"""
import csv
import os
import sys


def rows(path):
    with open(path) as f:
        return {int(r["step"]): r for r in csv.DictReader(f)}


def main():
    cmd = sys.argv[1]
    if cmd == "files":
        print("checkpoints:", " ".join(sorted(os.listdir(sys.argv[2]))))
        return
    full, res = rows(sys.argv[2]), rows(sys.argv[3])
    if not res:
        sys.exit("no steps in " + sys.argv[3])
    worst = 0.0
    for step, r in sorted(res.items()):
        f = full[step]
        if cmd == "same":
            for key in ("loss", "scale", "skipped"):
                if key in r and r[key] != f[key]:
                    sys.exit("step %d: %s %s resumed, %s straight" %
                             (step, key, r[key], f[key]))
        else:
            a, b = float(r["loss"]), float(f["loss"])
            d = abs(a - b) / abs(b)
            # NaN-aware: max(worst, nan) would keep worst.
            worst = float("nan") if d != d or worst != worst else max(worst, d)
    if cmd == "same":
        print("steps %d..%d: bitwise equal" % (min(res), max(res)))
    else:
        tol = float(sys.argv[4])
        print("steps %d..%d: largest relative difference %.1e (tolerance %g): %s"
              % (min(res), max(res), worst, tol, "OK" if worst <= tol else "FAIL"))
        if not worst <= tol:  # NaN fails too
            sys.exit(1)


main()
