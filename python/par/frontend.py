"""PyTorch modules into par: torch.export -> torch-mlir (linalg on tensors) ->
par's annotated MLIR text, plus the module's initial weights.

The exported function is the forward + loss with every parameter as a
leading argument (named_parameters() order; tied parameters once), then
the example inputs. Its arguments carry

  par.param                      on parameters (par-autodiff differentiates them)
  par.name = "fc1.weight"        PyTorch's name; par.aliases the tied names
  par.slice = {of, dim, offset}  on a segment of a fused projection split
                                 per segment under tp (_split_fused)
  par.data = "tokens"|"targets"  on integer data inputs, with par.vocab = V
  par.sharding                   from the strategy (dp, tp)

and, with pp > 1, the ops of the repeated blocks carry par.stage pins (by
module boundary). Every op's location is the user's source line (the
innermost frame outside torch) named by its module path, e.g.
loc("blocks.0.attn"("model.py":31:0)), so par's diagnostics say where an op
came from. Normalisation (softmax, powi, pads, gathers, unit dims) is
par-compile's job (par-normalize-torch), not this file's: it writes only
annotations.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn as nn

from . import decompositions


class ImportError_(Exception):
    """A problem with the user's module, reported as one message."""


@dataclass
class ImportResult:
    mlir_path: str
    weights_path: Optional[str]
    func_name: str
    param_names: List[str]
    aliases: Dict[str, List[str]]
    data_roles: List[Optional[str]]
    shardings: Dict[str, str] = field(default_factory=dict)
    loss: float = float("nan")
    stages: Dict[str, int] = field(default_factory=dict)
    # The derived tensor-parallel plan's roles (layer -> LayerRole), and
    # the plan used (the derived one, or tp_plan=).
    layer_roles: Dict[str, "LayerRole"] = field(default_factory=dict)
    mesh: Dict[str, int] = field(default_factory=dict)
    tp_plan: Dict[str, str] = field(default_factory=dict)
    # The parameters that are segments of a fused one (_split_fused):
    # name -> (the fused parameter's name, dim, offset, size), par.slice.
    slices: Dict[str, tuple] = field(default_factory=dict)
    # The vocabulary tables padded to a multiple of tp (_pad_vocab): name ->
    # (dim, the vocabulary, the padded size), par.slice with an extent.
    padded: Dict[str, tuple] = field(default_factory=dict)


# --------------------------------------------------------------------------
# Strategy: data parallel over the batch, Megatron tensor parallel from the
# module structure, pipeline pins by block.

_LINEAR_TYPES = (nn.Linear,)


def _conv1d_type():
    try:  # HF GPT2's Conv1D: weight [in, out], x @ W + b.
        from transformers.pytorch_utils import Conv1D

        return Conv1D
    except Exception:  # transformers absent: no Conv1D layers to shard.
        return None


def _linear_layers(module: nn.Module):
    """(name, module, layout) of every Linear-like layer in definition order;
    layout "out_in" for nn.Linear, "in_out" for HF's Conv1D."""
    conv1d = _conv1d_type()
    out = []
    for name, m in module.named_modules():
        if isinstance(m, _LINEAR_TYPES):
            out.append((name, m, "out_in"))
        elif conv1d is not None and isinstance(m, conv1d):
            out.append((name, m, "in_out"))
    return out


def _tied_weights(module: nn.Module):
    """ids of the parameters that have several names (tied weights)."""
    seen: Dict[int, int] = {}
    for _, p in module.named_parameters(remove_duplicate=False):
        seen[id(p)] = seen.get(id(p), 0) + 1
    return {k for k, n in seen.items() if n > 1}


def _vocab_of(module: nn.Module) -> Optional[int]:
    for _, m in module.named_modules():
        if isinstance(m, nn.Embedding):
            return m.num_embeddings
    return None


def _embedding_layers(module: nn.Module):
    return [(n, m) for n, m in module.named_modules() if isinstance(m, nn.Embedding)]


@dataclass
class LayerRole:
    """One layer's place in the tensor-parallel plan: style is 'colwise',
    'rowwise', 'vocab' (a vocabulary-parallel embedding or LM head) or
    'replicated'; why says which dataflow fact decided it."""
    layer: str
    kind: str            # "linear", "conv1d", "embedding"
    style: str
    why: str
    shape: tuple = ()
    # What this layer costs over tp per step, Megatron's accounting:
    # (description, elements of the all-reduced activation, global batch).
    comm: List[tuple] = field(default_factory=list)


def derive_tp_plan(module: nn.Module, tp: int, program=None,
                   param_names: Optional[List[str]] = None,
                   roles: Optional[Dict[str, "LayerRole"]] = None,
                   cuts: Optional[Dict[str, tuple]] = None) -> Dict[str, str]:
    """Megatron's layout from the dataflow of the exported program
    (torch.export's ATen graph, `program`): a Linear-like layer whose input
    is the block's (normalised) input is column-parallel, one whose input is
    derived from column-parallel outputs (the attention or MLP result, the
    feature dimension still the split one) is row-parallel, so each pair
    costs one all-reduce forward and one backward. The split dimension is
    followed through views (a feature dimension split into heads gives its
    split to the heads: they must divide by tp, else the layer, e.g. GQA/MQA
    key/value projections with fewer heads than tp, stays replicated),
    transposes, elementwise ops, attention matmuls (batch dimensions) and
    reductions over other dimensions. A column-parallel output that reaches
    anything else (a norm or a residual add over the split features, a
    matmul contracting it, the loss) makes its layers replicated, and the
    derivation runs again. The LM head (out_features = the token
    embedding's vocabulary) and the token embedding are vocabulary-parallel
    when tp divides the vocabulary (tied or not: the shared table is split
    on its rows for both). A fused projection (q|k|v in one weight,
    sliced on the split dimension) stays column-parallel, its segments
    crossing the tp blocks; `cuts`, when given, receives its output's cut
    points (layer -> (width, points), None where it cannot be cut), from
    which import_module splits it per segment (_split_fused) and derives
    again. Without `program` (no graph), the layers pair up in definition
    order (the former heuristic). `roles`, when given, receives a LayerRole
    per layer."""
    if program is None or param_names is None:
        return _derive_tp_plan_by_order(module, tp)
    roles = roles if roles is not None else {}
    roles.clear()
    plan = _derive_from_graph(module, tp, program, param_names, roles, cuts)
    return plan


def _derive_tp_plan_by_order(module: nn.Module, tp: int) -> Dict[str, str]:
    """Definition-order pairing (no graph): kept for derive_tp_plan(module,
    tp) without a program."""
    vocab = _vocab_of(module)
    plan: Dict[str, str] = {}
    layers = []
    tied = _tied_weights(module)
    for name, m, layout in _linear_layers(module):
        out_f = m.weight.shape[0] if layout == "out_in" else m.weight.shape[1]
        if vocab is not None and out_f == vocab:
            if out_f % tp == 0 and id(m.weight) not in tied:
                plan[name] = "colwise"
            continue
        layers.append((name, m, layout))
    for i in range(0, len(layers) - 1, 2):
        (na, ma, la), (nb, mb, lb) = layers[i], layers[i + 1]
        a_out = ma.weight.shape[0] if la == "out_in" else ma.weight.shape[1]
        b_in = mb.weight.shape[1] if lb == "out_in" else mb.weight.shape[0]
        if a_out % tp or b_in % tp:
            continue
        plan[na] = "colwise"
        plan[nb] = "rowwise"
    return plan


# ATen ops through which a split dimension is followed (elementwise: the
# split dimension keeps its place counted from the right).
_ELEMENTWISE = {
    "mul", "add", "sub", "div", "neg", "silu", "gelu", "tanh", "pow", "rsqrt",
    "sqrt", "exp", "where", "to", "_to_copy", "clone", "contiguous", "dropout",
    "masked_fill", "sigmoid", "relu", "erf", "alias", "detach", "detach_",
    "type_as", "_assert_tensor_metadata", "abs", "square", "reciprocal",
    "mish", "gelu_", "relu_", "silu_", "mul_", "add_", "lift_fresh_copy",
    "fill", "ones_like", "zeros_like", "sin", "cos", "log", "minimum",
    "maximum", "clamp", "clamp_min", "clamp_max", "scalar_tensor", "rsub",
    "_assert_scalar", "native_dropout", "float", "expm1", "log1p",
}
_REDUCTIONS = {"mean", "sum", "amax", "amin", "max", "min", "var", "var_mean",
               "std", "softmax", "_softmax", "log_softmax", "_log_softmax",
               "logsumexp", "layer_norm", "native_layer_norm", "rms_norm",
               "cumsum", "argmax"}


