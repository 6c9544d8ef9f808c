"""Compares loss trajectories (par-run --loss-csv) of compressed training.

Each run's final loss is the mean of its last 20 steps (the runs see the
same batches, so this removes only the batch-to-batch noise of one step).

  near A B TOL      A's final loss is within TOL (relative) of B's
  falls A DROP      A's final loss is at least DROP below its first
  better A B MARGIN A's final loss is at least MARGIN below B's
  skips A B         A skipped (loss scaling) exactly the steps B skipped
"""
import csv
import sys


def final(path):
    losses = [float(r["loss"]) for r in csv.DictReader(open(path))]
    if len(losses) < 20 or any(l != l for l in losses):
        sys.exit(f"{path}: {len(losses)} steps or a NaN loss")
    return losses[0], sum(losses[-20:]) / 20, len(losses)


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "near":
        (_, a, n), (_, b, _) = final(args[0]), final(args[1])
        rel = abs(a - b) / abs(b)
        print(f"near: {n} steps, final {a:.4f} vs {b:.4f}: {rel * 100:.2f}% "
              f"apart (at most {float(args[2]) * 100:g}%)")
        ok = rel <= float(args[2])
    elif what == "falls":
        first, a, n = final(args[0])
        print(f"falls: {n} steps, {first:.4f} -> {a:.4f}")
        ok = first - a >= float(args[1])
    elif what == "skips":
        def skipped(path):
            return "".join(r["skipped"] for r in csv.DictReader(open(path)))
        a, b = skipped(args[0]), skipped(args[1])
        print(f"skips: {len(a)} steps, {a.count('1')} skipped, "
              f"{'the same steps' if a == b else 'DIFFERENT steps'} as "
              f"the uncompressed run ({b.count('1')})")
        ok = a == b
    else:
        (_, a, n), (_, b, _) = final(args[0]), final(args[1])
        print(f"better: {n} steps, final {a:.4f} vs {b:.4f} "
              f"({b - a:+.4f}, at least {args[2]})")
        ok = b - a >= float(args[2])
    if not ok:
        sys.exit(f"{what} failed")


main()
