#!/usr/bin/env python3
"""Real-size model benchmark (issue 28 part 5): Hugging Face GPT-2 at its
published configuration through par, against PyTorch.

GPT-2 "small" (124M parameters: vocabulary 50,257, 1,024 positions, 12
layers, d=768, 12 heads; transformers' GPT2Config() defaults) with dropout
0 (par has no random ops: a Dropout with p > 0 is refused) and the
library's default attention implementation (`--attn eager` asks for the
eager one). One invocation:

  1. par.import_module(..., dp=2, tp=2, pp=2): the annotated MLIR and the
     module's weights (safetensors); import time;
  2. par-compile: AdamW step, 2 pipeline stages, 1F1B over M micro-batches
     (the import is written for one micro-batch of B sequences of S
     tokens); compile time, with and without the compile cache;
  3. par-run -n 8 --pipeline: 3 steps on one fixed batch (M x B sequences)
     from the module's own weights (--load-weights); step time; the memory
     line (predicted by the plan, measured by the runtime);
  4. torch.optim.AdamW: 3 steps of the same module, weights and batch (the
     full batch's mean loss equals the mean of the micro-batches' mean
     losses: same token count each); step time on the same machine;
  5. the losses agree to 1e-3 relative per step (f32; sharded reductions
     and BLAS sum in other orders; AdamW's 1/(sqrt(v)+eps) magnifies a
     gradient's rounding in the first steps).

Usage (the frontend environment, with python/ on PYTHONPATH):
  PYTHONPATH=python ~/.cache/par/venv-*/bin/python bench/bench_real_model.py \
      [--build build] [--seq 128] [--micro-batch 4] [--micro-batches 4] \
      [--steps 3] [--attn default|eager|sdpa] [--layers 12] [--vocab-divisible-by 128]
Prints the figures recorded in bench/README.md. Not part of the test suite
(a minute of import and compile, minutes of training, about 8 GiB of
memory on 8 ranks).
"""

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import par  # noqa: E402

LR, BETAS, EPS, WD = 1e-4, (0.9, 0.999), 1e-8, 0.01
MIB = 1024.0 * 1024.0


def run(cmd, env=None):
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env)
    if r.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd),
                                          r.stdout[-4000:]))
    return r.stdout, time.time() - t0