class _Bad(Exception):
    """A split value reached an op it cannot pass through."""


def _op_name(node) -> str:
    t = node.target
    name = getattr(t, "__name__", str(t))
    # aten.mul.Tensor -> "mul"; OpOverload __name__ is "mul.Tensor".
    return name.split(".")[0]


def _shape(node):
    v = node.meta.get("val") if hasattr(node, "meta") else None
    return tuple(v.shape) if hasattr(v, "shape") else None


def _reshape_split(in_shape, out_shape, d, tp):
    """Where a block split of in_shape[d] lands in out_shape, or raise _Bad
    (merged under an outer dimension, or split into heads tp does not
    divide: the second element says which)."""
    i = o = 0
    n_in, n_out = len(in_shape), len(out_shape)
    while i < n_in or o < n_out:
        # One group: the fewest dims on each side with equal products.
        gi, go = [i], [o]
        pi = in_shape[i] if i < n_in else 1
        po = out_shape[o] if o < n_out else 1
        i += 1
        o += 1
        while pi != po:
            if pi < po:
                if i >= n_in:
                    raise _Bad("reshape")
                pi *= in_shape[i]
                gi.append(i)
                i += 1
            else:
                if o >= n_out:
                    raise _Bad("reshape")
                po *= out_shape[o]
                go.append(o)
                o += 1
        # Trailing size-1 dims join the group (no effect on the layout).
        if d in gi:
            pre = 1
            for k in gi:
                if k == d:
                    break
                pre *= in_shape[k]
            if pre != 1:
                raise _Bad("merged under an outer dimension")
            outs = [k for k in go if k < n_out and out_shape[k] != 1]
            if not outs:
                raise _Bad("reshape")
            if len(go) > 1 and out_shape[go[0]] == 1:
                raise _Bad("heads:1")  # one head (MQA): nothing to split
            first = outs[0]
            if out_shape[first] % tp:
                raise _Bad(f"heads:{out_shape[first]}")
            return first
    raise _Bad("reshape")


