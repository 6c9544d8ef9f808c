"""check_weights.py FILE.py:FUNC WEIGHTS.safetensors: the initial weights
par-import wrote are the module's parameters, by name, bit for bit."""
import importlib.util
import sys

import torch
from safetensors.torch import load_file

path, func = sys.argv[1].rsplit(":", 1)
spec = importlib.util.spec_from_file_location("m", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
torch.manual_seed(0)  # as par-import --seed 0
module = getattr(mod, func)()[0]
saved = load_file(sys.argv[2])
params = dict(module.named_parameters())
ok = set(saved) == set(params) and all(torch.equal(saved[n], p.detach()) for n, p in params.items())
print(f"{len(saved)} tensors, names and values equal to the module's parameters: "
      f"{'OK' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
