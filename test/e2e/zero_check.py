"""Checks ZeRO's communication and memory (zero3.test) against quantities
that do not come from the ZeRO code: the parameters of the model as
written (gen_transformer.py's MLIR: their shapes, names and tensor-parallel
splits, the mesh), the zero=0 program's reports, and the sizes of the
tensors the artifacts' manifests say each rank holds. Never a clock.

psi below is the model's parameter count per rank without ZeRO (each
parameter's elements over the mesh axes its par.sharding splits it on) and
N_d the data-parallel size of the mesh. Bytes of a ring collective over n
ranks, as par's comm report counts them per device: (n-1)/n S for a
reduce-scatter or an all-gather of S bytes, 2 (n-1)/n S for an all-reduce.

  bytes MODEL Z0.txt Z1.txt Z3.txt
      the data-parallel bytes per step (the dp collectives of the gradient
      function and the step in par-compile's comm report): zero=0's
      all-reduce moves 2 (n-1)/n 4 (psi + 1) (the f32 gradients and the
      loss); zero=1's reduce-scatters and all-gathers (n-1)/n 4 psi each,
      the same in all; zero=3's reduce-scatters zero=1's, its forward
      gathers (n-1)/n 4 psi and its backward gathers (n-1)/n 4 psi_bw, psi_bw
      the parameters the backward reads (all but the embedding tables wte,
      wpe and the additive biases *_b, whose derivatives do not read them);
      the optimizer report's zero=3 line agrees with the comm report
  halved F32.txt MIXED.txt
      zero=3's parameter gathers of an f32 compile and of a mixed-precision
      one, in order: each gather in the compute type moves half the bytes
  state MODEL Z0 Z2 Z3
      the model state per rank read off each artifact's manifest (the local
      shapes of the step's parameter and optimizer-state inputs and of the
      gradient function's gradient results), bytes: zero=0 holds 4 psi of
      parameters, 4 psi of gradients and 8 psi of Adam state; zero=2 (and
      zero=1, the same program) 4 psi / N_d of gradients (no rank holds a
      reduced gradient whole: ZeRO-2's partition) and 8 psi / N_d of state;
      zero=3 also 4 psi / N_d of parameters
  memory MODEL Z3 Z3.txt
      a mixed-precision zero=3 compile: the model state per rank of its
      manifest is the paper's (2 + 2 + 12) psi / N_d, and the optimizer
      report's line states the manifest's figures
"""
import json
import re
import sys
from math import prod

BYTES = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2, "i64": 8, "i32": 4,
         "i8": 1, "i1": 1}
# Parameters whose derivative does not read them (gen_transformer.py's
# names): the embedding tables (a gather's gradient is a scatter of dY)
# and the additive biases (d(x + b)/dx = 1).
NOT_READ_BY_BACKWARD = re.compile(r"^(wte|wpe|.*_b)$")


def model(path):
    """The parameters of the model's first function: [(name, elements per
    rank without ZeRO)], and the mesh {axis: size}."""
    text = open(path).read()
    mesh = {a: int(n) for a, n in re.findall(
        r'"(\w+)"=(\d+)', re.search(r"par\.mesh @\w+ \[(.*)\]", text).group(1))}
    first = text[text.index("func.func"):]
    first = first[:first.index(") ->")]
    params = []
    for m in re.finditer(r"^\s*%(\w+): tensor<([0-9x]+)x(?:f32|bf16|f16)> "
                         r"\{(.*)\},?$", first, re.M):
        attrs = m.group(3)
        if "par.param" not in attrs:
            continue
        dims = [int(d) for d in m.group(2).split("x")]
        n = prod(dims)
        s = re.search(r"par\.sharding<@\w+, \[(.*?)\]>", attrs)
        if s:
            for axis in re.findall(r'"(\w+)"', s.group(1)):
                n //= mesh[axis]
        params.append((m.group(1), n))
    assert params, "no par.param arguments in " + path
    return params, mesh


