"""Checks par-compress-gradients on real ranks against a numpy reference.

The model is a linear probe, loss = sum_{b,i} w_i * x_{b,i}, with x [n, N]
split over "dp" (one row per rank) and w [N]: the local gradient of rank r
is exactly x_r, so SGD with lr = 1 from w = 0 makes w_1 = -(what the
compressed all-reduce delivered), bit for bit. The reference below
implements the exchange as docs/RationaleCompression.md states it, with
the same f32 operations in the same order (sequential sums over a chunk and
over ranks, x / s, roundeven), so int8, sign and top-k must match exactly;
the probe is compiled with fp-reassociate=false, the strict order that
this bit-exact check needs (the default reassociates reductions, which
changes the last bit of a chunk's mean: docs/RationaleCPUKernels.md);
so must the error-feedback buffers (results 2 and 3: e1 [n, P], e2 [n, M]).

  exact   --method M --ranks n --size N [--chunk C] [--ratio R]
          one step, decompressed sum and buffers bit-exact
  telescope ... --steps T
          T steps with the same x: the sum of everything delivered equals
          T * sum_r x_r minus what the buffers hold at the end (per element;
          f32 rounding of w's accumulation: rtol 1e-5 of the largest value)
  warmup  ... --warmup W
          W + 1 steps: W uncompressed all-reduces (buffers untouched), then
          the first compressed one, whose buffers match the reference
          bit-exact (the delivered total to rtol 1e-6: the ring's sum order)
  bytes   ... --steps T
          the runtime's bytes per step on the wire against the formula
          (ratio 1.00 +- 0.02) and against the fp32 ring all-reduce of the
          same gradient; prints the ratio for FileCheck
"""
import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np

F = np.float32


def model(n, N):
    return f"""module {{
  par.mesh @mesh ["dp"={n}]
  func.func @probe(%x: tensor<{n}x{N}xf32> {{par.sharding = #par.sharding<@mesh, [{{"dp"}}, {{}}]>}},
                   %w: tensor<{N}xf32> {{par.param, par.init = #par.init<zeros>}}) -> tensor<f32> {{
    %c0 = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<f32>
    %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %l = linalg.generic {{indexing_maps = [affine_map<(b, i) -> (b, i)>, affine_map<(b, i) -> (i)>, affine_map<(b, i) -> ()>],
                         iterator_types = ["reduction", "reduction"]}}
        ins(%x, %w : tensor<{n}x{N}xf32>, tensor<{N}xf32>) outs(%z : tensor<f32>) {{
      ^bb0(%a: f32, %b: f32, %o: f32):
        %m = arith.mulf %a, %b : f32
        %s = arith.addf %o, %m : f32
        linalg.yield %s : f32
    }} -> tensor<f32>
    return %l : tensor<f32>
  }}
}}
"""


# ---- the reference ---------------------------------------------------------

def scales(e, method, C):
    J = e.size // C
    e2 = np.abs(e.reshape(J, C))
    if method == "int8":
        return (e2.max(axis=1) / F(127)).astype(F)
    acc = np.zeros(J, F)
    for c in range(C):  # sequential, as the generic's reduction loop
        acc = (acc + e2[:, c]).astype(F)
    return (acc / F(C)).astype(F)


def encode(e, s, method, C):
    J = e.size // C
    e2 = e.reshape(J, C)
    if method == "int8":
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.rint((e2 / s[:, None]).astype(F))
        r = np.clip(r, F(-127), F(127))
        r[np.isnan(r)] = 0
        return r.astype(np.int8)
    return (e2 >= 0)  # bits, unpacked


def decode(codes, s, method):
    if method == "int8":
        return (codes.astype(F) * s[:, None]).astype(F)
    return np.where(codes, s[:, None], -s[:, None]).astype(F)


