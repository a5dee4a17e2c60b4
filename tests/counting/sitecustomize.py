"""Test-only, for every Python process started with this folder on PYTHONPATH: with
COUNT_BACKWARDS_DIR set, count its backward passes, one file per process (replays fan out),
and with KILL_AT_BACKWARD=N also kill the process (SIGKILL) right after its N-th; with
COUNT_PARSES_FILE set, append a line per parse of a source (``ast``/``libcst``, the SHA-1 of
the text) to that file, forked children included."""

import os

_folder = os.environ.get("COUNT_BACKWARDS_DIR")
if _folder:
    import atexit

    import torch

    _count = [0]
    _backward = torch.Tensor.backward

    _kill_at = int(os.environ.get("KILL_AT_BACKWARD", "0"))

    def _counting(self, *args, **kwargs):
        _count[0] += 1
        done = _backward(self, *args, **kwargs)
        if _count[0] == _kill_at:  # after a moment: a real step takes one, the writer commits
            import signal
            import time

            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        return done

    torch.Tensor.backward = _counting

    def _write():
        with open(os.path.join(_folder, f"{os.getpid()}.count"), "w") as f:
            f.write(str(_count[0]))

    atexit.register(_write)


_parses = os.environ.get("COUNT_PARSES_FILE")
if _parses:
    import ast
    import hashlib

    def _noting(kind, parse):
        def counted(source, *args, **kwargs):
            text = source.decode() if isinstance(source, bytes) else source
            if isinstance(text, str):
                with open(_parses, "a") as f:
                    f.write(f"{kind} {hashlib.sha1(text.encode()).hexdigest()}\n")
            return parse(source, *args, **kwargs)

        return counted

    ast.parse = _noting("ast", ast.parse)
    import libcst

    libcst.parse_module = _noting("libcst", libcst.parse_module)
