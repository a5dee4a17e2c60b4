"""Run a script as ``__main__``, then end the process without the interpreter's teardown, as
flor's own processes end (``flor.launch.process_end``): a plain torchrun of a gloo script
aborts a rank in that teardown now and then on this host, after its output is complete
("terminate called without an active exception": 3 of 12 runs of the accelerate script,
every try of some loaded suites). The ground truth of the distributed tests runs through it.

    python exit_before_teardown.py SCRIPT ARGS
"""

import os
import runpy
import sys
import traceback


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        status = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