def two_phase(xs, e1s, e2s, method, C):
    n, P = xs.shape
    M = P // n
    J = M // C
    codes, sc, new_e1 = [], [], []
    for r in range(n):
        e = (xs[r] + e1s[r]).astype(F)
        s = scales(e, method, C)
        q = encode(e, s, method, C)
        new_e1.append((e - decode(q, s, method).reshape(-1)).astype(F))
        codes.append(q)
        sc.append(s)
    out, new_e2 = np.zeros(P, F), []
    for j in range(n):  # owner j
        o = np.zeros((J, C), F)
        for r in range(n):
            o = (o + decode(codes[r][j * J:(j + 1) * J],
                            sc[r][j * J:(j + 1) * J], method)).astype(F)
        e = (o.reshape(-1) + e2s[j]).astype(F)
        s = scales(e, method, C)
        q = encode(e, s, method, C)
        d = decode(q, s, method).reshape(-1)
        new_e2.append((e - d).astype(F))
        out[j * M:(j + 1) * M] = d
    return out, np.stack(new_e1), np.stack(new_e2)


def topk(xs, e1s, R):
    n, N = xs.shape
    k = min(N, max(1, math.ceil(R * N)))
    out, new_e1 = np.zeros(N, F), []
    for r in range(n):
        e = (xs[r] + e1s[r]).astype(F)
        bits = e.view(np.int32) & 0x7fffffff
        sel = np.sort(np.argsort(-bits.astype(np.int64), kind="stable")[:k])
        out[sel] = (out[sel] + e[sel]).astype(F)
        left = e.copy()
        left[sel] = 0
        new_e1.append(left)
    return out, np.stack(new_e1)


def padded(N, n, C):
    unit = n * C
    return (N + unit - 1) // unit * unit


# ---- running par -----------------------------------------------------------

def build(a, work):
    src = os.path.join(work, "probe.mlir")
    with open(src, "w") as f:
        f.write(model(a.ranks, a.size))
    opts = (f"optimizer=sgd lr=1 compress={a.method} compress-chunk={a.chunk} "
            f"compress-ratio={a.ratio} compress-warmup={a.warmup} "
            f"bucket-bytes=0 fp-reassociate=false")
    art = os.path.join(work, "art")
    subprocess.run([a.par_compile, src, f"--options={opts}", "-o", art],
                   check=True, stdout=subprocess.DEVNULL)
    return art


