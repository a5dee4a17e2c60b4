"""``flor.log`` values: turned into JSON-friendly data at the call site."""

from __future__ import annotations

import math
import sys
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Scalars stay scalars; tensors and arrays become (nested) lists; else ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return to_jsonable(value.item() if value.numel() == 1 else value.tolist())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, (np.ndarray, np.generic)):
        return to_jsonable(value.tolist())
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return repr(value)
