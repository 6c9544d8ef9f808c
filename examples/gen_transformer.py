#!/usr/bin/env python3
"""Generate an MLIR module holding a stack of pre-LayerNorm transformer blocks.

The module contains a single ``func.func @forward`` that takes the input
activation ``x : tensor<BxSxDx<dtype>>`` as argument 0, followed by the
parameters of every layer (distinct per layer), followed by the parameters of
a final LayerNorm.  It returns the final activation.

Only the ops the par compiler has sharding rules for are used:

  func.func / func.return, arith.constant (scalars only), tensor.empty,
  tensor.expand_shape, tensor.collapse_shape, linalg.fill, linalg.matmul,
  linalg.transpose, linalg.softmax and linalg.generic (projected-permutation
  indexing maps; bodies made of arith/math scalar ops, linalg.index,
  arith.cmpi and arith.select).

Per block (pre-LN, forward only):

  h   = x + Wo . attn(LN1(x) . Wq, LN1(x) . Wk, LN1(x) . Wv)   (causal)
  out = h + W2 . gelu(LN2(h) . W1)

Unless ``--no-par`` is given, the module carries par sharding annotations for
a 2-D ("dp", "tp") mesh: x and the result are batch-sharded over "dp",
Wq/Wk/Wv/W1 are column-split over "tp" and Wo/W2 are row-split over "tp"
(Megatron-style tensor parallelism).  LayerNorm parameters are replicated.

Usage:
  python3 examples/gen_transformer.py --layers 2 --batch 4 --seq 16 \\
      --dmodel 64 --heads 8 --dp 2 --tp 4 -o out.mlir

Standard library only.
"""

import argparse
import math
import sys

# Value used by the causal mask for masked-out scores, per element type.  It
# has to be representable in the type (f16 tops out at 65504).
MASK_VALUE = {"f16": -1.0e4, "bf16": -1.0e9, "f32": -1.0e9, "f64": -1.0e9}
LN_EPS = 1.0e-5


def fmt_float(v):
    """Format a Python float as an MLIR float literal."""
    return "%.9e" % v


def init_attr(init):
    """The #par.init attribute of an initialiser named "zeros", "ones" or
    "uniform:<scale>" (the manifest's spelling, which bench and the parity
    tests read back)."""
    if init in ("zeros", "ones"):
        return "#par.init<%s>" % init
    kind, _, scale = init.partition(":")
    assert kind == "uniform", init
    return "#par.init<uniform, %s>" % fmt_float(float(scale))