def psi_of(path):
    params, mesh = model(path)
    psi = sum(n for _, n in params)
    psi_bw = sum(n for name, n in params
                 if not NOT_READ_BY_BACKWARD.match(name))
    return psi, psi_bw, mesh["dp"]


def dp_bytes(path):
    """Per kind ("reduce_scatter", "all_gather forward", "all_reduce",
    "bucket_all_reduce", ...): the bytes of the collectives over ["dp"] of
    the gradient function and the step in the comm report."""
    out = {}
    fn = None
    text = open(path).read()
    for line in text.splitlines():
        m = re.match(r"par-comm-report: @(\w+)", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r'\s+par\.(\w+) axes=\["dp"\] n=\d+ \S+ .*?'
                     r'(?:\(zero=3 (\w+)\))?: (\d+) bytes', line)
        if m and fn and (fn.endswith("_grad") or fn.endswith("_step")):
            kind = m.group(1) + (" " + m.group(2) if m.group(2) else "")
            out[kind] = out.get(kind, 0) + int(m.group(3))
    assert out, "no dp collectives in " + path
    return out, text


def ring(n, elements, scale=1):
    """Bytes per device of a ring reduce-scatter or all-gather (scale 2: an
    all-reduce) of `elements` f32 values over n ranks."""
    assert 4 * elements * (n - 1) % n == 0
    return scale * 4 * elements * (n - 1) // n


def expect(what, got, want):
    if got != want:
        sys.exit("%s: %d, expected %d" % (what, got, want))


def check_bytes(mlir, z0_txt, z1_txt, z3_txt):
    psi, psi_bw, nd = psi_of(mlir)
    z0, _ = dp_bytes(z0_txt)
    z1, _ = dp_bytes(z1_txt)
    z3, text3 = dp_bytes(z3_txt)
    if set(z0) - {"all_reduce", "bucket_all_reduce"}:
        sys.exit("zero=0 reduces over dp with %s, not all-reduces" %
                 ", ".join(sorted(z0)))
    total0, total1 = sum(z0.values()), sum(z1.values())
    expect("zero=0 dp all-reduce bytes", total0, ring(nd, psi + 1, 2))
    rs1, ag1 = z1["reduce_scatter"], z1["all_gather"]
    expect("zero=1 reduce_scatter bytes", rs1, ring(nd, psi))
    expect("zero=1 all_gather bytes", ag1, ring(nd, psi))
    expect("zero=1 dp bytes against zero=0's", total1, total0)
    if "all_gather" in z3:
        sys.exit("zero=3 gathers a parameter outside its uses")
    rs3, fw = z3["reduce_scatter"], z3["all_gather forward"]
    bw = z3.get("all_gather backward", 0)
    expect("zero=3 reduce_scatter bytes", rs3, ring(nd, psi))
    expect("zero=3 forward gather bytes", fw, ring(nd, psi))
    expect("zero=3 backward gather bytes", bw, ring(nd, psi_bw))
    m = re.search(r"= (\d+) bytes, (\d+\.\d+)x zero=1's (\d+)", text3)
    if not m:
        sys.exit("no zero=3 line in the optimizer report")
    expect("the optimizer report's zero=3 bytes", int(m.group(1)),
           rs3 + fw + bw)
    expect("the optimizer report's zero=1 bytes", int(m.group(3)), rs1 + ag1)
    print("model: psi %d per rank, %d read by the backward, N_d %d"
          % (psi, psi_bw, nd))
    print("dp bytes per step: zero=0 %d (all-reduce), zero=1 %d "
          "(reduce_scatter %d + all_gather %d + the loss %d), zero=3 %d "
          "(reduce_scatter %d + all_gather forward %d + backward %d)"
          % (total0, total1, rs1, ag1, total1 - rs1 - ag1, rs3 + fw + bw,
             rs3, fw, bw))
    print("ratio: 1.50x as the paper counts (3 psi / 2 psi), %.2fx measured "
          "(only what the backward reads is gathered again)"
          % ((rs3 + fw + bw) / (rs1 + ag1)))