class Loss(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.model = m

    def forward(self, ids, labels):
        return self.model(input_ids=ids, labels=labels).loss


def build(args):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    kw = dict(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if args.attn != "default":
        kw["attn_implementation"] = args.attn
    cfg = GPT2Config(n_layer=args.layers, **kw)
    m = GPT2LMHeadModel(cfg)
    return Loss(m), cfg


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--micro-batches", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--vocab-divisible-by", type=int, default=128,
                   help="par-import's vocabulary padding (0: none, the table replicated)")
    p.add_argument("--attn", default="default")
    p.add_argument("--work", default="")
    p.add_argument("--options", default="",
                   help="more par-compile options (e.g. zero=1)")
    args = p.parse_args()
    bin_ = os.path.join(os.path.abspath(args.build), "bin")
    work = args.work or tempfile.mkdtemp(prefix="par-real-")
    os.makedirs(work, exist_ok=True)

    model, cfg = build(args)
    n_params = sum(q.numel() for q in model.parameters())
    impl = getattr(model.model.config, "_attn_implementation", "?")
    print("GPT-2: %d parameters (%.1fM), vocabulary %d, positions %d, %d "
          "layers, d=%d, %d heads, attention %s; S=%d, %d micro-batches of "
          "%d" % (n_params, n_params / 1e6, cfg.vocab_size, cfg.n_positions,
                  cfg.n_layer, cfg.n_embd, cfg.n_head, impl, args.seq,
                  args.micro_batches, args.micro_batch))
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    full_b = args.micro_batch * args.micro_batches
    ids = torch.randint(0, cfg.vocab_size, (full_b, args.seq), generator=g)
    mb = (ids[:args.micro_batch], ids[:args.micro_batch])

    # 1. import
    mlir = os.path.join(work, "gpt2.mlir")
    weights = os.path.join(work, "init.safetensors")
    t0 = time.time()
    r = par.import_module(model, mb, None, name="gpt2", output=mlir,
                          weights=weights, dp=2, tp=2, pp=2,
                          par_opt=os.path.join(bin_, "par-opt"),
                          vocab_divisible_by=args.vocab_divisible_by)
    t_import = time.time() - t0
    pads = "; ".join("%s padded %d -> %d rows" % (n, v[1], v[2])
                     for n, v in r.padded.items()) or "no padding"
    print("import: %.1f s (%d parameter tensors, %d sharded, %d tied; %s; "
          "%.1f MB of MLIR)" % (t_import, len(r.param_names),
                                len(r.shardings), len(r.aliases), pads,
                                os.path.getsize(mlir) / 1e6))

    # 2. compile (a private cache: the first compile is cold, the second
    # hits it)
    options = ("optimizer=adamw lr=%g beta1=%g beta2=%g eps=%g "
               "weight-decay=%g stages=2 micro-batches=%d schedule=1f1b" %
               (LR, BETAS[0], BETAS[1], EPS, WD, args.micro_batches))
    if args.options:
        options += " " + args.options
    art = os.path.join(work, "art")
    cache = os.path.join(work, "cache")
    comp = [os.path.join(bin_, "par-compile"), mlir, "-o", art,
            "--no-reference", "--cache", cache, "--options=" + options]
    out, t_compile = run(comp[:-1] + [comp[-1] + " report=true"])
    _, t_cached = run(comp[:-1] + [comp[-1] + " report=true"])
    print("compile: %.1f s cold, %.1f s from the compile cache" %
          (t_compile, t_cached))
    for line in out.splitlines():
        if re.match(r"par-memory-plan: @gpt2_s\d+_(grad|step|update)", line):
            print("  " + line)
    man = json.load(open(os.path.join(art, "sharded.json")))
    for f in man["functions"]:
        mem = f.get("memory")
        if mem and re.search(r"_s\d+_(grad|update)", f["name"]):
            print("  plan @%s: peak %.1f MiB per device" %
                  (f["name"], mem["peak"] / MIB))

    # 3. par-run: steps on the fixed batch
    P = len(r.param_names)
    np.save(os.path.join(work, "ids.npy"), ids.numpy())
    losses_csv = os.path.join(work, "loss.csv")
    out, t_run = run([os.path.join(bin_, "par-run"), "-n", "8", art,
                      "--pipeline", "--steps", str(args.steps),
                      "--loss-csv", losses_csv, "--load-weights", weights,
                      "--input", "arg%d=%s" % (P, os.path.join(work, "ids.npy")),
                      "--input", "arg%d=%s" % (P + 1, os.path.join(work, "ids.npy"))])
    par_losses = [float(row["loss"]) for row in csv.DictReader(open(losses_csv))]
    times = [float(x) for x in re.findall(r"([0-9.]+) s/step", out)]
    mem = re.findall(r"par-run: memory .*", out)
    print("par-run -n 8 (dp2 x tp2 x pp2): %d steps in %.1f s (with start-up "
          "and weight loading); step times %s" %
          (args.steps, t_run, times or "(not printed)"))
    for line in mem:
        print("  " + line)

    # 4. torch
    ref = build(args)[0]
    ref.load_state_dict(init)
    opt = torch.optim.AdamW(ref.parameters(), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WD)
    torch_losses, t_torch = [], []
    for _ in range(args.steps):
        t0 = time.time()
        opt.zero_grad()
        loss = ref(ids, ids)
        loss.backward()
        opt.step()
        t_torch.append(time.time() - t0)
        torch_losses.append(float(loss.detach()))
    print("torch (1 process, %d threads): step times %s" %
          (torch.get_num_threads(), ["%.2f" % t for t in t_torch]))

    # 5. agreement
    worst = max(abs(a - b) / abs(b) for a, b in zip(par_losses, torch_losses)) \
        if len(par_losses) == len(torch_losses) else float("inf")
    for i, (a, b) in enumerate(zip(par_losses, torch_losses)):
        print("  step %d: par %.6f torch %.6f" % (i + 1, a, b))
    ok = worst <= 1e-3
    print("losses vs torch: max relative difference %.3g (tolerance 1e-3) %s"
          % (worst, "OK" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