class Emitter:
    """Accumulates the body of @forward and hands out fresh SSA names."""

    def __init__(self, dtype):
        self.dt = dtype
        self.lines = []
        self.counter = 0
        self.consts = {}  # literal -> SSA name, for scalar constants
        self.const_lines = []  # hoisted to the top of the function body

    # -- helpers ---------------------------------------------------------
    def fresh(self, hint="v"):
        self.counter += 1
        return "%%%s%d" % (hint, self.counter)

    def emit(self, line, indent=4):
        self.lines.append(" " * indent + line)

    def comment(self, text):
        self.emit("// " + text)

    def ty(self, shape):
        """Ranked tensor type of the element type for `shape`."""
        if not shape:
            return "tensor<%s>" % self.dt
        return "tensor<%sx%s>" % ("x".join(str(d) for d in shape), self.dt)

    def const(self, value):
        """A scalar arith.constant of the element type.

        Constants are deduplicated and hoisted to the top of the function
        body, so any later op (or generic region) may use them.
        """
        key = fmt_float(value)
        if key not in self.consts:
            name = "%%cst%d" % len(self.consts)
            self.const_lines.append("    %s = arith.constant %s : %s"
                                    % (name, key, self.dt))
            self.consts[key] = name
        return self.consts[key]

    # -- tensor construction -----------------------------------------------
    def empty(self, shape):
        name = self.fresh("empty")
        self.emit("%s = tensor.empty() : %s" % (name, self.ty(shape)))
        return name

    def zeros(self, shape):
        """tensor.empty + linalg.fill 0.0: init for matmuls / reductions."""
        zero = self.const(0.0)
        e = self.empty(shape)
        name = self.fresh("zero")
        t = self.ty(shape)
        self.emit("%s = linalg.fill ins(%s : %s) outs(%s : %s) -> %s"
                  % (name, zero, self.dt, e, t, t))
        return name

    # -- reshapes / layout -------------------------------------------------
    def collapse(self, src, src_shape, reassoc):
        dst_shape = [math.prod(src_shape[i] for i in grp) for grp in reassoc]
        name = self.fresh("col")
        self.emit("%s = tensor.collapse_shape %s %s : %s into %s"
                  % (name, src, fmt_reassoc(reassoc), self.ty(src_shape),
                     self.ty(dst_shape)))
        return name, dst_shape

    def expand(self, src, src_shape, reassoc, dst_shape):
        for i, grp in enumerate(reassoc):
            assert math.prod(dst_shape[j] for j in grp) == src_shape[i]
        name = self.fresh("exp")
        self.emit("%s = tensor.expand_shape %s %s output_shape [%s] : %s into %s"
                  % (name, src, fmt_reassoc(reassoc),
                     ", ".join(str(d) for d in dst_shape),
                     self.ty(src_shape), self.ty(dst_shape)))
        return name

    def transpose(self, src, src_shape, perm):
        dst_shape = [src_shape[p] for p in perm]
        init = self.empty(dst_shape)
        name = self.fresh("tr")
        self.emit("%s = linalg.transpose ins(%s : %s) outs(%s : %s) permutation = [%s]"
                  % (name, src, self.ty(src_shape), init, self.ty(dst_shape),
                     ", ".join(str(p) for p in perm)))
        return name, dst_shape

    # -- compute -----------------------------------------------------------
    def matmul(self, a, a_shape, b, b_shape):
        (m, k), (k2, n) = a_shape, b_shape
        assert k == k2
        init = self.zeros([m, n])
        name = self.fresh("mm")
        self.emit("%s = linalg.matmul ins(%s, %s : %s, %s) outs(%s : %s) -> %s"
                  % (name, a, b, self.ty(a_shape), self.ty(b_shape), init,
                     self.ty([m, n]), self.ty([m, n])))
        return name, [m, n]

    def softmax(self, src, shape, dim):
        init = self.empty(shape)
        name = self.fresh("sm")
        t = self.ty(shape)
        self.emit("%s = linalg.softmax dimension(%d) ins(%s : %s) outs(%s : %s) -> %s"
                  % (name, dim, src, t, init, t, t))
        return name

    def generic(self, ins, out, out_shape, maps, iters, body, hint="g"):
        """Emit a linalg.generic.

        ins:   list of (value, shape) operands.
        out:   init value of the single result (shape out_shape).
        maps:  one affine_map string per operand (ins then out), each
               written as the result list over dims d0..dn-1.
        iters: iterator types, "parallel" / "reduction".
        body:  function(in_args, out_arg) -> (body lines, yielded SSA name);
               it receives the block argument names (see class Body).
        """
        n = len(iters)
        dims = ", ".join("d%d" % i for i in range(n))
        map_strs = ["affine_map<(%s) -> (%s)>" % (dims, m) for m in maps]
        name = self.fresh(hint)
        ins_vals = ", ".join(v for v, _ in ins)
        ins_tys = ", ".join(self.ty(s) for _, s in ins)
        self.emit("%s = linalg.generic {indexing_maps = [%s], iterator_types = [%s]}"
                  % (name, ", ".join(map_strs),
                     ", ".join('"%s"' % it for it in iters)))
        self.emit("    ins(%s : %s) outs(%s : %s) {" % (ins_vals, ins_tys, out,
                                                         self.ty(out_shape)))
        in_args = ["%%in%d" % i for i in range(len(ins))]
        out_arg = "%out"
        bb_args = ", ".join("%s: %s" % (a, self.dt) for a in in_args + [out_arg])
        self.emit("^bb0(%s):" % bb_args, indent=4)
        body_lines, result = body(in_args, out_arg)
        for line in body_lines:
            self.emit(line, indent=8)
        self.emit("linalg.yield %s : %s" % (result, self.dt), indent=8)
        self.emit("} -> %s" % self.ty(out_shape))
        return name


def fmt_reassoc(reassoc):
    return "[" + ", ".join("[" + ", ".join(str(i) for i in g) + "]"
                           for g in reassoc) + "]"


def identity_map(n):
    return ", ".join("d%d" % i for i in range(n))


class Body:
    """Tiny helper to write generic bodies: SSA names local to the region."""

    def __init__(self, dt):
        self.dt = dt
        self.lines = []
        self.n = 0

    def op(self, opname, *operands, ty=None):
        """A scalar op `opname` on `operands`, all of type `ty` (default dtype)."""
        self.n += 1
        name = "%%b%d" % self.n
        self.lines.append("%s = %s %s : %s"
                          % (name, opname, ", ".join(operands), ty or self.dt))
        return name

    def index(self, dim):
        """linalg.index: the iteration index along loop dimension `dim`."""
        self.n += 1
        name = "%%b%d" % self.n
        self.lines.append("%s = linalg.index %d : index" % (name, dim))
        return name

    def cmpi(self, pred, lhs, rhs):
        """arith.cmpi on index operands, yielding an i1."""
        self.n += 1
        name = "%%b%d" % self.n
        self.lines.append("%s = arith.cmpi %s, %s, %s : index"
                          % (name, pred, lhs, rhs))
        return name


# ---------------------------------------------------------------------------
# Model pieces
# ---------------------------------------------------------------------------