def _derive_from_graph(module, tp, program, param_names, roles, cuts=None):
    import operator

    graph = program.graph
    user_inputs = list(program.graph_signature.user_inputs)
    node_of = {n.name: n for n in graph.nodes}
    param_of_node = {}
    for i, pn in enumerate(param_names):
        if i < len(user_inputs):
            param_of_node[user_inputs[i]] = pn
    # Primary parameter name -> (layer, module, kind, layout).
    by_param: Dict[str, tuple] = {}
    prim = {id(p): n for n, p in module.named_parameters()}
    for name, m, layout in _linear_layers(module):
        kind = "linear" if layout == "out_in" else "conv1d"
        by_param.setdefault(prim[id(m.weight)], []).append((name, m, kind, layout))
    for name, m in _embedding_layers(module):
        by_param.setdefault(prim[id(m.weight)], []).append((name, m, "embedding", None))
    vocab = _vocab_of(module)
    tied = _tied_weights(module)

    def weight_param(arg):
        """The parameter a weight operand is (through transposes/casts)."""
        seen = 0
        while hasattr(arg, "op") and arg.op == "call_function" and seen < 4 and \
                _op_name(arg) in ("t", "transpose", "to", "_to_copy", "detach", "alias",
                                  "numpy_T", "permute"):
            arg = arg.args[0]
            seen += 1
        if hasattr(arg, "op") and arg.op == "placeholder":
            return param_of_node.get(arg.name)
        return None

    # The layer calls: node -> (layer, module, kind, layout, input node).
    calls = {}
    for n in graph.nodes:
        if n.op != "call_function":
            continue
        op = _op_name(n)
        cand = None
        if op == "linear" and len(n.args) >= 2:
            cand = (weight_param(n.args[1]), n.args[0], ("linear",))
        elif op == "addmm" and len(n.args) >= 3:
            cand = (weight_param(n.args[2]), n.args[1], ("conv1d",))
        elif op == "embedding" and len(n.args) >= 2:
            cand = (weight_param(n.args[0]), n.args[1], ("embedding",))
        elif op in ("matmul", "mm") and len(n.args) >= 2:
            # A head tied to an embedding, or a layer called through
            # x @ W.T: the weight is the second operand.
            cand = (weight_param(n.args[1]), n.args[0], ("linear", "embedding"))
        if cand is None or cand[0] is None or cand[0] not in by_param:
            continue
        pname, x, kinds = cand
        entries = [e for e in by_param[pname] if e[2] in kinds] or by_param[pname]
        name, m, kind, layout = entries[0]
        if op in ("linear", "matmul", "mm") and kind == "embedding":
            # The tied LM head: the embedding's table read as a Linear.
            heads = [e for e in by_param[pname] if e[2] == "linear"]
            if heads:
                name, m, kind, layout = heads[0]
            else:
                name, m, kind, layout = (name + "(as head)", m, "linear", "out_in")
        calls[n] = (name, m, kind, layout, x)

    def out_features(m, layout):
        return m.weight.shape[0] if layout == "out_in" else m.weight.shape[1]

    def in_features(m, layout):
        return m.weight.shape[1] if layout == "out_in" else m.weight.shape[0]

    blocks = _block_lists(module)
    block_prefix = (blocks[0] + ".") if blocks and blocks[0] else None

    def is_head(m, layout, kind, name=""):
        # Producing the vocabulary, outside the repeated blocks (a fused
        # q|k|v of the same width inside a block is no head).
        return kind != "embedding" and vocab is not None and \
            out_features(m, layout) == vocab and \
            not (block_prefix and name.startswith(block_prefix))

    forced: Dict[str, str] = {}   # layer -> why replicated
    fused: Dict[str, str] = {}

    for _round in range(64):
        tags: Dict = {}   # node -> (frozenset(layers), split dim)
        colwise: Dict[str, str] = {}
        rowwise: Dict[str, frozenset] = {}
        bad: Dict[str, str] = {}
        definite = [False]  # a layer replicated for its head count this round

        def fail(layers, why):
            for L in layers:
                bad.setdefault(L, why)

        for n in graph.nodes:
            if n.op == "output":
                for a in _flat_nodes(n.args):
                    if a in tags:
                        fail(tags[a][0], "its split output reaches the loss")
                continue
            if n.op != "call_function":
                continue
            ins = [(a, tags[a]) for a in _flat_nodes(n.args) if a in tags]
            if n in calls:
                name, m, kind, layout, x = calls[n]
                if kind == "embedding":
                    if ins:
                        fail(set().union(*[t[0] for _, t in ins]), "reaches an embedding")
                    continue
                head = is_head(m, layout, kind, name)
                xt = tags.get(x)
                if xt is not None:
                    S, sd = xt
                    xs = _shape(x)
                    if head or xs is None or sd != len(xs) - 1:
                        fail(S, f"its split output reaches {name} on a dimension "
                                "other than the features")
                        continue
                    if in_features(m, layout) % tp:
                        fail(S, f"{name}'s {in_features(m, layout)} input features "
                                f"do not divide by tp={tp}")
                        continue
                    rowwise[name] = rowwise.get(name, frozenset()) | S
                    continue
                if head or name in forced:
                    continue
                if out_features(m, layout) % tp:
                    forced[name] = (f"its {out_features(m, layout)} output features "
                                    f"do not divide by tp={tp}")
                    continue
                colwise[name] = "reads the block input"
                s = _shape(n)
                tags[n] = (frozenset([name]), len(s) - 1 if s else 0)
                continue
            if not ins:
                continue
            S = frozenset().union(*[t[0] for _, t in ins])
            op = _op_name(n)
            out_s = _shape(n)
            try:
                tags_out = _propagate(n, op, ins, out_s, tp, fused, cuts)
            except _Bad as e:
                why = str(e)
                if why.startswith("heads:"):
                    for L in S:
                        forced.setdefault(L, f"its {why[6:]} heads do not divide by tp={tp}")
                    definite[0] = True
                else:
                    fail(S, f"its split output reaches '{op}' ({why})")
                continue
            if tags_out is None:
                continue
            if n.target is operator.getitem or op == "getitem":
                tags[n] = (S, tags_out)
            else:
                tags[n] = (S, tags_out)
        if definite[0]:
            continue  # the other failures may follow from those layers
        if not bad:
            break
        for L, why in bad.items():
            forced.setdefault(L, why)
    # The plan.
    plan: Dict[str, str] = {}

    def numel(node):
        sh = _shape(node)
        k = 1
        for v in sh or ():
            k *= int(v)
        return k
    shared_input: Dict[str, str] = {}
    # Values that depend on a parameter (their gradient is computed).
    needs_grad = set()
    for node in graph.nodes:
        if node.op == "placeholder" and node.name in param_of_node:
            needs_grad.add(node)
        elif node.op == "call_function" and any(a in needs_grad
                                                  for a in _flat_nodes(node.args)):
            needs_grad.add(node)
    seen_layers = {c[0]: c for c in calls.values()}
    for name, m, kind, layout, x in calls.values():
        shape = tuple(m.weight.shape)
        if kind == "embedding":
            if vocab is not None and m.num_embeddings == vocab:
                if vocab % tp == 0:
                    plan[name] = "vocab"
                    out = [c for c, v in calls.items() if v[0] == name][0]
                    roles[name] = LayerRole(name, kind, "vocab", "the token embedding: "
                                            "Megatron's masked lookup, one all-reduce", shape,
                                            [("forward: all-reduce of the looked-up rows",
                                              numel(out))])
                else:
                    roles[name] = LayerRole(name, kind, "replicated",
                                            f"vocabulary {vocab} does not divide by tp={tp}",
                                            shape)
            else:
                roles[name] = LayerRole(name, kind, "replicated",
                                        "not the token embedding", shape)
            continue
        if is_head(m, layout, kind, name):
            if vocab % tp == 0 and x not in tags:
                plan[name] = "colwise"
                why = "the LM head: logits split over the vocabulary" + (
                    " (tied to the token embedding)" if id(m.weight) in tied else "")
                roles[name] = LayerRole(name, kind, "vocab", why, shape,
                                        [("backward: all-reduce of its input's gradient",
                                          numel(x)),
                                         ("the loss: all-reduces of one value per token "
                                          "(max, sum of exponentials, target logit; 2 in "
                                          "the backward)", 5 * numel(x) // _shape(x)[-1])])
            else:
                roles[name] = LayerRole(name, kind, "replicated",
                                        f"the LM head; vocabulary {vocab} does not "
                                        f"divide by tp={tp}", shape)
            continue
        if name in rowwise:
            plan[name] = "rowwise"
            out = [c for c, v in calls.items() if v[0] == name][-1]
            if kind == "conv1d" and out.users:
                out = next(iter(out.users))  # addmm's 2-d result viewed back
            roles[name] = LayerRole(name, kind, "rowwise", "consumes the split result of " +
                                    ", ".join(sorted(rowwise[name])), shape,
                                    [("forward: all-reduce of its output", numel(out))])
        elif name in colwise:
            plan[name] = "colwise"
            why = "reads the block input"
            if name in fused:
                why += "; fused: " + fused[name]
            parent, _, k = name.rpartition(".")
            seg = dict(module.named_modules()).get(parent) if parent else None
            if isinstance(seg, _Segments):
                a, b = seg.bounds[int(k)]
                why += f"; segment {a}:{b} of {parent}'s output (split per segment)"
            # The layers reading one value (through views: each Conv1D
            # segment flattens the block input itself) share its all-reduce.
            root = x
            while getattr(root, "op", None) == "call_function" and \
                    _op_name(root) in ("view", "reshape", "_unsafe_view") and root.args:
                root = root.args[0]
            key = root.name
            if x not in needs_grad:
                comm = [("backward: none (its input needs no gradient)", 0)]
            elif key in shared_input:
                comm = [(f"backward: its input's gradient, summed with "
                         f"{shared_input[key]}'s before the all-reduce", 0)]
            else:
                shared_input[key] = name
                comm = [("backward: all-reduce of its input's gradient", numel(x))]
            roles[name] = LayerRole(name, kind, "colwise", why, shape, comm)
        else:
            roles[name] = LayerRole(name, kind, "replicated",
                                    forced.get(name, "its output is not split"), shape)
    # Tied tables: one sharding for the shared weight (the head's rows are
    # the embedding's), replicated for both unless both are vocabulary-split.
    for name, m, kind, layout in [c[:4] for c in calls.values()]:
        if id(m.weight) in tied:
            names = [c[0] for c in calls.values() if c[1].weight is m.weight]
            if not all(plan.get(k) in ("vocab", "colwise") for k in names):
                for k in names:
                    if k in plan:
                        del plan[k]
                        roles[k] = LayerRole(k, roles[k].kind, "replicated",
                                             "tied weight, not split the same way everywhere",
                                             roles[k].shape)
    return plan


def _flat_nodes(args):
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out += _flat_nodes(a)
        elif hasattr(a, "op") and hasattr(a, "meta"):
            out.append(a)
    return out


def _norm_dim(d, rank):
    return d + rank if d < 0 else d


def _record_cuts(cuts, S, N, points):
    """A fused output of width N sliced or split at `points` (None: not a
    plain slice): the cut points of its layer, or None for a layer whose
    output cannot be cut into segments (several layers' outputs mixed, a
    strided slice, another width)."""
    if cuts is None:
        return
    for L in S:
        prev = cuts.get(L, (N, set()))
        if len(S) != 1 or points is None or prev is None or prev[0] != N:
            cuts[L] = None
        else:
            cuts[L] = (N, prev[1] | set(points))


def _propagate(n, op, ins, out_s, tp, fused, cuts=None):
    """The split dimension of `n`'s result from its split inputs, None when
    the result carries no split, or raise _Bad. A slice or split of a
    column-parallel output on its split dimension marks its layers in
    `fused` and adds the cut points to `cuts` (layer -> (width, points))."""
    args = n.args
    src = ins[0]
    a, (S, sd) = src
    in_s = _shape(a)
    if op in ("getitem",) or getattr(n.target, "__name__", "") == "getitem":
        return sd
    if op in ("_assert_tensor_metadata", "_assert_scalar", "sym_size", "sym_numel"):
        return None  # checks and sizes: no tensor result
    if in_s is None and op not in ("split", "split_with_sizes", "chunk", "unbind"):
        raise _Bad("unknown shape")
    if op in ("view", "reshape", "_unsafe_view", "view_as", "flatten", "unflatten",
              "reshape_as"):
        if out_s is None:
            raise _Bad("unknown shape")
        return _reshape_split(in_s, out_s, sd, tp)
    if op in ("transpose", "swapaxes"):
        d0, d1 = (_norm_dim(args[1], len(in_s)), _norm_dim(args[2], len(in_s)))
        return d1 if sd == d0 else d0 if sd == d1 else sd
    if op == "t":
        return 1 - sd if len(in_s) == 2 else sd
    if op == "permute":
        perm = [_norm_dim(p, len(in_s)) for p in args[1]]
        return perm.index(sd)
    if op == "unsqueeze":
        d = _norm_dim(args[1], len(in_s) + 1)
        return sd + 1 if d <= sd else sd
    if op == "squeeze":
        return _reshape_split(in_s, out_s, sd, tp)
    if op == "expand":
        return sd + (len(out_s) - len(in_s))
    if op in ("slice", "narrow", "select"):
        d = _norm_dim(args[1] if len(args) > 1 else 0, len(in_s))
        if op == "select":
            if d == sd:
                raise _Bad("select on the split dimension")
            return sd - 1 if d < sd else sd
        if d == sd and out_s is not None and out_s[d] != in_s[d]:
            for L in S:
                fused.setdefault(L, "its output is sliced on the split features "
                                    "(segments cross the tp blocks)")
            N = in_s[d]
            if op == "narrow":
                start, end, step = args[2], args[2] + args[3], 1
            else:
                start = args[2] if len(args) > 2 and args[2] is not None else 0
                end = args[3] if len(args) > 3 and args[3] is not None else N
                step = args[4] if len(args) > 4 else 1
            start = min(max(start + N if start < 0 else start, 0), N)
            end = min(max(end + N if end < 0 else end, 0), N)
            _record_cuts(cuts, S, N, [start, end] if step == 1 else None)
        return sd
    if op in ("split", "split_with_sizes", "chunk", "unbind"):
        d = args[2] if len(args) > 2 else n.kwargs.get("dim", 0)
        rank = len(in_s) if in_s else 0
        d = _norm_dim(d, rank)
        if op == "unbind":
            if d == sd:
                raise _Bad("unbind on the split dimension")
            return sd - 1 if d < sd else sd
        if d == sd:
            for L in S:
                fused.setdefault(L, "its output is split on the split features "
                                    "(segments cross the tp blocks)")
            N = in_s[d]
            size = args[1]
            if op == "chunk":
                size = -(-N // size)
            if isinstance(size, int):
                size = [min(size, N - a) for a in range(0, N, size)]
            bounds = [0]
            for k in size:
                bounds.append(bounds[-1] + k)
            _record_cuts(cuts, S, N, bounds)
        return sd
    if op == "cat":
        d = _norm_dim(args[1] if len(args) > 1 else 0, len(out_s))
        if d == sd:
            raise _Bad("concatenated on the split dimension")
        return sd
    if op in ("matmul", "bmm", "mm"):
        A, B = args[0], args[1]
        sa, sb = _shape(A), _shape(B)
        res = set()
        for x, t in ins:
            S2, d = t
            xs = _shape(x)
            r = len(xs)
            if x is A:
                if d == r - 1:
                    raise _Bad("a matmul contracts the split dimension")
                res.add(len(out_s) - (r - d))
            if x is B:
                if r >= 2 and d == r - 2:
                    raise _Bad("a matmul contracts the split dimension")
                res.add(len(out_s) - (r - d))
        if len(res) != 1:
            raise _Bad("operands split on different dimensions")
        return res.pop()
    if op == "scaled_dot_product_attention":
        for x, t in ins:
            xs = _shape(x)
            if t[1] >= len(xs) - 2:
                raise _Bad("attention over the split dimension")
        return ins[0][1][1] + (len(out_s) - len(_shape(ins[0][0])))
    if op in _REDUCTIONS:
        rank = len(in_s)
        if op in ("layer_norm", "native_layer_norm", "rms_norm"):
            k = len(args[1]) if len(args) > 1 else 1
            dims = list(range(rank - k, rank))
        else:
            dims = args[1] if len(args) > 1 else n.kwargs.get("dim", None)
            if dims is None:
                dims = list(range(rank))
            if not isinstance(dims, (list, tuple)):
                dims = [dims]
            dims = [_norm_dim(d, rank) for d in dims]
        if sd in dims:
            raise _Bad("a reduction over the split dimension")
        if out_s is None:
            return sd
        if len(out_s) == rank:
            return sd
        return sd - sum(1 for d in dims if d < sd)
    if op in _ELEMENTWISE:
        if out_s is None:
            raise _Bad("unknown shape")
        res = set()
        for x, t in ins:
            xs = _shape(x)
            res.add(len(out_s) - (len(xs) - t[1]))
        if len(res) != 1:
            raise _Bad("operands split on different dimensions")
        return res.pop()
    raise _Bad("no rule for it")


def _match_plan(plan: Dict[str, str], layer: str) -> Optional[str]:
    for pattern, style in plan.items():
        if layer == pattern or fnmatch.fnmatchcase(layer, pattern):
            return style
    return None


def _param_shardings(module, names, tp, tp_plan):
    """par.sharding text per parameter name (absent: replicated)."""
    shard: Dict[str, str] = {}
    if tp <= 1:
        return shard
    prim = {id(p): n for n, p in module.named_parameters()}
    layers = {n: (m, layout) for n, m, layout in _linear_layers(module)}
    for name, m in _embedding_layers(module):
        layers.setdefault(name, (m, "embedding"))
    styles = ("colwise", "rowwise", "vocab", "replicated")
    for layer, (m, layout) in layers.items():
        style = _match_plan(tp_plan, layer)
        if style is None or style == "replicated":
            continue
        if style not in styles:
            raise ImportError_(
                f"tp_plan['{layer}'] = '{style}': expected one of " + ", ".join(styles))
        if layout == "embedding":
            # A table [num_embeddings, dim]: vocabulary-parallel splits its
            # rows (rowwise, as PyTorch's RowwiseParallel on an Embedding),
            # colwise its embedding dimension.
            dim = 1 if style == "colwise" else 0
        else:
            if style == "vocab":
                style = "colwise"
            # Which weight dimension holds the output features.
            out_dim = 0 if layout == "out_in" else 1
            in_dim = 1 - out_dim
            dim = out_dim if style == "colwise" else in_dim
        if m.weight.shape[dim] % tp:
            raise ImportError_(
                f"tp_plan['{layer}'] = '{style}': dimension {dim} of "
                f"{layer}.weight ({tuple(m.weight.shape)}) is not divisible by tp={tp}")
        spec = ["{}", "{}"]
        spec[dim] = '{"tp"}'
        shard[prim[id(m.weight)]] = f"[{spec[0]}, {spec[1]}]"
        if layout != "embedding" and style == "colwise" and \
                getattr(m, "bias", None) is not None:
            shard[prim[id(m.bias)]] = '[{"tp"}]'
    for n in list(shard):
        if n not in names:
            del shard[n]
    return shard


def _sharding_attr(spec: str) -> str:
    return f"#par.sharding<@mesh, {spec}>"


def _data_sharding(t: torch.Tensor, dp: int, batch_dim: int = 0) -> Optional[str]:
    if dp <= 1 or t.dim() == 0:
        return None
    if t.shape[batch_dim] % dp:
        raise ImportError_(
            f"a data input of shape {tuple(t.shape)}: its batch dimension "
            f"({t.shape[batch_dim]}) is not divisible by dp={dp}")
    dims = ["{}"] * t.dim()
    dims[batch_dim] = '{"dp"}'
    return "[" + ", ".join(dims) + "]"


def _block_lists(module: nn.Module):
    """The module's repeated blocks: (list name, [block names]) of its
    largest nn.ModuleList."""
    best = None
    for name, m in module.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) > 0:
            if best is None or len(m) > len(best[1]):
                best = (name, [f"{name}.{i}" if name else str(i) for i in range(len(m))])
    return best


def derive_stages(module: nn.Module, pp: int) -> Dict[str, int]:
    """Pipeline pins by module boundary: the largest ModuleList's blocks in
    pp contiguous groups (the first len % pp groups one block longer); the
    ops of block k's group are pinned to its stage. Embeddings, the final
    norm, the head and the loss are left to par-pipeline-split's cost model
    (they join the first and the last stage)."""
    if pp <= 1:
        return {}
    found = _block_lists(module)
    if found is None:
        raise ImportError_(
            f"pp={pp}: the module has no nn.ModuleList of blocks to split into "
            "pipeline stages (pass stages= to pin modules by name)")
    _, blocks = found
    if len(blocks) < pp:
        raise ImportError_(
            f"pp={pp}: only {len(blocks)} blocks ({blocks[0]}..) for {pp} stages")
    stages: Dict[str, int] = {}
    base, extra = divmod(len(blocks), pp)
    i = 0
    for s in range(pp):
        n = base + (1 if s < extra else 0)
        for b in blocks[i:i + n]:
            stages[b] = s
        i += n
    return stages


# --------------------------------------------------------------------------
# Export.

_TORCH_DIR = os.path.dirname(torch.__file__)


def _user_frame(stack_trace: str):
    frames = re.findall(r'File "([^"]+)", line ([0-9]+),', stack_trace or "")
    for path, line in reversed(frames):
        if not path.startswith(_TORCH_DIR) and "/site-packages/torch" not in path \
                and os.path.basename(path) != "frontend.py":
            return path, int(line)
    if frames:
        return frames[-1][0], int(frames[-1][1])
    return None


def _install_location_hook(prefix: str):
    """Each op's location: the innermost frame of the user's code, named by
    the module path (nn_module_stack) without the wrapper's prefix."""
    from torch_mlir.extras import fx_importer
    from torch_mlir.ir import Location

    cls = fx_importer.ContextCache
    original = cls.get_node_location

    def get_node_location(self, node):
        frame = _user_frame(node.meta.get("stack_trace") or "")
        loc = (Location.file(frame[0], frame[1], 0, context=self._c)
               if frame else Location.unknown(context=self._c))
        stack = node.meta.get("nn_module_stack")
        if stack:
            path = list(stack.values())[-1][0]
            if path.startswith(prefix):
                path = path[len(prefix):]
            elif path == prefix.rstrip("."):
                path = ""
            if path:
                loc = Location.name(path, childLoc=loc, context=self._c)
        return loc

    cls.get_node_location = get_node_location
    return lambda: setattr(cls, "get_node_location", original)


def _check_static(prog):
    """Every value's shape must be static: a data-dependent size (a boolean
    mask's nonzero count, say) is named with the line it comes from."""
    for node in prog.graph.nodes:
        val = node.meta.get("val")
        vals = val if isinstance(val, (tuple, list)) else [val]
        for v in vals:
            shape = getattr(v, "shape", None)
            if shape is None:
                continue
            if any(not isinstance(d, int) for d in shape):
                frame = _user_frame(node.meta.get("stack_trace") or "")
                where = f" at {frame[0]}:{frame[1]}" if frame else ""
                raise ImportError_(
                    f"'{node.target}'{where} has a dynamic shape {list(shape)}: par "
                    "compiles static shapes only (a data-dependent size, e.g. a boolean "
                    "mask's selection, cannot be sharded)")


def _check_random(prog):
    """No random numbers: an op torch tags nondeterministic_seeded (dropout,
    bernoulli, rand*) or attention with dropout_p > 0 is named with the line
    it comes from (the module is exported in eval mode, so a Dropout module
    is already off; these are functional calls)."""
    for node in prog.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        what = None
        packet = node.target._overloadpacket
        if packet in (torch.ops.aten.dropout, torch.ops.aten.native_dropout,
                      torch.ops.aten.feature_dropout, torch.ops.aten.alpha_dropout):
            p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.0)
            train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", True)
            if p and train is not False:
                what = f"is a dropout with p={p}"
        elif node.target in decompositions.DROPOUT_ARG:
            i, arg = decompositions.DROPOUT_ARG[node.target]
            p = node.kwargs.get(arg, node.args[i] if len(node.args) > i else 0.0)
            if p:
                what = f"has {arg}={p} (dropout draws random numbers)"
        elif torch.Tag.nondeterministic_seeded in node.target.tags:
            what = "draws random numbers"
        if what:
            frame = _user_frame(node.meta.get("stack_trace") or "")
            where = f" at {frame[0]}:{frame[1]}" if frame else ""
            raise ImportError_(
                f"'{node.target}'{where} {what}: par has no random-number ops "
                "(use dropout 0, or call module.eval() so that F.dropout(..., "
                "training=self.training) is off)")


def _check_module(module: nn.Module):
    for name, m in module.named_modules():
        if isinstance(m, nn.Dropout) and m.p > 0 and m.training:
            raise ImportError_(
                f"{name or 'the module'} is a Dropout with p={m.p}: par has no "
                "random-number ops; set p=0 (e.g. GPT2Config(resid_pdrop=0, "
                "embd_pdrop=0, attn_pdrop=0)) or call module.eval()")
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training:
            raise ImportError_(
                f"{name} is a BatchNorm in training mode: its running statistics "
                "are state par does not carry; call module.eval() or use LayerNorm")
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            # torch.export keeps padding_idx for the backward only; par's
            # gradient of the lookup is a scatter-add over every token.
            print(f"par-import: warning: {name} is an Embedding with padding_idx="
                  f"{m.padding_idx}: par trains that row like any other (torch leaves "
                  "it out of the gradient), so results differ when the pad token is "
                  "in a batch", file=sys.stderr)
    for name, p in module.named_parameters():
        if not p.requires_grad:
            raise ImportError_(
                f"parameter '{name}' has requires_grad=False: frozen parameters "
                "are not supported (par trains every parameter)")


def _loss_value(out):
    if hasattr(out, "loss") and isinstance(getattr(out, "loss"), torch.Tensor):
        return out.loss
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        return out["loss"]
    return out


def _describe(out) -> str:
    if isinstance(out, torch.Tensor):
        return f"a tensor of shape {tuple(out.shape)} and dtype {out.dtype}"
    if isinstance(out, (tuple, list)):
        return f"a {type(out).__name__} of {len(out)} values"
    return f"a {type(out).__name__}"


def _is_scalar_loss(v) -> bool:
    return isinstance(v, torch.Tensor) and v.numel() == 1 and v.dim() <= 1 \
        and v.dtype.is_floating_point


def import_module(module: nn.Module, example_inputs: Sequence[torch.Tensor],
                  loss_fn: Optional[Callable] = None, *, name: str = "model",
                  output: str = "model.mlir", weights: Optional[str] = None,
                  dp: int = 1, tp: int = 1, pp: int = 1,
                  tp_plan: Optional[Dict[str, str]] = None,
                  stages: Optional[Dict[str, int]] = None,
                  data: Optional[Sequence[Optional[str]]] = None,
                  vocab: Optional[int] = None,
                  par_opt: Optional[str] = None,
                  explain_plan: bool = False,
                  vocab_divisible_by: int = 128) -> ImportResult:
    """Exports `module`'s forward + loss to par's MLIR (text) at `output` and
    its initial weights (safetensors) at `weights` (default: output with
    .safetensors). The loss is `module(*example_inputs)` (a scalar tensor, or
    an output with .loss, e.g. HF models given labels), or
    `loss_fn(module, *example_inputs)`.
      dp, tp, pp   mesh sizes (axes "dp", "tp", "pp" of @mesh)
      tp_plan      {"layer name or glob": "colwise" | "rowwise"}; default
                   derive_tp_plan (Megatron pairs)
      stages       {"module name": stage} pins; default derive_stages
      data         per example input: "tokens", "targets" or None; default:
                   the first integer input tokens, the second targets
      vocab        bound of tokens/targets; default the first nn.Embedding's
      par_opt      path of par-opt, to check that par parses the output
      explain_plan print the tensor-parallel plan (format_plan): each layer's
                   role, why, and its tp collectives per step; with par_opt,
                   par's communication report of the AdamW step against them
      vocab_divisible_by  when tp does not divide the token embedding's
                   vocabulary, pad the table and the LM head to a multiple
                   of vocab_divisible_by x tp rows (Megatron's
                   --make-vocab-size-divisible-by; default 128, as its) so
                   that they split over tp; the padded logits are -inf (the
                   loss and gradients are the model's) and weights files
                   keep the real rows. 0: no padding, the table replicated
    """
    from torch_mlir import fx

    if not isinstance(module, nn.Module):
        raise ImportError_(f"expected an nn.Module, got {type(module).__name__}")
    example_inputs = tuple(example_inputs)
    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise ImportError_(f"example input #{i} is a {type(x).__name__}, not a tensor")
    for k, v in (("dp", dp), ("tp", tp), ("pp", pp)):
        if not isinstance(v, int) or v < 1:
            raise ImportError_(f"{k}={v}: expected a positive integer")
    if not isinstance(vocab_divisible_by, int) or vocab_divisible_by < 0:
        raise ImportError_(f"vocab_divisible_by={vocab_divisible_by}: expected a "
                           "non-negative integer (0: no padding)")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ImportError_(f"name '{name}' is not a valid function name")
    _check_module(module)
    was_training = module.training
    module.eval()  # Dropout p=0 and no BatchNorm (checked): eval == train.
    try:
        result = _import(module, example_inputs, loss_fn, name, output, weights,
                         dp, tp, pp, tp_plan, stages, data, vocab, par_opt, fx,
                         vocab_divisible_by)
    finally:
        module.train(was_training)
    if explain_plan:
        report = comm_report(result.mlir_path, par_opt) if par_opt else None
        print(format_plan(result, report), end="")
    return result


def _parameters(module):
    """The program's parameters (tied ones once), their tensors, and the
    other names of each tied one."""
    named = list(module.named_parameters())
    names = [n for n, _ in named]
    params = [p.detach() for _, p in named]
    by_id = {id(p): n for n, p in named}
    aliases: Dict[str, List[str]] = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        primary = by_id[id(p)]
        if n != primary:
            aliases.setdefault(primary, []).append(n)
    return names, params, aliases


def _export(module, names, params, buffers, example_inputs, loss_fn, run):
    """torch.export of the forward + loss with the parameters as leading
    arguments (checked static and free of random ops)."""

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = module

        def forward(self, *a):
            state = {**dict(zip(names, a[:len(names)])), **buffers}
            return run_functional(self.m, state, a[len(names):])

    def run_functional(m, state, xs):
        if loss_fn is None:
            out = torch.func.functional_call(m, state, xs)
        else:
            out = loss_fn(_Functional(m, state), *xs)
        return _loss_value(out).reshape(())

    # torch-mlir maps only persistent buffers: mark them so for the export.
    non_persistent = [(m, set(m._non_persistent_buffers_set)) for m in module.modules()]
    for m, _ in non_persistent:
        m._non_persistent_buffers_set.clear()
    try:
        try:
            prog = torch.export.export(Wrapper(), tuple(params) + tuple(example_inputs))
        except Exception as e:
            head = (str(e).strip().splitlines() or [""])[0]
            if "data-dependent" in str(e).lower() or "GuardOnDataDependent" in type(e).__name__:
                raise ImportError_(
                    "the model has a data-dependent (dynamic) shape, which par's "
                    "static SPMD programs cannot hold: " + head) from e
            raise ImportError_(f"torch.export failed: {type(e).__name__}: {head}") from e
    finally:
        for m, s in non_persistent:
            m._non_persistent_buffers_set.update(s)
    _check_static(prog)
    _check_random(prog)
    return prog


class _Segments(nn.Module):
    """A fused projection (nn.Linear or HF's Conv1D) as one layer per
    segment of its output features (children "0", "1", ...: the same kind
    of layer on a slice of the weight and bias), concatenated: what the
    fused layer computes. After export, _fold_segment_cats hands each
    segment's output straight to the slice that read it, so the
    concatenation disappears and each segment is column-parallel on its
    own (Megatron's q, k, v; gate, up)."""

    def __init__(self, layer, layout, bounds):
        super().__init__()
        self.bounds = list(zip(bounds, bounds[1:]))
        w = layer.weight.detach()
        b = layer.bias.detach() if getattr(layer, "bias", None) is not None else None
        for k, (lo, hi) in enumerate(self.bounds):
            if layout == "out_in":
                seg = nn.Linear(w.shape[1], hi - lo, bias=b is not None,
                                device="meta", dtype=w.dtype)
                seg.weight = nn.Parameter(w[lo:hi].clone())
            else:
                seg = type(layer).__new__(type(layer))
                nn.Module.__init__(seg)
                seg.nf = hi - lo
                seg.nx = w.shape[0]
                seg.weight = nn.Parameter(w[:, lo:hi].clone())
                if b is None:
                    seg.register_parameter("bias", None)
            if b is not None:
                seg.bias = nn.Parameter(b[lo:hi].clone())
            self.add_module(str(k), seg)

    def forward(self, x):
        return torch.cat([m(x) for m in self.children()], dim=-1)


def _pad_vocab(module, vocab, multiple):
    """Pads the token embedding's table (`vocab` rows) and every layer
    producing the vocabulary (the LM head, tied or not) to the next multiple
    of `multiple` (in place, new Parameters: a tied table stays tied), as
    Megatron does when tp does not divide the vocabulary. The heads' padded
    logits are -inf, so the loss, every gradient and sampled tokens are the
    unpadded model's, and the padded rows' gradients are zero. The HF
    configs' vocab_size follows (their loss views the logits by it). Returns
    the function that undoes it, and {parameter: (dim, vocab, padded)}."""
    padded = -(-vocab // multiple) * multiple
    prim = {id(p): n for n, p in module.named_parameters()}
    undo, pads, made = [], {}, {}

    def setattr_undo(obj, attr, value):
        undo.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, value)

    def pad(p, dim):
        if id(p) not in made:
            shape = list(p.shape)
            shape[dim] = padded - shape[dim]
            rows = torch.cat([p.detach(), torch.zeros(shape, dtype=p.dtype)], dim)
            made[id(p)] = nn.Parameter(rows, requires_grad=p.requires_grad)
            pads[prim[id(p)]] = (dim, vocab, padded)
        return made[id(p)]

    for _, m in _embedding_layers(module):
        if m.num_embeddings == vocab:
            setattr_undo(m, "weight", pad(m.weight, 0))
            setattr_undo(m, "num_embeddings", padded)
    for _, m, layout in _linear_layers(module):
        out_dim = 0 if layout == "out_in" else 1
        if m.weight.shape[out_dim] != vocab and id(m.weight) not in made:
            continue
        setattr_undo(m, "weight", pad(m.weight, out_dim))
        if getattr(m, "bias", None) is not None:
            setattr_undo(m, "bias", pad(m.bias, 0))
        for attr in ("out_features", "nf"):
            if getattr(m, attr, None) == vocab:
                setattr_undo(m, attr, padded)

        def masked(*xs, _forward=m.forward, **kw):
            y = _forward(*xs, **kw)
            real = torch.arange(y.shape[-1], device=y.device) < vocab
            return y.masked_fill(~real, float("-inf"))
        m.forward = masked
        undo.append((m, "forward", None))
    # The HF models' configs (the module or one it wraps, once each).
    configs = {id(c): c for c in (getattr(m, "config", None) for m in module.modules())
               if c is not None and getattr(c, "vocab_size", None) == vocab}
    for config in configs.values():
        setattr_undo(config, "vocab_size", padded)

    def restore():
        for obj, attr, old in reversed(undo):
            if attr == "forward" and old is None:
                del obj.forward
            else:
                setattr(obj, attr, old)
    return restore, pads


def _check_padded_loss(module, run, example_inputs, loss, vocab):
    """The padded module's loss must be the module's: padding only adds
    rows nothing reads and logits at -inf. A model that reads the
    vocabulary some other way (a loss over all logits, a hard-coded size)
    is named rather than imported wrong."""
    with torch.no_grad():
        try:
            out = float(_loss_value(run(module, *example_inputs)).reshape(()))
        except Exception as e:
            raise ImportError_(
                f"padding the vocabulary {vocab} to a multiple of tp broke the "
                f"forward ({type(e).__name__}: {e}); pass vocab_divisible_by=0 "
                "(--vocab-divisible-by 0) to keep the table replicated") from e
    if not abs(out - loss) <= 1e-5 * max(1.0, abs(loss)):
        raise ImportError_(
            f"padding the vocabulary {vocab} to a multiple of tp changed the loss "
            f"({loss:.7g} -> {out:.7g}); pass vocab_divisible_by=0 "
            "(--vocab-divisible-by 0) to keep the table replicated")


def _split_fused(module, cuts):
    """Replaces each fused layer of `cuts` whose output is cut at known
    points into segments by _Segments (in place); returns the function
    that puts the fused layers back, and the segments' parameters as
    {name: (fused parameter's name, dim, offset, size)} (par.slice)."""
    tied = _tied_weights(module)
    prim = {id(p): n for n, p in module.named_parameters()}
    layouts = {n: (m, layout) for n, m, layout in _linear_layers(module)}
    undo, slices = [], {}
    for layer, cut in cuts.items():
        if cut is None or layer not in layouts:
            continue
        m, layout = layouts[layer]
        width, points = cut
        out_dim = 0 if layout == "out_in" else 1
        if m.weight.shape[out_dim] != width or id(m.weight) in tied or \
                (getattr(m, "bias", None) is not None and id(m.bias) in tied):
            continue
        bounds = sorted(points | {0, width})
        if len(bounds) < 3:
            continue
        parent_name, _, attr = layer.rpartition(".")
        parent = module.get_submodule(parent_name) if parent_name else module
        seg = _Segments(m, layout, bounds)
        wname = prim[id(m.weight)]
        bname = prim[id(m.bias)] if getattr(m, "bias", None) is not None else None
        for k, (lo, hi) in enumerate(seg.bounds):
            slices[f"{layer}.{k}.weight"] = (wname, out_dim, lo, hi - lo)
            if bname:
                slices[f"{layer}.{k}.bias"] = (bname, 0, lo, hi - lo)
        setattr(parent, attr, seg)
        undo.append((parent, attr, m))

    def restore():
        for parent, attr, m in reversed(undo):
            setattr(parent, attr, m)
    return restore, slices


def _fold_segment_cats(prog):
    """In the exported graph, a concatenation (of _Segments' outputs) read
    only through slices or splits that each take one concatenated operand
    whole: each such piece becomes that operand, and the concatenation
    goes."""
    import operator

    graph = prog.graph_module.graph
    for cat in [n for n in graph.nodes if n.op == "call_function" and _op_name(n) == "cat"]:
        parts = cat.args[0]
        shape = _shape(cat)
        if shape is None or not all(_shape(p) is not None and len(_shape(p)) == len(shape)
                                    for p in parts):
            continue
        d = _norm_dim(cat.args[1] if len(cat.args) > 1 else cat.kwargs.get("dim", 0),
                      len(shape))
        bounds, at = {}, 0
        for p in parts:
            bounds[(at, at + _shape(p)[d])] = p
            at += _shape(p)[d]
        for u in list(cat.users):
            op = _op_name(u)
            if op == "slice" and _norm_dim(u.args[1], len(shape)) == d:
                start = u.args[2] if len(u.args) > 2 and u.args[2] is not None else 0
                end = u.args[3] if len(u.args) > 3 and u.args[3] is not None else shape[d]
                step = u.args[4] if len(u.args) > 4 else 1
                end = min(end + shape[d] if end < 0 else end, shape[d])
                start = start + shape[d] if start < 0 else start
                p = bounds.get((start, end)) if step == 1 else None
                if p is not None:
                    u.replace_all_uses_with(p)
                    graph.erase_node(u)
            elif op in ("split", "split_with_sizes", "chunk"):
                dim = u.args[2] if len(u.args) > 2 else u.kwargs.get("dim", 0)
                if _norm_dim(dim, len(shape)) != d:
                    continue
                size = u.args[1]
                if op == "chunk":
                    size = -(-shape[d] // size)
                if isinstance(size, int):
                    size = [min(size, shape[d] - a) for a in range(0, shape[d], size)]
                pieces, a = [], 0
                for k in size:
                    pieces.append(bounds.get((a, a + k)))
                    a += k
                getitems = list(u.users)
                if not all(g.target is operator.getitem and pieces[g.args[1]] is not None
                           for g in getitems):
                    continue
                for g in getitems:
                    g.replace_all_uses_with(pieces[g.args[1]])
                    graph.erase_node(g)
                graph.erase_node(u)
        if not cat.users:
            graph.erase_node(cat)
    graph.lint()
    prog.graph_module.recompile()


def _import(module, example_inputs, loss_fn, name, output, weights, dp, tp, pp,
            tp_plan, stages, data, vocab, par_opt, fx, vocab_divisible_by=128):
    # The weights file holds the module's own tensors, by their own names
    # (a fused projection's whole weight, however the program splits it).
    own = [(n, p.detach()) for n, p in module.named_parameters()]
    if not own:
        raise ImportError_("the module has no parameters: nothing to train")
    buffers = {n: b.detach().clone() for n, b in module.named_buffers()}

    def run(m, *xs):
        return _loss_value(loss_fn(m, *xs) if loss_fn is not None else m(*xs))

    # The loss, eagerly: must be one floating scalar.
    with torch.no_grad():
        try:
            out = run(module, *example_inputs)
        except Exception as e:
            raise ImportError_(f"running the module on the example inputs failed: "
                               f"{type(e).__name__}: {e}") from e
    if not _is_scalar_loss(out):
        raise ImportError_(
            "the forward returns no scalar loss: it returned " + _describe(out) +
            " (return a 0-d loss, an output with .loss, or pass loss_fn=)")
    loss = float(out.reshape(()))

    # Under a derived tp plan, a fused projection whose output is cut into
    # segments (q|k|v, gate|up) is exported as one layer per segment
    # (_Segments), so that each segment is column-parallel on its own: the
    # first export finds the cuts, the second exports the split module.
    restore_split = lambda: None  # noqa: E731
    restore_pad = lambda: None  # noqa: E731
    slices: Dict[str, tuple] = {}
    padded: Dict[str, tuple] = {}
    try:
        table_rows = _vocab_of(module)
        if tp > 1 and vocab_divisible_by and table_rows and table_rows % tp:
            restore_pad, padded = _pad_vocab(module, table_rows,
                                             vocab_divisible_by * tp)
            _check_padded_loss(module, run, example_inputs, loss, table_rows)
        for attempt in range(2):
            names, params, aliases = _parameters(module)
            prog = _export(module, names, params, buffers, example_inputs, loss_fn, run)
            if slices:
                _fold_segment_cats(prog)
            layer_roles: Dict[str, LayerRole] = {}
            cuts: Dict[str, tuple] = {}
            derived = derive_tp_plan(module, tp, prog, names, layer_roles, cuts) \
                if tp > 1 else {}
            if attempt or tp_plan is not None or not cuts:
                break
            restore_split, slices = _split_fused(module, cuts)
            if not slices:
                break
        plan = tp_plan if tp_plan is not None else derived
        if tp_plan is not None:
            # The roles say what the given plan does, its costs unknown.
            for lname, role in layer_roles.items():
                style = _match_plan(tp_plan, lname) or "replicated"
                derived_style = role.style
                role.style = style
                role.why = f"tp_plan= (derived: {derived_style})"
                role.comm = []
        restore = _install_location_hook("m.")
        try:
            # par's decompositions (attention, cumsum) on top of torch-mlir's.
            mod = fx.export_and_import(prog, output_type="linalg-on-tensors",
                                       func_name=name,
                                       decomposition_table=decompositions.table())
        except Exception as e:
            head = (str(e).strip().splitlines() or [""])[0]
            raise ImportError_(f"torch-mlir failed: {type(e).__name__}: {head}") from e
        finally:
            restore()
        shard = _param_shardings(module, set(names), tp, plan)
    finally:
        restore_split()
        restore_pad()

    # Data roles and the vocabulary bound.
    n_in = len(example_inputs)
    if data is None:
        roles: List[Optional[str]] = [None] * n_in
        ints = [i for i, x in enumerate(example_inputs)
                if not x.dtype.is_floating_point and x.dtype != torch.bool]
        for i, r in zip(ints, ("tokens", "targets")):
            roles[i] = r
    else:
        roles = list(data)
        if len(roles) != n_in:
            raise ImportError_(f"data= has {len(roles)} entries for {n_in} example inputs")
        for r in roles:
            if r not in (None, "tokens", "targets"):
                raise ImportError_(f"data= entry '{r}': expected 'tokens', 'targets' or None")
    if vocab is None:
        vocab = _vocab_of(module)
    if any(roles) and vocab is None:
        raise ImportError_("tokens/targets inputs need vocab= (the module has no nn.Embedding)")

    pins = stages if stages is not None else derive_stages(module, pp)
    for s in pins.values():
        if not (0 <= s < max(pp, 1)):
            raise ImportError_(f"stages=: stage {s} is outside 0..{pp - 1}")

    text, stage_counts = _annotate(mod, name, names, aliases, example_inputs, roles,
                                   vocab, shard, dp, tp, pp, pins,
                                   type(module).__name__, slices, padded)
    out_dir = os.path.dirname(os.path.abspath(output))
    os.makedirs(out_dir, exist_ok=True)
    with open(output, "w") as f:
        f.write(text)
    if par_opt:
        r = subprocess.run([par_opt, output, "-o", os.devnull],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise ImportError_(f"par-opt does not accept {output}:\n{r.stderr.strip()}")

    if weights is None:
        weights = os.path.splitext(output)[0] + ".safetensors"
    if weights:
        from safetensors.torch import save_file
        save_file({n: p.contiguous().clone() for n, p in own}, weights,
                  metadata={"format": "pt", "producer": "par-import"})
    return ImportResult(mlir_path=output, weights_path=weights or None, func_name=name,
                        param_names=names, aliases=aliases, data_roles=roles,
                        shardings=shard, loss=loss, stages=stage_counts,
                        layer_roles=layer_roles, tp_plan=dict(plan),
                        mesh={"dp": dp, "tp": tp, "pp": pp}, slices=slices,
                        padded=padded)


_COMM_LINE = re.compile(
    r'^\s+par\.(\w+) axes=\[(.*?)\] n=(\d+) (\w+)? ?(.*?): (\d+) bytes')


def parse_comm_report(text: str) -> Dict[str, List[dict]]:
    """par's communication report (par-compile comm-report=true, par-opt
    --par-comm-report) as {function: [{kind, axes, n, type, bytes}]}."""
    out: Dict[str, List[dict]] = {}
    fn = None
    for line in text.splitlines():
        m = re.match(r"par-comm-report: @(\w+)", line)
        if m:
            fn = m.group(1)
            out[fn] = []
            continue
        m = _COMM_LINE.match(line)
        if m and fn:
            axes = [a.strip().strip('"') for a in m.group(2).split(",") if a.strip()]
            out[fn].append({"kind": m.group(1), "axes": axes, "n": int(m.group(3)),
                            "type": m.group(5), "bytes": int(m.group(6))})
    return out


def comm_report(mlir_path: str, par_opt: str, optimizer: str = "adamw") -> str:
    """par's communication report of the train step compiled from an
    imported file (par-compile's pipeline, the IR thrown away)."""
    r = subprocess.run([par_opt, mlir_path,
                        f"--par-compile-pipeline=optimizer={optimizer} comm-report=true",
                        "-o", os.devnull], capture_output=True, text=True)
    if r.returncode != 0:
        raise ImportError_(f"par-opt could not compile {mlir_path} for the report:\n"
                           + r.stderr.strip()[:2000])
    return r.stdout


def format_plan(result: "ImportResult", report: Optional[str] = None) -> str:
    """The tensor-parallel plan, one line per Linear-like layer and embedding:
    its role, why, and the tp collectives Megatron's accounting gives it per
    step (per device, ring all-reduce 2(t-1)/t of the f32 activation, b the
    per-dp-rank batch); with par's communication report, the measured tp
    collectives of the step's gradient function against that sum."""
    dp, tp = result.mesh.get("dp", 1), result.mesh.get("tp", 1)
    ring = 2 * (tp - 1) / tp
    lines = [f"tensor-parallel plan of @{result.func_name} (dp={dp}, tp={tp}):"]
    total = count = 0
    for name, r in result.layer_roles.items():
        lines.append(f"  {name:44s} {r.style:10s} {r.why}")
        for what, elems in r.comm:
            if elems:
                b = int(ring * elems // dp * 4)
                total += b
                count += 5 if what.startswith("the loss") else 1
                lines.append(f"  {'':44s}   {what}: {b} bytes")
            else:
                lines.append(f"  {'':44s}   {what}")
    lines.append(f"  predicted over tp per step: {count} all-reduces, {total} bytes per device")
    if report is not None:
        comm = parse_comm_report(report)
        grads = [f for f in comm if f.endswith("_grad")]
        for f in grads:
            tpc = [c for c in comm[f] if "tp" in c["axes"]]
            got = sum(c["bytes"] for c in tpc)
            gathers = [c for c in tpc if c["kind"] in ("all_gather", "all_to_all")]
            lines.append(f"  par's report, @{f} over tp: {len(tpc)} collectives, {got} bytes "
                         f"per device ({len(gathers)} all_gather/all_to_all)"
                         + ("" if gathers else
                            " = predicted" if got == total else
                            f", {total - got} under the prediction" if got < total else
                            f", {got - total} over the prediction"))
    return "\n".join(lines) + "\n"


class _Functional:
    """The module with `state` substituted, for loss_fn(module, *inputs)."""

    def __init__(self, m, state):
        self._m, self._state = m, state

    def __call__(self, *a, **k):
        return torch.func.functional_call(self._m, self._state, a, k)


# The dialects of torch-mlir's linalg-on-tensors output that par reads.
_KNOWN_DIALECTS = {"func", "linalg", "tensor", "arith", "math", "cf", "builtin"}


def _where(loc) -> str:
    """'blocks.0.attn at model.py:31' from loc("blocks.0.attn"("model.py":31:0))."""
    text = str(loc)
    m = re.match(r'loc\("([^"]*)"\("([^"]*)":(\d+)', text)
    if m:
        return f"{m.group(1)} at {m.group(2)}:{m.group(3)}"
    m = re.match(r'loc\("([^"]*)":(\d+)', text)
    if m:
        return f"{m.group(1)}:{m.group(2)}"
    return text


def _check_dialects(func):
    """Ops par cannot read (torch-mlir's tm_tensor, torch ops left
    unlowered): one error naming each op kind and where it came from."""
    bad = {}

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    name = inner.operation.name
                    if name.split(".")[0] not in _KNOWN_DIALECTS:
                        bad.setdefault(name, _where(inner.location))
                        continue  # its own body (tm_tensor.yield) says nothing more
                    walk(inner.operation)

    walk(func.operation)
    if bad:
        raise ImportError_("torch-mlir left ops that par cannot read: " + "; ".join(
            f"'{n}' (from {w})" for n, w in bad.items()) +
            " (only func, linalg, tensor, arith, math and cf reach par)")


def _annotate(mod, name, names, aliases, example_inputs, roles, vocab, shard,
              dp, tp, pp, pins, module_type, slices=None, padded=None):
    """Argument attributes and stage pins through the MLIR Python API (builtin
    attributes only: torch-mlir's MLIR does not know the par dialect), then
    the mesh and the shardings as text."""
    from torch_mlir import ir

    ctx = mod.context
    func = None
    for op in mod.body.operations:
        if op.operation.name == "func.func":
            func = op
    if func is None:
        raise ImportError_("torch-mlir produced no function")
    _check_dialects(func)
    P = len(names)
    n_args = len(func.regions[0].blocks[0].arguments)
    if n_args != P + len(example_inputs):
        raise ImportError_(
            f"torch-mlir's function has {n_args} arguments for {P} parameters and "
            f"{len(example_inputs)} inputs (a parameter unused by the loss?)")
    placeholders = {}
    with ctx:
        dicts = []
        for i in range(n_args):
            entries = {}
            if i < P:
                n = names[i]
                entries["par.param"] = ir.UnitAttr.get()
                entries["par.name"] = ir.StringAttr.get(n)
                if n in aliases:
                    entries["par.aliases"] = ir.ArrayAttr.get(
                        [ir.StringAttr.get(a) for a in aliases[n]])
                if slices and n in slices:
                    of, dim, offset, size = slices[n]
                    i64 = ir.IntegerType.get_signless(64)
                    entries["par.slice"] = ir.DictAttr.get({
                        "of": ir.StringAttr.get(of),
                        "dim": ir.IntegerAttr.get(i64, dim),
                        "offset": ir.IntegerAttr.get(i64, offset)})
                elif padded and n in padded:
                    # The file's table is the leading rows; the rest pads.
                    dim, rows, _ = padded[n]
                    i64 = ir.IntegerType.get_signless(64)
                    entries["par.slice"] = ir.DictAttr.get({
                        "of": ir.StringAttr.get(n),
                        "dim": ir.IntegerAttr.get(i64, dim),
                        "offset": ir.IntegerAttr.get(i64, 0),
                        "extent": ir.IntegerAttr.get(i64, rows)})
                if n in shard:
                    key = f"__par_sharding_{i}__"
                    placeholders[key] = _sharding_attr(shard[n])
                    entries["par.sharding"] = ir.StringAttr.get(key)
            else:
                j = i - P
                x = example_inputs[j]
                if roles[j]:
                    entries["par.data"] = ir.StringAttr.get(roles[j])
                    entries["par.vocab"] = ir.IntegerAttr.get(
                        ir.IntegerType.get_signless(64), vocab)
                s = _data_sharding(x, dp)
                if s:
                    key = f"__par_sharding_{i}__"
                    placeholders[key] = _sharding_attr(s)
                    entries["par.sharding"] = ir.StringAttr.get(key)
            dicts.append(ir.DictAttr.get(entries))
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(dicts)

        stage_counts: Dict[str, int] = {}
        if pins:
            i64 = ir.IntegerType.get_signless(64)
            ordered = sorted(pins.items(), key=lambda kv: -len(kv[0]))

            def stage_of(loc_text):
                m = re.match(r'loc\("([^"]*)"\(', loc_text)
                if not m:
                    return None
                path = m.group(1)
                for mod_name, s in ordered:
                    if path == mod_name or path.startswith(mod_name + "."):
                        return s
                return None

            for op in func.regions[0].blocks[0].operations:
                s = stage_of(str(op.location))
                if s is not None:
                    op.attributes["par.stage"] = ir.IntegerAttr.get(i64, s)
                    stage_counts[str(s)] = stage_counts.get(str(s), 0) + 1
    text = mod.operation.get_asm(enable_debug_info=True)
    for key, attr in placeholders.items():
        text = text.replace(f'par.sharding = "{key}"', f"par.sharding = {attr}")
    axes = [f'"dp"={dp}', f'"tp"={tp}'] + ([f'"pp"={pp}'] if pp > 1 else [])
    mesh = f'  par.mesh @mesh [{", ".join(axes)}]'
    lines = text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith("module"):
            lines.insert(k + 1, mesh)
            break
    header = (f"// Imported by par-import (torch {torch.__version__}, torch-mlir) from "
              f"{module_type}: {P} parameters, mesh dp={dp} tp={tp} pp={pp}\n")
    return header + "\n".join(lines), stage_counts
