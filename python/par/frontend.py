"""PyTorch modules into par: torch.export -> torch-mlir (linalg on tensors) ->
par's annotated MLIR text, plus the module's initial weights.

The exported function is the forward + loss with every parameter as a
leading argument (named_parameters() order; tied parameters once), then
the example inputs. Its arguments carry

  par.param                      on parameters (par-autodiff differentiates them)
  par.name = "fc1.weight"        PyTorch's name; par.aliases the tied names
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


def derive_tp_plan(module: nn.Module, tp: int) -> Dict[str, str]:
    """Megatron's layout from the module structure: Linear layers pair up in
    definition order, the first of a pair column-parallel (its output
    features sharded), the second row-parallel (its input features sharded),
    so that the pair needs one all-reduce (attention: qkv then the output
    projection; MLP: up then down). A layer producing the vocabulary (the LM
    head: out_features == the embedding's num_embeddings) stays out of the
    pairing: column-parallel (vocabulary-parallel) when tp divides the
    vocabulary and its weight is not tied to the embedding, else
    replicated. A pair whose sharded dimension tp does not divide stays
    replicated."""
    vocab = _vocab_of(module)
    plan: Dict[str, str] = {}
    layers = []
    tied = _tied_weights(module)
    for name, m, layout in _linear_layers(module):
        out_f = m.weight.shape[0] if layout == "out_in" else m.weight.shape[1]
        if vocab is not None and out_f == vocab:
            # Megatron's vocabulary-parallel LM head: its logits stay split
            # over the vocabulary (the loss's max and sums all-reduce), unless
            # its weight is tied to the token embedding, which stays whole.
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
    layers = {n: (m, layout) for n, m, layout in _linear_layers(module)}
    for layer, (m, layout) in layers.items():
        style = _match_plan(tp_plan, layer)
        if style is None:
            continue
        if style not in ("colwise", "rowwise"):
            raise ImportError_(
                f"tp_plan['{layer}'] = '{style}': expected 'colwise' or 'rowwise'")
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
        shard[f"{layer}.weight"] = f"[{spec[0]}, {spec[1]}]"
        if style == "colwise" and getattr(m, "bias", None) is not None:
            shard[f"{layer}.bias"] = '[{"tp"}]'
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
                  par_opt: Optional[str] = None) -> ImportResult:
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
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ImportError_(f"name '{name}' is not a valid function name")
    _check_module(module)
    was_training = module.training
    module.eval()  # Dropout p=0 and no BatchNorm (checked): eval == train.
    try:
        return _import(module, example_inputs, loss_fn, name, output, weights,
                       dp, tp, pp, tp_plan, stages, data, vocab, par_opt, fx)
    finally:
        module.train(was_training)


def _import(module, example_inputs, loss_fn, name, output, weights, dp, tp, pp,
            tp_plan, stages, data, vocab, par_opt, fx):
    # Parameters (tied ones once) and every name each one has.
    named = list(module.named_parameters())
    names = [n for n, _ in named]
    params = [p.detach() for _, p in named]
    by_id = {id(p): n for n, p in named}
    aliases: Dict[str, List[str]] = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        primary = by_id[id(p)]
        if n != primary:
            aliases.setdefault(primary, []).append(n)
    # Buffers (a causal mask) become constants of the program: copies, so
    # that torch.export lifts them as constant tensors (torch-mlir has no
    # state mapping for a non-persistent module buffer).
    buffers = {n: b.detach().clone() for n, b in module.named_buffers()}
    if not names:
        raise ImportError_("the module has no parameters: nothing to train")

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

    restore = _install_location_hook("m.")
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
        _check_static(prog)
        _check_random(prog)
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
        for m, s in non_persistent:
            m._non_persistent_buffers_set.update(s)

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

    plan = tp_plan if tp_plan is not None else derive_tp_plan(module, tp)
    shard = _param_shardings(module, set(names), tp, plan)
    pins = stages if stages is not None else derive_stages(module, pp)
    for s in pins.values():
        if not (0 <= s < max(pp, 1)):
            raise ImportError_(f"stages=: stage {s} is outside 0..{pp - 1}")

    text, stage_counts = _annotate(mod, name, names, aliases, example_inputs, roles,
                                   vocab, shard, dp, tp, pp, pins,
                                   type(module).__name__)
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
        save_file({n: p.contiguous().clone() for n, p in zip(names, params)}, weights,
                  metadata={"format": "pt", "producer": "par-import"})
    return ImportResult(mlir_path=output, weights_path=weights or None, func_name=name,
                        param_names=names, aliases=aliases, data_roles=roles,
                        shardings=shard, loss=loss, stages=stage_counts)


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
              dp, tp, pp, pins, module_type):
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