def layer_norm(em, x, shape, gamma, beta):
    """LayerNorm over the last dim of a rank-3 activation [B, S, D]."""
    b, s, d = shape
    dt = em.dt
    em.comment("LayerNorm over D")
    inv_d = em.const(1.0 / d)
    eps = em.const(LN_EPS)
    red_iters = ["parallel", "parallel", "reduction"]
    par_iters = ["parallel"] * 3

    # sum_d x
    acc = em.zeros([b, s])

    def sum_body(ins, out):
        bd = Body(dt)
        r = bd.op("arith.addf", ins[0], out)
        return bd.lines, r
    xsum = em.generic([(x, shape)], acc, [b, s], [identity_map(3), "d0, d1"],
                      red_iters, sum_body, hint="sum")

    # centered = x - sum / D
    def center_body(ins, out):
        bd = Body(dt)
        mean = bd.op("arith.mulf", ins[1], inv_d)
        r = bd.op("arith.subf", ins[0], mean)
        return bd.lines, r
    cinit = em.empty(shape)
    centered = em.generic([(x, shape), (xsum, [b, s])], cinit, shape,
                          [identity_map(3), "d0, d1", identity_map(3)],
                          par_iters, center_body, hint="ctr")

    # sum_d centered^2
    acc2 = em.zeros([b, s])

    def sq_body(ins, out):
        bd = Body(dt)
        sq = bd.op("arith.mulf", ins[0], ins[0])
        r = bd.op("arith.addf", sq, out)
        return bd.lines, r
    vsum = em.generic([(centered, shape)], acc2, [b, s],
                      [identity_map(3), "d0, d1"], red_iters, sq_body,
                      hint="var")

    # y = centered * rsqrt(var/D + eps) * gamma + beta
    def norm_body(ins, out):
        bd = Body(dt)
        var = bd.op("arith.mulf", ins[1], inv_d)
        vareps = bd.op("arith.addf", var, eps)
        rstd = bd.op("math.rsqrt", vareps)
        xn = bd.op("arith.mulf", ins[0], rstd)
        xg = bd.op("arith.mulf", xn, ins[2])
        r = bd.op("arith.addf", xg, ins[3])
        return bd.lines, r
    ninit = em.empty(shape)
    return em.generic([(centered, shape), (vsum, [b, s]), (gamma, [d]),
                       (beta, [d])], ninit, shape,
                      [identity_map(3), "d0, d1", "d2", "d2", identity_map(3)],
                      par_iters, norm_body, hint="ln")


def add(em, a, b_, shape):
    """Elementwise residual add (as a linalg.generic)."""
    def add_body(ins, out):
        bd = Body(em.dt)
        r = bd.op("arith.addf", ins[0], ins[1])
        return bd.lines, r
    init = em.empty(shape)
    n = len(shape)
    return em.generic([(a, shape), (b_, shape)], init, shape,
                      [identity_map(n)] * 3, ["parallel"] * n, add_body,
                      hint="res")


def linear(em, x3, shape3, w, w_shape):
    """[B, S, K] x [K, N] -> [B, S, N] via collapse / matmul / expand."""
    b, s, _ = shape3
    x2, shape2 = em.collapse(x3, shape3, [[0, 1], [2]])
    y2, yshape = em.matmul(x2, shape2, w, w_shape)
    out_shape = [b, s, yshape[1]]
    return em.expand(y2, yshape, [[0, 1], [2]], out_shape), out_shape


def attention(em, x, shape, p, heads):
    """Causal multi-head self-attention (without the residual add)."""
    b, s, d = shape
    dh = d // heads
    dt = em.dt
    em.comment("attention: Q, K, V projections")
    # One collapse of the normalized input feeds the three projections.
    x2, shape2 = em.collapse(x, shape, [[0, 1], [2]])
    heads_t = []
    for wname in ("wq", "wk", "wv"):
        y2, yshape = em.matmul(x2, shape2, p[wname], [d, d])
        y3 = em.expand(y2, yshape, [[0, 1], [2]], [b, s, d])
        y4 = em.expand(y3, [b, s, d], [[0], [1], [2, 3]], [b, s, heads, dh])
        yt, tshape = em.transpose(y4, [b, s, heads, dh], [0, 2, 1, 3])
        heads_t.append(yt)
    q, k, v = heads_t
    hshape = [b, heads, s, dh]
    sshape = [b, heads, s, s]

    em.comment("attention: scores = q . k^T  (b, h, s, t, d)")
    sinit = em.zeros(sshape)

    def mac_body(ins, out):
        bd = Body(dt)
        m = bd.op("arith.mulf", ins[0], ins[1])
        r = bd.op("arith.addf", out, m)
        return bd.lines, r
    scores = em.generic([(q, hshape), (k, hshape)], sinit, sshape,
                        ["d0, d1, d2, d4", "d0, d1, d3, d4", "d0, d1, d2, d3"],
                        ["parallel"] * 4 + ["reduction"], mac_body,
                        hint="scores")

    em.comment("attention: scale by 1/sqrt(Dh) and apply the causal mask")
    scale = em.const(1.0 / math.sqrt(dh))
    neg = em.const(MASK_VALUE[dt])

    def mask_body(ins, out):
        bd = Body(dt)
        row = bd.index(2)   # query position s
        col = bd.index(3)   # key position t
        future = bd.cmpi("ugt", col, row)   # t > s: key is in the future
        scaled = bd.op("arith.mulf", ins[0], scale)
        r = bd.op("arith.select", future, neg, scaled)
        return bd.lines, r
    minit = em.empty(sshape)
    masked = em.generic([(scores, sshape)], minit, sshape,
                        [identity_map(4), identity_map(4)], ["parallel"] * 4,
                        mask_body, hint="masked")

    em.comment("attention: softmax over keys")
    probs = em.softmax(masked, sshape, 3)

    em.comment("attention: context = p . v  (b, h, s, t, d)")
    cinit = em.zeros(hshape)
    ctx = em.generic([(probs, sshape), (v, hshape)], cinit, hshape,
                     ["d0, d1, d2, d3", "d0, d1, d3, d4", "d0, d1, d2, d4"],
                     ["parallel", "parallel", "parallel", "reduction",
                      "parallel"], mac_body, hint="ctx")

    em.comment("attention: merge heads and output projection")
    ctx_t, tshape = em.transpose(ctx, hshape, [0, 2, 1, 3])
    merged, mshape = em.collapse(ctx_t, tshape, [[0], [1], [2, 3]])
    return linear(em, merged, mshape, p["wo"], [d, d])


