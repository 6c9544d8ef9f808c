#!/usr/bin/env python3
"""Pipeline activation bytes per stage, f32 vs bf16 (mixed precision).

Compiles one GPT (gen_transformer.py --gpt --layers 4 --dp 1 --tp 1 --pp 2) into
4 pipeline stages on 2 pipeline ranks (interleaved 1F1B, v = 2, 4
micro-batches) once in f32 and once with precision=bf16, trains 3 steps of
each with `par-run -n 2 --pipeline` and prints, per pipeline rank, the peak
bytes of stage inputs held in flight (par-run's "peak in-flight
activations" line: the activations the pipeline stores and sends) and the
ratio bf16 / f32, next to the formula: every cut between blocks carries the
residual stream [micro-batch * seq, d_model], 4 bytes per element in f32
and 2 in bf16 (mixed precision stores elementwise results, the residual
add among them, in the compute type), so the expected ratio is 0.5.

Usage, from the repository root after the build:

    python3 bench/bench_pipeline_activations.py
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "build" / "bin"
GEN = ["--gpt", "--layers", "4", "--batch", "2", "--seq", "32", "--dmodel", "64",
       "--heads", "4", "--vocab", "96", "--dp", "1", "--tp", "1", "--pp", "2"]
OPTS = "optimizer=adamw micro-batches=4 stages=4 schedule=interleaved virtual=2"


def run(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        sys.exit("bench_pipeline_activations: %s failed" % Path(str(cmd[0])).name)
    return p.stdout


def peak_bytes(out):
    line = next(l for l in out.splitlines() if "peak in-flight activations" in l)
    return [int(b) for b in re.findall(r"\((\d+) bytes[;)]", line)]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "gpt.mlir"
        run([sys.executable, REPO / "examples" / "gen_transformer.py", *GEN, "-o", model])
        peaks = {}
        for p in ["f32", "bf16"]:
            art = Path(tmp) / p
            run([BIN / "par-compile", model, "-o", art, "--no-reference",
                 "--options=%s precision=%s" % (OPTS, p)])
            out = run([BIN / "par-run", "-n", "2", art, "--pipeline", "--data",
                       REPO / "README.md", "--steps", "3"])
            peaks[p] = peak_bytes(out)
    print("model    : gen_transformer.py " + " ".join(GEN))
    print("compile  : par-compile --options=\"%s precision=P\" (P = f32, bf16)" % OPTS)
    print("run      : par-run -n 2 ART --pipeline --data README.md --steps 3")
    print("formula  : residual stream [2 x 32, 64] per micro-batch: 16384 bytes f32, "
          "8192 bf16 (ratio 0.5)")
    for r, (a, b) in enumerate(zip(peaks["f32"], peaks["bf16"])):
        ratio = "%.3f" % (b / a) if a else "-"
        print("pipeline rank %d: peak stage inputs in flight f32 %d bytes, bf16 %d bytes, "
              "bf16/f32 %s" % (r, a, b, ratio))


if __name__ == "__main__":
    main()
