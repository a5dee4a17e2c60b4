"""Each instrumenter rule as before/after source text (LibCST's CodemodTest style)."""

from __future__ import annotations

import textwrap

from flor.sources import ENTRY, SourceFile
from flor.transform import fingerprints, instrument
from flor.transform.fingerprints import block_openings
from flor.transform.instrumenter import instrument_project


def rewrite(source: str) -> str:
    result = instrument(textwrap.dedent(source), "t.py")
    assert result.error is None, result.error
    return result.source


def test_epoch_loop_with_inline_batch_loop() -> None:
    before = '''\
        """Train."""
        from __future__ import annotations
        import torch
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            # train
            for x in data:
                loss = model(x).sum()
                loss.backward()
                opt.step()
            print(epoch, loss.item())  # keep me
    '''
    after = '''\
        """Train."""
        from __future__ import annotations
        import flor
        import torch
        model = torch.nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in flor.it(range(3)):
            # train
            if flor.SkipBlock.step_into("module.L0"):
                for x in data:
                    loss = model(x).sum()
                    loss.backward()
                    opt.step()
            model, opt, loss = flor.SkipBlock.end(model=model, opt=opt, loss=globals().get("loss", flor.UNBOUND))
            print(epoch, loss.item())  # keep me
    '''
    assert rewrite(before) == textwrap.dedent(after)


def test_while_loops_become_flor_it_over_a_condition() -> None:
    before = """\
        import torch
        step = 0
        while True:
            loss = model(x)
            loss.backward()
            opt.step()
            step += 1
            if step > 3:
                break
    """
    out = rewrite(before)
    assert "for _flor_step in flor.it(lambda: True):" in out
    assert "break" in out
    assert "while step < n:" not in rewrite(before.replace("while True:", "while step < n:"))
    assert "flor.it(lambda: step < n)" in rewrite(before.replace("while True:", "while step < n:"))


def test_call_block_in_function_with_global_state() -> None:
    before = """\
        import torch
        best = 0.0

        def train(model, opt):
            global best
            model(1).backward()
            opt.step()
            best = 1.0

        def main():
            model = torch.nn.Linear(1, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(2):
                train(model, opt)
                print(best)

        main()
    """
    out = rewrite(before)
    assert '        if flor.SkipBlock.step_into("main.L0"):\n            train(model, opt)\n' in out
    assert (
        'model, opt, globals()["best"] = flor.SkipBlock.end(model=model, opt=opt, best=globals().get("best", flor.UNBOUND))'
        in out
    )


def test_conditionally_bound_names_cannot_raise_name_error() -> None:
    before = """\
        def main(use_opt):
            model = make()
            if use_opt:
                opt = make_opt(model)
            for epoch in range(2):
                for x in data:
                    model(x).backward()
                    if use_opt:
                        opt.step()

        main(False)
    """
    out = rewrite(before)
    assert (
        'model, opt = flor.SkipBlock.end(model=model, opt=locals().get("opt", flor.UNBOUND))' in out
    )


def test_a_value_the_loop_keeps_for_after_it_is_carried() -> None:
    """``best_state`` is rebound outside the block and read only after the loop: a replay
    that skips the iteration that copied it must restore it (it exceeds the cheap values)."""
    before = """\
        def main():
            best, best_state = 1e9, None
            for epoch in range(3):
                for x in data:
                    model(x).backward()
                    opt.step()
                val = evaluate(model)
                if val < best:
                    best, best_state = val, copy.deepcopy(model.state_dict())
            model.load_state_dict(best_state)

        main()
    """
    out = rewrite(before)
    assert "best=best, best_state=best_state)" in out


def test_instrumenting_twice_changes_nothing() -> None:
    once = rewrite(
        "import torch\nfor e in range(2):\n    for x in d:\n        m(x).backward()\n        o.step()\n"
    )
    assert instrument(once, "t.py").source == once


def test_opt_out_comments() -> None:
    source = "for e in range(2):  # flor: skip\n    for x in d:\n        m(x).backward()\n"
    assert rewrite(source) == source
    source = "# flor: skip-file\n" + source.replace("  # flor: skip", "")
    assert rewrite(source) == source


def test_syntax_error_names_line_and_column() -> None:
    result = instrument("x = 1\ndef f(:\n", "t.py")
    assert result.error is not None and result.error.startswith("2:")
    assert result.source == "x = 1\ndef f(:\n"


def test_block_identity_survives_edits_elsewhere() -> None:
    source = "import torch\ndef main():\n    for e in range(2):\n        for x in d:\n            m(x).backward()\n        print(e)\nmain()\n"
    edited = source.replace(
        "        print(e)\n", "        print(e)\n        print('more', m.weight.grad)\n"
    )
    edited = "import os\n" + edited
    assert fingerprints(rewrite(source)) == fingerprints(rewrite(edited))


def test_a_replays_block_begins_where_the_recorded_one_did() -> None:
    """Reading the forward's loss after the block moves the forward out of a new block; a
    replay's instrumenting keeps it in, as the record had it, so the blocks stay the same."""
    source = textwrap.dedent(
        """\
        for step in range(3):
            x = data[step]
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """
    )
    edited = source + "    print(loss.item())\n"
    recorded = rewrite(source)
    openings = block_openings([recorded])
    assert openings == {"x = data[step]"}
    fresh = instrument_project(SourceFile(ENTRY, "t.py", edited), lambda m: None)
    anchored = instrument_project(SourceFile(ENTRY, "t.py", edited), lambda m: None, openings)
    assert fingerprints(fresh.entry.source) != fingerprints(recorded)
    assert fingerprints(anchored.entry.source) == fingerprints(recorded)
    assert "loss=" in anchored.entry.source  # the block now returns it: the edit reads it


def test_early_return_in_block_is_refused_with_reason() -> None:
    source = "def f():\n    for e in range(2):\n        for x in d:\n            m(x).backward()\n            return 1\nf()\n"
    result = instrument(source, "t.py")
    assert result.source == source
    assert "t.py:2: warning:" in result.report() and "leaves the block early" in result.report()


def test_report_names_loop_block_and_state() -> None:
    source = "m, o = M(), O()\nfor e in range(2):\n    for x in d:\n        m(x).backward()\n        o.step()\n"
    report = instrument(source, "t.py").report()
    assert "t.py:2: main loop `for e in range(2)` in <module>" in report
    assert "t.py:3-5: block module.L0 (the inline training loop); state: m, o" in report