def inputs(a, work):
    rng = np.random.default_rng(a.seed)
    # Magnitudes that differ from chunk to chunk, zeros, ties and an
    # all-zero chunk, so the scales, the rounding and the tie rule all show.
    x = rng.standard_normal((a.ranks, a.size)).astype(F)
    x *= np.exp(rng.uniform(-4, 4, (a.ranks, 1 + a.size // 64))).repeat(
        64, axis=1)[:, :a.size].astype(F)
    x[:, 3:40] = 0
    x[:, 50:60] = F(0.5)
    x[0, :a.chunk] = 0
    xp = os.path.join(work, "x.npy")
    np.save(xp, x)
    return x, xp


def run(a, art, xp, out, steps):
    r = subprocess.run([a.par_run, "-n", str(a.ranks), art, "--entry",
                        "probe_step", "--input", f"arg0={xp}", "--steps",
                        str(steps), "--output", out],
                       check=True, capture_output=True, text=True)
    return r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["exact", "telescope", "warmup", "bytes"])
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--method", required=True)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--size", type=int, default=1237)
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--ratio", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", required=True)
    p.add_argument("--par-compile", default="par-compile")
    p.add_argument("--par-run", default="par-run")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    art = build(a, a.work)
    x, xp = inputs(a, a.work)
    out = os.path.join(a.work, "out")
    steps = {"exact": 1, "warmup": a.warmup + 1}.get(a.what, a.steps)
    log = run(a, art, xp, out, steps)
    res = [np.load(os.path.join(out, f"result{i}.npy"))
           for i in range(len([f for f in os.listdir(out)
                               if f.startswith("result")]))]
    n, N, C = a.ranks, a.size, a.chunk
    two = a.method != "topk"
    P = padded(N, n, C) if two else N
    xs = np.zeros((n, P), F)
    xs[:, :N] = x
    delivered = -res[1]  # w_T = -(sum of what was delivered)

    if a.what == "exact":
        if two:
            ref, e1, e2 = two_phase(xs, np.zeros((n, P), F),
                                    np.zeros((n, P // n), F), a.method, C)
            got = [delivered, res[2], res[3]]
            want = [ref[:N], e1, e2]
        else:
            ref, e1 = topk(xs, np.zeros((n, N), F), a.ratio)
            got, want = [delivered, res[2]], [ref, e1]
        for name, g, w in zip(["sum", "e1", "e2"], got, want):
            if g.shape != w.shape or not np.array_equal(g, w):
                bad = np.flatnonzero(g.reshape(-1) != w.reshape(-1)) \
                    if g.shape == w.shape else []
                sys.exit(f"{a.method}: {name} differs from the reference "
                         f"(shape {g.shape} vs {w.shape}, {len(bad)} "
                         f"elements, first {bad[:5]})")
        print(f"{a.method} n={n} N={N} chunk={C}: sum and error buffers "
              f"bit-exact ({np.count_nonzero(ref)} nonzero)")
    elif a.what == "warmup":
        W = a.warmup
        if two:
            ref, e1, e2 = two_phase(xs, np.zeros((n, P), F),
                                    np.zeros((n, P // n), F), a.method, C)
            bufs, want_bufs = [res[2], res[3]], [e1, e2]
        else:
            ref, e1 = topk(xs, np.zeros((n, N), F), a.ratio)
            bufs, want_bufs = [res[2]], [e1]
        want = W * x.sum(axis=0, dtype=np.float64) + ref[:N]
        err = np.abs(delivered - want).max() / np.abs(want).max()
        exact = all(np.array_equal(g, w) for g, w in zip(bufs, want_bufs))
        counter = res[-1]
        print(f"{a.method} n={n} warmup={W}: {W} uncompressed steps then a "
              f"compressed one: delivered max rel diff {err:.1e}, buffers "
              f"{'bit-exact' if exact else 'DIFFER'}, step counter "
              f"{float(counter):g}")
        if not (err < 1e-6 and exact and float(counter) == W + 1):
            sys.exit("warm-up does not behave")
    elif a.what == "telescope":
        T = a.steps
        held = res[2].sum(axis=0)[:N]
        if two:
            held = held + res[3].reshape(-1)[:N]
        want = (F(T) * x.sum(axis=0, dtype=np.float64) - held).astype(np.float64)
        err = np.abs(delivered.astype(np.float64) - want).max() / \
            np.abs(want).max()
        print(f"{a.method} n={n} T={T}: sum of delivered = T * sum of "
              f"gradients - final error, max rel diff {err:.1e}")
        if not err < 1e-5:
            sys.exit("error feedback does not telescope")
    else:
        m = re.search(r"rank 0: [0-9.]+ s, ([0-9.e+]+) bytes sent", log)
        measured = float(m.group(1)) / a.steps
        # The loss's all_reduce (4 bytes) besides the exchange.
        ring = 2 * (n - 1) / n
        loss = ring * 4
        fp32 = ring * 4 * N
        if two:
            per = 1 if a.method == "int8" else 1 / 8
            formula = ring * P * (per + 4 / C)
        else:
            k = min(N, max(1, math.ceil(a.ratio * N)))
            formula = (n - 1) * k * 8
        vs_formula = (measured - loss) / formula
        print(f"{a.method} n={n} N={N}: {measured - loss:.0f} bytes per step "
              f"on the wire, formula {formula:.0f} (ratio {vs_formula:.3f}); "
              f"fp32 ring all-reduce {fp32:.0f}: {fp32 / (measured - loss):.1f}x "
              f"fewer")
        if abs(vs_formula - 1) > 0.02:
            sys.exit("measured bytes differ from the formula")
        target = {"int8": 3.9, "sign": 25, "topk": 100}[a.method]
        if a.method == "topk" and a.ratio > 0.001:
            target = 1 / (n * a.ratio) * 0.98
        if fp32 / (measured - loss) < target:
            sys.exit(f"{a.method}: fewer than {target}x fewer bytes than the "
                     f"fp32 ring all-reduce")


if __name__ == "__main__":
    main()