def gelu(em, x, shape):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    dt = em.dt
    c_half = em.const(0.5)
    c_one = em.const(1.0)
    c_k = em.const(math.sqrt(2.0 / math.pi))
    c_cub = em.const(0.044715)

    def body(ins, out):
        bd = Body(dt)
        x2 = bd.op("arith.mulf", ins[0], ins[0])
        x3 = bd.op("arith.mulf", x2, ins[0])
        t = bd.op("arith.mulf", x3, c_cub)
        inner = bd.op("arith.addf", ins[0], t)
        arg = bd.op("arith.mulf", inner, c_k)
        th = bd.op("math.tanh", arg)
        onep = bd.op("arith.addf", th, c_one)
        hx = bd.op("arith.mulf", ins[0], c_half)
        r = bd.op("arith.mulf", hx, onep)
        return bd.lines, r
    init = em.empty(shape)
    n = len(shape)
    return em.generic([(x, shape)], init, shape, [identity_map(n)] * 2,
                      ["parallel"] * n, body, hint="gelu")


def mlp(em, x, shape, p):
    b, s, d = shape
    f = p["ffn"]
    em.comment("MLP: W1, GELU, W2")
    x2, shape2 = em.collapse(x, shape, [[0, 1], [2]])
    h, hshape = em.matmul(x2, shape2, p["w1"], [d, f])
    g = gelu(em, h, hshape)
    y2, yshape = em.matmul(g, hshape, p["w2"], [f, d])
    return em.expand(y2, yshape, [[0, 1], [2]], shape)


# ---------------------------------------------------------------------------
# Module
# ---------------------------------------------------------------------------

def blocks(em, h, act, layers, heads):
    """The stack of pre-LN blocks (attention, then MLP, each residual)."""
    for l, p in enumerate(layers):
        em.comment("---- layer %d ----" % l)
        n1 = layer_norm(em, h, act, p["ln1_g"], p["ln1_b"])
        a, _ = attention(em, n1, act, p, heads)
        h = add(em, h, a, act)
        n2 = layer_norm(em, h, act, p["ln2_g"], p["ln2_b"])
        m = mlp(em, n2, act, p)
        h = add(em, h, m, act)
    return h


def sharding_attr(dims):
    """#par.sharding<@mesh, [...]> with one axis list per tensor dim."""
    parts = ", ".join("{%s}" % ", ".join('"%s"' % a for a in axes)
                      for axes in dims)
    return "{par.sharding = #par.sharding<@mesh, [%s]>}" % parts


