"""Checks par-run --profile's table (profile.test) against the model.

The GEMM rows' operations per step (calls x 2*batch*M*N*K, each row's
shape from its name) must equal the GPT's matmul FLOPs by formula, exactly
(integers): forward 24*T*d^2 per layer (q, k, v, o projections 8Td^2, the
4d-wide MLP 16Td^2) plus attention's two batched products 4*B*S^2*d, plus
the LM head 2*T*d*V; the backward twice the forward (each product's two
input gradients; the embedding is a gather). So a profiler that drops or
double-counts a call fails. Also: each GEMM row's GFLOP/s is its
operations over its time (5%: the printed ms are rounded), the rows' time
is at most the step's, and the outlined kernels appear by name.

usage: profile_check.py OUTPUT L D B S V
"""
import re
import sys


def main():
    text = open(sys.argv[1]).read()
    L, d, B, S, V = (int(x) for x in sys.argv[2:7])
    T = B * S
    expected = 3 * (L * (24 * T * d * d + 4 * B * S * S * d) + 2 * T * d * V)
    step = re.search(r"profile \(rank 0\): steps \d+\.\.\d+, ([0-9.]+) s a step", text)
    if not step:
        print("FAIL: no profile header")
        return 1
    step_ms = float(step.group(1)) * 1e3
    rows = re.findall(r"^  (\S.*?)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%\s+(\S+)$", text, re.M)
    flops, total_ms, kernels, bad = 0.0, 0.0, 0, []
    for name, calls, ms, _, rate in rows:
        calls, ms = float(calls), float(ms)
        total_ms += ms
        kernels += name.startswith("par_kernel_")
        m = re.match(r"(?:batch_)?matmul(?:_mixed)? ([0-9x]+) ", name)
        if not m:
            continue
        dims = [int(x) for x in m.group(1).split("x")]
        b, M, N, K = ([1] + dims) if len(dims) == 3 else dims
        f = calls * 2.0 * b * M * N * K
        flops += f
        if ms >= 0.2 and abs(f / (ms * 1e-3) / 1e9 - float(rate)) > 0.05 * float(rate) + 1:
            bad.append("%s: %s GFLOP/s, but %.0f flops in %.3f ms" % (name, rate, f, ms))
    print("gemm flops per step: %.0f, formula %d" % (flops, expected))
    print("rows: %.3f ms of a %.3f ms step; %d kernel rows" % (total_ms, step_ms, kernels))
    ok = flops == expected and not bad and kernels > 0 and \
        total_ms <= step_ms * 1.01 + 0.01 * len(rows)
    for b in bad:
        print("  " + b)
    print("OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
