"""par-import: a PyTorch module to par's annotated MLIR and its initial weights.

  par-import model.py:make_model -o model.mlir [--dp N] [--tp N] [--pp N]

make_model() (any callable in model.py) returns the module, or
(module, example_inputs), or (module, example_inputs, loss_fn); with only a
module, --example DTYPE[SHAPE] gives each input (random, seeded; integer
inputs in [0, vocab)). The loss is module(*inputs) (a scalar, or an output
with .loss) or loss_fn(module, *inputs). Writes model.mlir (text) and
model.safetensors (the module's parameters under PyTorch's names). A thin
layer over par.import_module (python/par/frontend.py).
"""

import argparse
import importlib.util
import os
import re
import sys

import torch

import par
from par.frontend import ImportError_

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32,
          "i1": torch.bool}


def fail(msg):
    print(f"par-import: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load_factory(spec):
    if ":" not in spec:
        fail(f"'{spec}': expected FILE.py:FUNCTION")
    path, func = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    s = importlib.util.spec_from_file_location("par_user_model", path)
    mod = importlib.util.module_from_spec(s)
    try:
        s.loader.exec_module(mod)
    except Exception as e:
        fail(f"{path}: {type(e).__name__}: {e}")
    if not hasattr(mod, func):
        fail(f"{path} has no '{func}'")
    return getattr(mod, func)


def example(spec, vocab, gen):
    m = re.fullmatch(r"(\w+)\[([0-9, ]*)\]", spec.strip())
    if not m or m.group(1) not in DTYPES:
        fail(f"--example '{spec}': expected DTYPE[D0,D1,...] with DTYPE one of "
             + ", ".join(DTYPES))
    shape = [int(d) for d in m.group(2).split(",") if d.strip()]
    dt = DTYPES[m.group(1)]
    if dt.is_floating_point:
        return torch.randn(shape, generator=gen).to(dt)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if vocab is None:
        fail(f"--example '{spec}': integer inputs need --vocab (the module has no nn.Embedding)")
    return torch.randint(0, vocab, shape, generator=gen, dtype=dt)


def main():
    p = argparse.ArgumentParser(prog="par-import", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="FILE.py:FUNCTION returning the module (and inputs)")
    p.add_argument("-o", "--output", default="model.mlir")
    p.add_argument("--weights", help="initial weights (default: OUTPUT with .safetensors)")
    p.add_argument("--name", default=None, help="function name (default: FUNCTION's)")
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--tp-plan", default=None,
                   help="LAYER=colwise|rowwise|vocab|replicated,... (globs allowed); default: derived from the dataflow (--explain-plan shows it)")
    p.add_argument("--example", action="append", default=[],
                   help="an example input DTYPE[SHAPE] (when FUNCTION returns only the module)")
    p.add_argument("--data", default=None,
                   help="roles of the inputs, e.g. tokens,targets or -,targets (default: the "
                        "first integer input tokens, the second targets)")
    p.add_argument("--vocab", type=int, default=None)
    p.add_argument("--vocab-divisible-by", type=int, default=128,
                   help="when tp does not divide the vocabulary, pad the token embedding "
                        "and the LM head to a multiple of this x tp rows so that they are "
                        "vocabulary-parallel (Megatron's --make-vocab-size-divisible-by; "
                        "default 128); 0: no padding, the table replicated")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--explain-plan", action="store_true",
                   help="print each Linear-like layer's and embedding's tensor-parallel role, "
                        "why, and the tp collectives it costs per step; with par-opt "
                        "(PAR_OPT), par's communication report of the AdamW step against "
                        "that sum")
    a = p.parse_args()

    torch.manual_seed(a.seed)
    made = load_factory(a.model)()
    loss_fn = None
    if isinstance(made, torch.nn.Module):
        module, inputs = made, None
    elif isinstance(made, tuple) and len(made) in (2, 3) and isinstance(made[0], torch.nn.Module):
        module, inputs = made[0], tuple(made[1])
        loss_fn = made[2] if len(made) == 3 else None
    else:
        fail(f"{a.model} returned a {type(made).__name__}: expected a module, "
             "(module, inputs) or (module, inputs, loss_fn)")
    vocab = a.vocab if a.vocab is not None else par.frontend._vocab_of(module)
    if inputs is None:
        if not a.example:
            fail(f"{a.model} returned only the module: give its inputs with --example DTYPE[SHAPE]")
        gen = torch.Generator().manual_seed(a.seed)
        inputs = tuple(example(s, vocab, gen) for s in a.example)
    elif a.example:
        fail("--example given, but the model function returned its inputs")
    plan = None
    if a.tp_plan:
        plan = {}
        for item in a.tp_plan.split(","):
            if "=" not in item:
                fail(f"--tp-plan '{item}': expected LAYER=colwise|rowwise")
            k, v = item.split("=", 1)
            plan[k.strip()] = v.strip()
    data = None
    if a.data:
        data = [None if r in ("-", "") else r for r in a.data.split(",")]
    name = a.name or re.sub(r"\W", "_", a.model.rsplit(":", 1)[1])
    if name[0].isdigit():
        name = "m_" + name
    try:
        r = par.import_module(module, inputs, loss_fn, name=name, output=a.output,
                              weights=a.weights, dp=a.dp, tp=a.tp, pp=a.pp, tp_plan=plan,
                              data=data, vocab=a.vocab, par_opt=os.environ.get("PAR_OPT"),
                              explain_plan=a.explain_plan,
                              vocab_divisible_by=a.vocab_divisible_by)
    except ImportError_ as e:
        fail(str(e))
    n = sum(p.numel() for p in module.parameters())
    print(f"par-import: @{r.func_name}: {len(r.param_names)} parameters ({n} values), "
          f"loss {r.loss:.6g} on the example inputs")
    for pn in r.param_names:
        extra = f" (also {', '.join(r.aliases[pn])})" if pn in r.aliases else ""
        if pn in r.slices:
            of, dim, offset, size = r.slices[pn]
            extra += f" (of {of}, dimension {dim} from {offset}, size {size})"
        if pn in r.padded:
            dim, rows, size = r.padded[pn]
            extra += f" (padded in dimension {dim} from {rows} to {size} rows)"
        s = r.shardings.get(pn)
        print(f"  {pn}{extra}: {'sharded ' + s if s else 'replicated'}")
    for i, role in enumerate(r.data_roles):
        print(f"  input {i}: {role or 'data'} {tuple(inputs[i].shape)} {inputs[i].dtype}")
    if r.stages:
        print("  stage pins (ops): " + ", ".join(f"stage {k}: {v}" for k, v in sorted(r.stages.items())))
    print(f"par-import: wrote {r.mlir_path}" + (f" and {r.weights_path}" if r.weights_path else ""))


if __name__ == "__main__":
    main()