def generate(args):
    b, s, d, nh, f = args.batch, args.seq, args.dmodel, args.heads, args.ffn
    dt = args.dtype
    par = not args.no_par
    em = Emitter(dt)
    act = [b, s, d]

    x_attr = sharding_attr([["dp"], [], []]) if par else ""
    col_attr = sharding_attr([[], ["tp"]]) if par else ""
    row_attr = sharding_attr([["tp"], []]) if par else ""

    # Function arguments: (name, shape, attr).
    fargs = [("%x", act, x_attr)]
    layers = []
    for l in range(args.layers):
        pre = "%%l%d_" % l
        p = {"ffn": f}
        spec = [("ln1_g", [d], ""), ("ln1_b", [d], ""),
                ("wq", [d, d], col_attr), ("wk", [d, d], col_attr),
                ("wv", [d, d], col_attr), ("wo", [d, d], row_attr),
                ("ln2_g", [d], ""), ("ln2_b", [d], ""),
                ("w1", [d, f], col_attr), ("w2", [f, d], row_attr)]
        for key, shape, attr in spec:
            p[key] = pre + key
            fargs.append((p[key], shape, attr))
        layers.append(p)
    fargs.append(("%lnf_g", [d], ""))
    fargs.append(("%lnf_b", [d], ""))

    # Body.
    h = "%x"
    h = blocks(em, h, act, layers, nh)
    em.comment("---- final LayerNorm ----")
    out = layer_norm(em, h, act, "%lnf_g", "%lnf_b")
    em.emit("return %s : %s" % (out, em.ty(act)))

    # Assemble the module text.
    lines = []
    lines.append("// Generated by examples/gen_transformer.py %s"
                 % " ".join(sys.argv[1:]))
    lines.append("// %d pre-LN transformer layer(s): batch=%d seq=%d dmodel=%d "
                 "heads=%d ffn=%d dtype=%s" % (args.layers, b, s, d, nh, f, dt))
    lines.append("module {")
    if par:
        lines.append('  par.mesh @mesh ["dp"=%d, "tp"=%d]' % (args.dp, args.tp))
    arg_strs = []
    for name, shape, attr in fargs:
        arg_strs.append("%s: %s%s" % (name, em.ty(shape),
                                      (" " + attr) if attr else ""))
    res = em.ty(act)
    if par:
        res = "(%s %s)" % (res, sharding_attr([["dp"], [], []]))
    lines.append("  func.func @forward(")
    lines.append(",\n".join("      " + a for a in arg_strs))
    lines.append("  ) -> %s {" % res)
    lines.extend(em.const_lines)
    lines.extend(em.lines)
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate_gpt(args):
    """A GPT (token + position embedding, pre-LN blocks, final LayerNorm,
    LM head, softmax cross-entropy) as `func.func @gpt(tokens, targets,
    params...) -> tensor<f32>`, parameters marked `par.param` for
    par-autodiff. Token lookups (--embedding) are a gather (a generic over
    [B, S, D] reading wte[token, d] with tensor.extract, which par-autodiff
    turns into a scatter-add) or one-hot matmuls; a token outside [0, V)
    embeds as zeros either way. The loss is the mean of
    -log softmax(logits)[target].

    Also `func.func @gpt_logits(tokens, params...) -> tensor<BxSxV>`: the
    same network without the loss, for sampling (`par-run --sample`), which
    @gpt names with `par.logits = @gpt_logits`. Its
    arguments are @gpt's without the targets, in the same order and with the
    same shardings (not marked as parameters: nothing differentiates it)."""
    b, s, d, nh, f, v = args.batch, args.seq, args.dmodel, args.heads, args.ffn, args.vocab
    dt = args.dtype
    par = not args.no_par
    act = [b, s, d]
    n = b * s

    def attr(dims, param=True, init=None):
        """(is a parameter, the other argument attributes)"""
        entries = []
        if init:
            entries.append("par.init = " + init_attr(init))
        if par and dims is not None:
            parts = ", ".join("{%s}" % ", ".join('"%s"' % a for a in axes)
                              for axes in dims)
            entries.append("par.sharding = #par.sharding<@mesh, [%s]>" % parts)
        return param, entries

    col, row, rep = [[], ["tp"]], [["tp"], []], None
    fargs = [("%tokens", [b, s], "i64", attr([["dp"], []], param=False)),
             ("%targets", [b, s], "i64", attr([["dp"], []], param=False)),
             ("%wte", [v, d], dt, attr(rep, init="uniform:0.05")),
             ("%wpe", [s, d], dt, attr(rep, init="uniform:0.02"))]
    inits = {"ln1_g": "ones", "ln1_b": "zeros", "ln2_g": "ones", "ln2_b": "zeros",
             "wq": "uniform:%g" % (d ** -0.5), "wk": "uniform:%g" % (d ** -0.5),
             "wv": "uniform:%g" % (d ** -0.5),
             "wo": "uniform:%g" % ((d * 2 * args.layers) ** -0.5),
             "w1": "uniform:%g" % (d ** -0.5),
             "w2": "uniform:%g" % ((f * 2 * args.layers) ** -0.5)}
    layers = []
    for l in range(args.layers):
        pre = "%%l%d_" % l
        p = {"ffn": f}
        spec = [("ln1_g", [d], rep), ("ln1_b", [d], rep),
                ("wq", [d, d], col), ("wk", [d, d], col),
                ("wv", [d, d], col), ("wo", [d, d], row),
                ("ln2_g", [d], rep), ("ln2_b", [d], rep),
                ("w1", [d, f], col), ("w2", [f, d], row)]
        for key, shape, dims in spec:
            p[key] = pre + key
            fargs.append((p[key], shape, dt, attr(dims, init=inits[key])))
        layers.append(p)
    fargs += [("%lnf_g", [d], dt, attr(rep, init="ones")),
              ("%lnf_b", [d], dt, attr(rep, init="zeros")),
              ("%whead", [d, v], dt, attr(rep, init="uniform:%g" % (d ** -0.5)))]

    def emit_body(with_loss):
        em = Emitter(dt)
        one, zero = em.const(1.0), em.const(0.0)

        def onehot(tok, shape):
            """tensor<shape x vocab>: 1.0 where the last index equals the token."""
            out_shape = shape + [v]
            e = em.empty(out_shape)
            name = em.fresh("onehot")
            r = len(out_shape)
            dims = ", ".join("d%d" % i for i in range(r))
            tmap = "affine_map<(%s) -> (%s)>" % (dims, ", ".join("d%d" % i for i in range(r - 1)))
            omap = "affine_map<(%s) -> (%s)>" % (dims, dims)
            em.emit("%s = linalg.generic {indexing_maps = [%s, %s], iterator_types = [%s]}"
                    % (name, tmap, omap, ", ".join(['"parallel"'] * r)))
            em.emit("    ins(%s : tensor<%sxi64>) outs(%s : %s) {"
                    % (tok, "x".join(str(x) for x in shape), e, em.ty(out_shape)))
            em.emit("^bb0(%%t: i64, %%o: %s):" % dt)
            em.emit("%%i = linalg.index %d : index" % (r - 1), indent=8)
            em.emit("%t_idx = arith.index_cast %t : i64 to index", indent=8)
            em.emit("%eq = arith.cmpi eq, %i, %t_idx : index", indent=8)
            em.emit("%%sel = arith.select %%eq, %s, %s : %s" % (one, zero, dt), indent=8)
            em.emit("linalg.yield %%sel : %s" % dt, indent=8)
            em.emit("} -> %s" % em.ty(out_shape))
            return name

        def gather_pos(tok):
            """wte[tok[b, s], d] + wpe[s, d]: wte is read from above by
            tensor.extract (an index outside [0, V) is clamped and its row
            zeroed, as one-hot would), wpe is an operand."""
            e = em.empty(act)
            name = em.fresh("emb")
            maps = ["affine_map<(d0, d1, d2) -> (%s)>" % m
                    for m in ("d0, d1", "d1, d2", "d0, d1, d2")]
            em.emit("%s = linalg.generic {indexing_maps = [%s], iterator_types = [%s]}"
                    % (name, ", ".join(maps), ", ".join(['"parallel"'] * 3)))
            em.emit("    ins(%s, %%wpe : tensor<%dx%dxi64>, %s) outs(%s : %s) {"
                    % (tok, b, s, em.ty([s, d]), e, em.ty(act)))
            em.emit("^bb0(%%t: i64, %%p: %s, %%o: %s):" % (dt, dt))
            for line in ["%t_idx = arith.index_cast %t : i64 to index",
                         "%c0_idx = arith.constant 0 : index",
                         "%%last = arith.constant %d : index" % (v - 1),
                         "%lo = arith.maxsi %t_idx, %c0_idx : index",
                         "%row = arith.minsi %lo, %last : index",
                         "%in = arith.cmpi eq, %row, %t_idx : index",
                         "%col = linalg.index 2 : index",
                         "%%w = tensor.extract %%wte[%%row, %%col] : %s" % em.ty([v, d]),
                         "%%tw = arith.select %%in, %%w, %s : %s" % (zero, dt),
                         "%%sum = arith.addf %%tw, %%p : %s" % dt,
                         "linalg.yield %%sum : %s" % dt]:
                em.emit(line, indent=8)
            em.emit("} -> %s" % em.ty(act))
            return name

        if args.embedding == "gather":
            em.comment("---- embeddings: wte[tokens] + wpe (a gather) ----")
            h = gather_pos("%tokens")
        else:
            em.comment("---- embeddings: one-hot(tokens) x wte + wpe ----")
            oh = onehot("%tokens", [b, s])
            oh2, _ = em.collapse(oh, [b, s, v], [[0, 1], [2]])
            tok_emb, _ = em.matmul(oh2, [n, v], "%wte", [v, d])
            tok3 = em.expand(tok_emb, [n, d], [[0, 1], [2]], act)

            def add_pos(ins, out):
                bd = Body(dt)
                return bd.lines, bd.op("arith.addf", ins[0], ins[1])
            h = em.generic([(tok3, act), ("%wpe", [s, d])], em.empty(act), act,
                           [identity_map(3), "d1, d2", identity_map(3)],
                           ["parallel"] * 3, add_pos, hint="emb")
        h = blocks(em, h, act, layers, nh)
        em.comment("---- final LayerNorm, LM head, cross-entropy ----")
        hf = layer_norm(em, h, act, "%lnf_g", "%lnf_b")
        hf2, _ = em.collapse(hf, act, [[0, 1], [2]])
        logits, _ = em.matmul(hf2, [n, d], "%whead", [d, v])
        if not with_loss:
            out = em.expand(logits, [n, v], [[0, 1], [2]], [b, s, v])
            em.emit("return %s : %s" % (out, em.ty([b, s, v])))
            return em
        probs = em.softmax(logits, [n, v], 1)
        tg = em.fresh("tg")
        em.emit("%s = tensor.collapse_shape %%targets [[0, 1]] : tensor<%dx%dxi64> into tensor<%dxi64>"
                % (tg, b, s, n))
        lz = em.zeros([])
        loss = em.fresh("loss")
        scale = em.const(-1.0 / n)
        em.emit("%s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, "
                "affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> ()>], "
                "iterator_types = [\"reduction\", \"reduction\"]}" % loss)
        em.emit("    ins(%s, %s : %s, tensor<%dxi64>) outs(%s : tensor<%s>) {"
                % (probs, tg, em.ty([n, v]), n, lz, dt))
        em.emit("^bb0(%%p: %s, %%t: i64, %%acc: %s):" % (dt, dt))
        em.emit("%i = linalg.index 1 : index", indent=8)
        em.emit("%t_idx = arith.index_cast %t : i64 to index", indent=8)
        em.emit("%eq = arith.cmpi eq, %i, %t_idx : index", indent=8)
        em.emit("%%lp = math.log %%p : %s" % dt, indent=8)
        em.emit("%%nl = arith.mulf %%lp, %s : %s" % (scale, dt), indent=8)
        em.emit("%%sel = arith.select %%eq, %%nl, %s : %s" % (zero, dt), indent=8)
        em.emit("%%sum = arith.addf %%acc, %%sel : %s" % dt, indent=8)
        em.emit("linalg.yield %%sum : %s" % dt, indent=8)
        em.emit("} -> tensor<%s>" % dt)
        em.emit("return %s : tensor<%s>" % (loss, dt))
        return em

    lines = ["// Generated by examples/gen_transformer.py %s" % " ".join(sys.argv[1:]),
             "// GPT: %d layer(s) batch=%d seq=%d dmodel=%d heads=%d ffn=%d vocab=%d dtype=%s"
             % (args.layers, b, s, d, nh, f, v, dt),
             "module {"]
    if par:
        pp = ', "pp"=%d' % args.pp if args.pp > 1 else ""
        lines.append('  par.mesh @mesh ["dp"=%d, "tp"=%d%s]' % (args.dp, args.tp, pp))
    def function(name, em, args, result, params, attrs=""):
        """Appends `func.func @name`; `params`: mark parameters par.param;
        `attrs`: the function's attribute dictionary entries."""
        arg_strs = []
        for an, shape, ety, (is_param, entries) in args:
            entries = (["par.param"] if params and is_param else []) + entries
            arg_strs.append("%s: tensor<%sx%s>%s" % (
                an, "x".join(str(x) for x in shape), ety,
                " {%s}" % ", ".join(entries) if entries else ""))
        lines.append("  func.func @%s(" % name)
        lines.append(",\n".join("      " + a for a in arg_strs))
        lines.append("  ) -> %s%s {" % (
            result, " attributes {%s}" % attrs if attrs else ""))
        lines.extend(em.const_lines)
        lines.extend(em.lines)
        lines.append("  }")

    # par.logits links the loss to the logits function: par-optimizer
    # copies the link onto the step, par-run --sample follows it.
    function("gpt", emit_body(True), fargs, "tensor<%s>" % dt, params=True,
             attrs="par.logits = @gpt_logits")
    function("gpt_logits", emit_body(False),
             [a for a in fargs if a[0] != "%targets"],
             "tensor<%dx%dx%dx%s>" % (b, s, v, dt), params=False)
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate_mlp(args):
    """An MLP regression model as `func.func @mlp(x, y, params...) ->
    tensor<f32>`: `--layers` residual Megatron MLP blocks (h += GELU(h W1)
    W2, W1 split by columns and W2 by rows over "tp") on [batch, dmodel]
    inputs, and the mean squared error against the targets y; x and y split
    over "dp", parameters marked par.param with initialisers."""
    b, d, f, dt = args.batch, args.dmodel, args.ffn, args.dtype
    par = not args.no_par
    em = Emitter(dt)

    def attr(dims, param, init=None):
        entries = ["par.param"] if param else []
        if init:
            entries.append("par.init = " + init_attr(init))
        if par and dims is not None:
            entries.append(sharding_attr(dims)[1:-1])
        return " {%s}" % ", ".join(entries) if entries else ""

    fargs = [("%x", [b, d], attr([["dp"], []], False)),
             ("%y", [b, d], attr([["dp"], []], False))]
    h = "%x"
    for l in range(args.layers):
        w1, w2 = "%%l%d_w1" % l, "%%l%d_w2" % l
        fargs.append((w1, [d, f], attr([[], ["tp"]], True, "uniform:%g" % (d ** -0.5))))
        fargs.append((w2, [f, d], attr([["tp"], []], True,
                                       "uniform:%g" % ((f * 2 * args.layers) ** -0.5))))
        em.comment("---- block %d: h + GELU(h W1) W2 ----" % l)
        u, ushape = em.matmul(h, [b, d], w1, [d, f])
        g = gelu(em, u, ushape)
        o, _ = em.matmul(g, ushape, w2, [f, d])
        h = add(em, h, o, [b, d])
    em.comment("---- mean squared error ----")
    scale = em.const(1.0 / (b * d))
    lz = em.zeros([])

    def mse_body(ins, out):
        bd = Body(dt)
        df = bd.op("arith.subf", ins[0], ins[1])
        sq = bd.op("arith.mulf", df, df)
        sc = bd.op("arith.mulf", sq, scale)
        return bd.lines, bd.op("arith.addf", out, sc)
    loss = em.generic([(h, [b, d]), ("%y", [b, d])], lz, [],
                      [identity_map(2), identity_map(2), ""],
                      ["reduction", "reduction"], mse_body, hint="loss")
    em.emit("return %s : tensor<%s>" % (loss, dt))
    lines = ["// Generated by examples/gen_transformer.py %s" % " ".join(sys.argv[1:]),
             "// MLP: %d block(s) batch=%d dmodel=%d ffn=%d dtype=%s"
             % (args.layers, b, d, f, dt),
             "module {"]
    if par:
        pp = ', "pp"=%d' % args.pp if args.pp > 1 else ""
        lines.append('  par.mesh @mesh ["dp"=%d, "tp"=%d%s]' % (args.dp, args.tp, pp))
    lines.append("  func.func @mlp(")
    lines.append(",\n".join("      %s: %s%s" % (n, em.ty(shape), a)
                             for n, shape, a in fargs))
    lines.append("  ) -> tensor<%s> {" % dt)
    lines.extend(em.const_lines)
    lines.extend(em.lines)
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def check_args(args):
    """Validate shapes; exit 2 with a clear message on failure."""
    errors = []
    for name in ("layers", "batch", "seq", "dmodel", "heads", "ffn", "dp", "tp", "pp"):
        if getattr(args, name) < 1:
            errors.append("--%s must be >= 1 (got %d)" % (name, getattr(args, name)))
    if not errors:
        if args.dmodel % args.heads:
            errors.append("dmodel (%d) must be divisible by heads (%d)"
                          % (args.dmodel, args.heads))
        if not args.no_par:
            if args.batch % args.dp:
                errors.append("batch (%d) must be divisible by dp (%d)"
                              % (args.batch, args.dp))
            if args.heads % args.tp:
                errors.append("heads (%d) must be divisible by tp (%d)"
                              % (args.heads, args.tp))
            if args.ffn % args.tp:
                errors.append("ffn (%d) must be divisible by tp (%d)"
                              % (args.ffn, args.tp))
            if args.dmodel % args.tp:
                errors.append("dmodel (%d) must be divisible by tp (%d)"
                              % (args.dmodel, args.tp))
    if errors:
        for e in errors:
            print("gen_transformer.py: error: " + e, file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Generate a pre-LN transformer stack as MLIR "
                    "(linalg on tensors) with optional par sharding "
                    "annotations.")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--dmodel", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=None,
                    help="MLP hidden size (default 4*dmodel)")
    ap.add_argument("--dp", type=int, default=2, help="data-parallel mesh axis size")
    ap.add_argument("--tp", type=int, default=4, help="tensor-parallel mesh axis size")
    ap.add_argument("--pp", type=int, default=1,
                    help="pipeline mesh axis size (--gpt, --mlp; adds a \"pp\" axis "
                         "that par-pipeline-split/-schedule place stages on)")
    ap.add_argument("--dtype", default="f32", choices=sorted(MASK_VALUE))
    ap.add_argument("--gpt", action="store_true",
                    help="emit a GPT with embeddings, LM head and a "
                         "cross-entropy loss (@gpt, parameters marked "
                         "par.param) instead of @forward")
    ap.add_argument("--mlp", action="store_true",
                    help="emit an MLP regression model (@mlp: residual "
                         "Megatron MLP blocks, mean squared error; parameters "
                         "marked par.param) instead of @forward")
    ap.add_argument("--vocab", type=int, default=64,
                    help="vocabulary size (--gpt)")
    ap.add_argument("--embedding", default="gather", choices=["gather", "onehot"],
                    help="token embedding lookup (--gpt): a gather of wte's "
                         "rows (default) or a one-hot matmul")
    ap.add_argument("--no-par", action="store_true",
                    help="omit the par mesh and sharding annotations "
                         "(plain upstream MLIR)")
    ap.add_argument("-o", "--output", default="-",
                    help="output file (default stdout)")
    args = ap.parse_args(argv)
    if args.ffn is None:
        args.ffn = 4 * args.dmodel
    check_args(args)

    if args.gpt and args.mlp:
        print("gen_transformer.py: error: --gpt and --mlp exclude each other",
              file=sys.stderr)
        return 2
    text = (generate_gpt(args) if args.gpt else
            generate_mlp(args) if args.mlp else generate(args))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
