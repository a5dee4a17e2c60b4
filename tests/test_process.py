"""The flor command's process: its start-up forked beside torch's import, and its end
without Python's teardown. Each case runs in a fresh python, as the command does. And the
rewrite a parallel replay's parent hands over to its workers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from flor.errors import FlorError
from flor.launch import process_end
from flor.launch.worker import hand_over, taken_over


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_start_up_work_runs_in_a_child_while_torch_imports_and_says_what_it_said_here(
    tmp_path: Path,
) -> None:
    proc = _python(
        """
        import os, sys
        from flor.errors import FlorError
        from flor.runtime.process.reporter import Reporter
        from flor.launch.startup import while_torch_imports

        reporter, parent = Reporter(), os.getpid()

        def work(r):
            r.say("rewriting")
            r.warn_once("k", "only once")
            return {"pid": os.getpid(), "torch here": "torch" in sys.modules}

        got = while_torch_imports(work, reporter)
        reporter.warn_once("k", "said again")  # the child's warning counts here
        print(got["pid"] != parent, got["torch here"], "torch" in sys.modules)

        def mistake(r):
            r.say("before the mistake")
            raise FlorError("bad-thing", "a one-line mistake")

        def bug(r):
            raise KeyError("a bug")

        # torch is imported now: the work runs here, one after the other
        for work in (mistake, bug):
            try:
                while_torch_imports(work, reporter)
            except FlorError as e:
                print("error", e.slug, e.message, e.exit_code)
            except KeyError as e:
                print("bug", e)
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "True False True",
        "error bad-thing a one-line mistake 2",
        "bug 'a bug'",
    ]
    assert proc.stderr.splitlines() == [
        "flor: rewriting",
        "flor: warning: only once",
        "flor: before the mistake",
    ]


@pytest.mark.parametrize("kind", ["mistake", "bug"])
def test_a_mistake_or_a_bug_in_the_child_comes_back_to_the_parent(
    kind: str, tmp_path: Path
) -> None:
    proc = _python(
        f"""
        import os, sys
        from flor.errors import FlorError
        from flor.runtime.process.reporter import Reporter
        from flor.launch.startup import while_torch_imports

        parent = os.getpid()

        def mistake(r):
            r.say("before the mistake")
            raise FlorError("bad-thing", "a one-line mistake")

        def bug(r):
            assert os.getpid() != parent  # in the child
            return {{}}[1]

        try:
            while_torch_imports({kind}, Reporter())
        except FlorError as e:
            print("error", e.slug, e.message, e.exit_code)
        except RuntimeError as e:
            print("bug", "KeyError: 1" in str(e))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    if kind == "mistake":
        assert (proc.stdout, proc.stderr) == (
            "error bad-thing a one-line mistake 2\n",
            "flor: before the mistake\n",
        )
    else:
        assert (proc.stdout, proc.stderr) == ("bug True\n", "")


def test_the_process_ends_as_python_would_have_ended_it_only_sooner(tmp_path: Path) -> None:
    proc = _python(
        """
        import atexit, sys, threading, time
        from flor.launch import process_end

        left_open = open("unclosed.txt", "w")  # written out only by its destructor
        left_open.write("every line\\n")
        binary = open("unclosed.bin", "wb", buffering=1 << 20)
        binary.write(b"bytes")

        def late():
            time.sleep(0.3)
            with open("thread.txt", "w") as f:
                f.write("done")

        threading.Thread(target=late).start()  # not a daemon: waited for
        atexit.register(lambda: open("atexit.txt", "w").write(
            open("thread.txt").read() + " before atexit"))
        atexit.register(print, "said at exit")
        sys.stdout.write("buffered, unflushed")
        process_end.end(3)
        print("never")
        """,
        tmp_path,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "buffered, unflushedsaid at exit\n"
    assert (tmp_path / "unclosed.txt").read_text() == "every line\n"
    assert (tmp_path / "unclosed.bin").read_bytes() == b"bytes"
    assert (tmp_path / "atexit.txt").read_text() == "done before atexit"


def test_exit_codes_are_what_sys_exit_would_make_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert [process_end.exit_status(c) for c in (None, 0, 2, 256 + 1, -1)] == [0, 0, 2, 1, 255]
    assert process_end.exit_status("flor: error: a message") == 1
    assert capsys.readouterr().err == "flor: error: a message\n"


def test_a_parallel_replays_workers_take_its_rewrite_over(tmp_path: Path) -> None:
    """The parent of `--workers` rewrites the edit once and hands it over; a worker waits for
    the whole file, and gives up in one line if its parent ended without handing it over."""
    path = str(tmp_path / "rewritten.pickle")
    later = threading.Timer(0.2, hand_over, (path, {"source": "print(1)\n"}))
    later.start()
    assert taken_over(path, os.getpid()) == {"source": "print(1)\n"}
    assert not os.path.exists(path + ".tmp")
    gone = _python("import os; print(os.getpid())", tmp_path)
    with pytest.raises(FlorError, match="has ended"):
        taken_over(str(tmp_path / "never"), int(gone.stdout))


def test_flor_run_imports_torch_beside_its_start_up_not_before(tmp_path: Path) -> None:
    """torch's import is the script's own cost: ``flor run`` imports it while a child
    rewrites the script (``launch.startup``), so the two overlap and the import is never
    charged to flor's start-up. A check before it that imported torch (whether the run
    resumes one: only with --resume or --from) charged the DQN shape's run about 1 s of its
    budget, and rewrote the script after torch, not beside it."""
    (tmp_path / "tiny.py").write_text(
        "import flor\nfor i in flor.it(range(3)):\n    print(i)\n", encoding="utf-8"
    )
    proc = _python(
        """
        import sys, traceback

        class First:
            seen = False

            def find_spec(self, name, path=None, target=None):
                if name == "torch" and not self.seen:
                    self.seen = True
                    files = [f.filename for f in traceback.extract_stack()]
                    by = [f for f in files if "flor" in f and "importlib" not in f][-1]
                    print("torch first imported by", by, file=sys.stderr, flush=True)
                return None

        sys.meta_path.insert(0, First())
        sys.argv = ["flor", "run", "--name", "tiny", "tiny.py"]
        from flor.cli import main

        main()
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "torch first imported by" in proc.stderr
    first = proc.stderr.split("torch first imported by ", 1)[1].splitlines()[0]
    assert first.endswith(os.path.join("flor", "launch", "startup.py")), first
