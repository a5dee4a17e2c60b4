"""Test-only: count backward passes of every Python process started with this folder on
PYTHONPATH and COUNT_BACKWARDS_DIR set, one file per process (replays fan out)."""

import os

_folder = os.environ.get("COUNT_BACKWARDS_DIR")
if _folder:
    import atexit

    import torch

    _count = [0]
    _backward = torch.Tensor.backward

    def _counting(self, *args, **kwargs):
        _count[0] += 1
        return _backward(self, *args, **kwargs)

    torch.Tensor.backward = _counting

    def _write():
        with open(os.path.join(_folder, f"{os.getpid()}.count"), "w") as f:
            f.write(str(_count[0]))

    atexit.register(_write)
