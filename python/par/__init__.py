"""par's Python side: the PyTorch frontend (par.import_module)."""

from .frontend import ImportError_ as FrontendError
from .frontend import ImportResult, derive_stages, derive_tp_plan, import_module

__all__ = ["import_module", "ImportResult", "FrontendError", "derive_tp_plan",
           "derive_stages"]