def check_halved(f32_txt, mixed_txt):
    pat = re.compile(r'\s+par\.all_gather axes=\["dp"\] n=\d+ (\w+) '
                     r'.*\(zero=3 (\w+)\): (\d+) bytes')
    a = [pat.match(l) for l in open(f32_txt).read().splitlines()]
    b = [pat.match(l) for l in open(mixed_txt).read().splitlines()]
    a, b = [m for m in a if m], [m for m in b if m]
    assert len(a) == len(b) and a, "%d and %d gathers" % (len(a), len(b))
    half = 0
    for x, y in zip(a, b):
        assert x.group(2) == y.group(2)
        if y.group(1) in ("bf16", "f16"):
            assert 2 * int(y.group(3)) == int(x.group(3)), \
                x.group(0) + " / " + y.group(0)
            half += 1
        else:
            assert int(y.group(3)) == int(x.group(3))
    total_a = sum(int(m.group(3)) for m in a)
    total_b = sum(int(m.group(3)) for m in b)
    print("%d of %d parameter gathers in the compute type, at half the "
          "bytes: %d bytes instead of %d" % (half, len(a), total_b, total_a))


def held(artifact):
    """(parameters, gradients, optimizer state) bytes per rank, from the
    local shapes of the sharded manifest: the step's inputs are the data
    (tokens, targets), the P parameters, Adam's two moments per parameter
    and a step count; the gradient function returns the loss and the P
    gradients."""
    fns = {f["name"]: f for f in
           json.load(open(artifact + "/sharded.json"))["functions"]}
    step = next(f for n, f in fns.items() if n.endswith("_step"))
    grad = fns[step["roles"]["grad"]]
    size = lambda t: BYTES[t["dtype"]] * prod(t["local_shape"])
    P = len(grad["outputs"]) - 1
    params = step["inputs"][2:2 + P]
    state = step["inputs"][2 + P:2 + 3 * P]
    rest = step["inputs"][2 + 3 * P:]
    assert all(t["local_shape"] == [] for t in rest), rest
    return (sum(map(size, params)), sum(map(size, grad["outputs"][1:])),
            sum(map(size, state)))


def check_state(mlir, z0, z2, z3):
    psi, _, nd = psi_of(mlir)
    want = {"zero=0": (4 * psi, 4 * psi, 8 * psi),
            "zero=2": (4 * psi, 4 * psi // nd, 8 * psi // nd),
            "zero=3": (4 * psi // nd, 4 * psi // nd, 8 * psi // nd)}
    for level, art in (("zero=0", z0), ("zero=2", z2), ("zero=3", z3)):
        got = held(art)
        ok = got == want[level]
        print("%s: parameters %d + gradients %d + optimizer state %d bytes "
              "per rank; psi %d, N_d %d: %s" % (level, *got, psi, nd,
                                               "OK" if ok else
                                               "FAIL (expected %d %d %d)"
                                               % want[level]))


def check_memory(mlir, z3, z3_txt):
    psi, _, nd = psi_of(mlir)
    p, g, s = held(z3)
    total = p + g + s
    m = re.search(r"model state per rank: parameters (\d+) \+ gradients "
                  r"(\d+) \+ optimizer state (\d+) = (\d+) bytes",
                  open(z3_txt).read())
    if not m:
        sys.exit("no model state line in " + z3_txt)
    expect("the report's model state", int(m.group(4)), total)
    assert tuple(map(int, m.groups()[:3])) == (p, g, s), (m.groups(), p, g, s)
    paper = (2 + 2 + 12) * psi / nd
    print("model state per rank: %d bytes (parameters %d + gradients %d + "
          "state %d); the paper's (2+2+12) psi/N_d = %.0f (psi %d, N_d %d): "
          "%.3f" % (total, p, g, s, paper, psi, nd, total / paper))
    assert abs(total / paper - 1) < 1e-12


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "bytes":
        check_bytes(*args)
    elif cmd == "halved":
        check_halved(*args)
    elif cmd == "state":
        check_state(*args)
    elif cmd == "memory":
        check_memory(*args)
    else:
        sys.exit("unknown command " + cmd)


main()
