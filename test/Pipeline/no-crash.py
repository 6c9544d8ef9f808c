#!/usr/bin/env python3
"""Pushes every .mlir file under the given folders through par-opt's full
pipeline (each split chunk separately) and fails if par-opt crashes, hangs or
exits with anything but 0 (success) or 1 (a diagnosed error).

Usage: no-crash.py PAR_OPT DIR [DIR ...]
"""
import os
import subprocess
import sys
import tempfile

SPLIT = "// -----"


def chunks(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [c for c in text.split(SPLIT) if c.strip()]


def main():
    par_opt, dirs = sys.argv[1], sys.argv[2:]
    files = sorted(
        os.path.join(root, name)
        for d in dirs
        for root, _, names in os.walk(d)
        for name in names
        if name.endswith(".mlir")
    )
    failures, runs = [], 0
    for path in files:
        for i, chunk in enumerate(chunks(path)):
            with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as tmp:
                tmp.write(chunk)
            for flags in (["--par-spmd=report=true"], ["--par-test-sharding-rules"],
                          ["--par-spmd", "--par-lower-cpu"]):
                runs += 1
                try:
                    proc = subprocess.run(
                        [par_opt, tmp.name, *flags, "-o", os.devnull],
                        capture_output=True, text=True, timeout=120)
                    rc = proc.returncode
                    err = proc.stderr
                except subprocess.TimeoutExpired:
                    rc, err = "timeout", ""
                if rc not in (0, 1) or "Stack dump" in err or "PLEASE submit" in err:
                    failures.append(f"{path} chunk {i} {' '.join(flags)}: exit {rc}\n{err[-2000:]}")
            os.unlink(tmp.name)
    for f in failures:
        print("CRASH:", f)
    print(f"no-crash: {len(files)} files, {runs} runs, {len(failures)} crashes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
