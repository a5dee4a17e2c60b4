"""Where an edit's statements run (flor.transform.hindsight) and which iterations that is."""

from __future__ import annotations

import torch

from flor.replay.triggers import needed_iterations
from flor.runs.catalogue import RecordedRun
from flor.runs.records import RunMeta
from flor.runtime.journal.conditions import Guards, Lookahead, lookup_in, no_lookup
from flor.runtime.journal.loop_scalars import LoopScalars, replayed
from flor.transform.hindsight import analyze, analyze_project, periodic

LOOP = """\
import flor
iter_num = 0
eval_interval = 4
for _ in flor.it(lambda: True):
    if iter_num % eval_interval == 0 and master:
        print("eval", iter_num)
    if flor.SkipBlock.step_into("train"):
        loss = step(model)
    model, loss, iter_num = flor.SkipBlock.end(model=model, loss=loss, iter_num=iter_num)
    iter_num += 1
    if iter_num > 10:
        break
print("done")
"""


DQN_LOOP = """\
import flor
for step in flor.it(range(n)):
    if flor.SkipBlock.step_into("act"):
        env_step()
    flor.SkipBlock.end()
    if step > learning_starts and step % 4 == 0:
        update()
    if step % 100 == 0:
        print("step", step)
"""


def edit(old: str, new: str) -> str:
    assert old in LOOP
    return LOOP.replace(old, new)


def test_a_line_inside_a_periodic_branch_runs_where_its_test_holds() -> None:
    found = analyze(
        LOOP,
        edit(
            '        print("eval", iter_num)\n',
            '        print("eval", iter_num)\n        print(loss)\n',
        ),
    )
    assert found.sparse and not found.after_loop
    ((test,),) = found.guards
    assert test.test == "iter_num % eval_interval == 0 and master" and test.holds
    assert test.shifts == (("iter_num", 0),) and found.counters == {"iter_num"}


def test_a_new_test_after_the_counter_sees_it_advanced() -> None:
    found = analyze(
        LOOP,
        edit(
            "    iter_num += 1\n",
            "    iter_num += 1\n    if iter_num % 3 == 0:\n        print(loss)\n    else:\n        pass\n",
        ),
    )
    tests = [guard[0] for guard in found.guards]
    assert [(t.test, t.holds, t.shifts) for t in tests] == [
        ("iter_num % 3 == 0", True, (("iter_num", 1),)),
        ("iter_num % 3 == 0", False, (("iter_num", 1),)),
    ]


def test_a_line_inside_the_block_counts_too() -> None:
    found = analyze(
        LOOP,
        edit(
            "        loss = step(model)\n",
            "        loss = step(model)\n        if iter_num % 5 == 0:\n            print(loss)\n",
        ),
    )
    assert found.sparse and found.guards[0][0].test == "iter_num % 5 == 0"


def test_dense_where_a_line_runs_every_iteration_or_a_test_reads_state() -> None:
    every = analyze(LOOP, edit("    iter_num += 1\n", "    print(loss)\n    iter_num += 1\n"))
    assert every.dense == "line 10 runs in every iteration" and every.expected
    on_loss = analyze(
        LOOP,
        edit("    iter_num += 1\n", "    if loss > 3:\n        print(loss)\n    iter_num += 1\n"),
    )
    assert on_loss.dense is not None and "reads loss" in on_loss.dense and not on_loss.expected
    call = analyze(
        LOOP,
        edit(
            "    iter_num += 1\n",
            "    if should_log(iter_num):\n        print(loss)\n    iter_num += 1\n",
        ),
    )
    assert call.dense is not None and "calls should_log()" in call.dense


def test_a_counter_advanced_under_a_condition_is_not_known() -> None:
    source = edit("    iter_num += 1\n", "    if loss:\n        iter_num += 1\n")
    found = analyze(
        source, source.replace('print("eval", iter_num)', 'print("eval", iter_num, loss)')
    )
    assert found.dense is not None and "iter_num, which the loop body assigns" in found.dense


def test_attributes_nothing_assigns_are_known() -> None:
    with_args = LOOP.replace("eval_interval == 0", "args.log_every == 0")
    found = analyze(
        with_args, with_args.replace('print("eval", iter_num)', 'print("eval", iter_num, loss)')
    )
    assert found.sparse
    assigned = "args.log_every = 3\n" + with_args
    found = analyze(assigned, assigned.replace('print("eval", iter_num)', "print(loss)"))
    assert found.dense is not None and "log_every" in found.dense


def test_edits_outside_the_loop() -> None:
    after = analyze(LOOP, edit('print("done")', 'print("done", loss)'))
    assert after.sparse and after.after_loop and not after.guards
    before = analyze(LOOP, edit("eval_interval = 4\n", "eval_interval = 4\nprint(eval_interval)\n"))
    assert before.sparse and not before.after_loop
    helper = analyze("def f():\n    return 0\n" + LOOP, "def f():\n    return 1\n" + LOOP)
    assert helper.dense == "function f changed"
    new_helper = analyze(LOOP, "def norm(m):\n    return 1\n" + LOOP)
    assert new_helper.sparse


def test_the_recordings_own_periodic_tests() -> None:
    found = periodic(LOOP)
    assert [g[0].test for g in found.guards] == [
        "iter_num % eval_interval == 0 and master",
        "iter_num > 10",
    ]
    assert found.steps == (("iter_num", 1),)


def _record_scalars(values: list[dict[str, int]], entry_every: int) -> RecordedRun:
    """A run whose journal holds ``values`` (one per iteration) as a recording writes them."""
    run = RecordedRun("x", "1", RunMeta(), LOOP)
    scalars = LoopScalars()
    for g, names in enumerate(values):
        scalars.note(g, "<module>", names, g)
        if (g + 1) % entry_every == 0 or g == len(values) - 1:
            taken = scalars.take().changes()
            run.scalars.update(taken)
            run.scalar_firsts.add(min(taken))
            run.timings.update(dict.fromkeys(taken, 0.1))
    return run


def test_needed_iterations_from_the_recorded_counters() -> None:
    run = _record_scalars([{"iter_num": g, "eval_interval": 4} for g in range(12)], 5)
    edited = edit(
        '        print("eval", iter_num)\n',
        '        print("eval", iter_num)\n        print(loss)\n',
    )
    found = analyze(LOOP, edited)
    needed = needed_iterations(run, found, lookup_in({"master": True}), range(12))
    assert needed.iterations == {0, 4, 8} and needed.unknown == 0
    nobody = needed_iterations(run, found, lookup_in({"master": False}), range(12))
    assert nobody.iterations == set()
    unknown = needed_iterations(run, found, no_lookup, range(12))  # master: not known
    assert unknown.iterations == set(range(12)) and unknown.unknown == 12


def test_a_lost_journal_entry_makes_only_its_iterations_unknown() -> None:
    run = _record_scalars([{"iter_num": g} for g in range(10)], 3)
    for g in (3, 4, 5):  # the entry of iterations 3-5 never landed
        del run.scalars[g]
    values = replayed(run.scalars, run.scalar_firsts, 10)
    assert [v is None for v in values] == [False] * 3 + [True] * 3 + [False] * 4
    assert values[7] == {"iter_num": 7, "@": 0, "@scope": "<module>"}


def test_a_name_that_stops_being_a_counter_is_not_known_after() -> None:
    run = _record_scalars([{"best": 0}, {"best": 0}, {}], 10)
    assert [v.get("best") for v in replayed(run.scalars, run.scalar_firsts, 3) if v] == [0, 0, None]


def test_the_recording_prefers_the_iteration_before_a_rare_test_fires() -> None:
    found = periodic(LOOP)
    ahead = Lookahead(Guards(found.guards, found), dict(found.steps))
    lookup = lookup_in({"master": True})
    fired = [
        g for g in range(40) if ahead.next_fires(g, {"iter_num": g, "eval_interval": 4}, lookup)
    ]
    # one in four is not rare; the loop's end (iter_num > 10) is, the first time it fires
    assert fired == [9]
    sparse = LOOP.replace("eval_interval = 4", "eval_interval = 20").replace(
        "iter_num > 10", "iter_num > 1000"
    )
    found = periodic(sparse)
    ahead = Lookahead(Guards(found.guards, found), dict(found.steps))
    fired = [
        g for g in range(100) if ahead.next_fires(g, {"iter_num": g, "eval_interval": 20}, lookup)
    ]
    assert fired == [19, 39, 59, 79, 99]


def test_a_removed_line_runs_where_it_ran_in_the_record() -> None:
    recorded = edit(
        "    iter_num += 1\n", '    iter_num += 1\n    if iter_num % 5 == 0:\n        print("x")\n'
    )
    found = analyze(recorded, LOOP)
    ((test,),) = found.guards
    assert (test.test, test.shifts) == ("iter_num % 5 == 0", (("iter_num", 1),))


def test_an_edit_to_how_the_counter_advances_is_dense() -> None:
    found = analyze(LOOP, edit("    iter_num += 1\n", "    iter_num += 2\n"))
    assert found.dense == "the edit changes how the loop advances its counters"


def test_what_the_end_call_carries_is_not_an_edit_of_the_loop() -> None:
    carried = edit(
        "model=model, loss=loss, iter_num=iter_num",
        "model=model, loss=loss, iter_num=iter_num, x=x",
    )
    found = analyze(LOOP, carried)
    assert found.sparse and not found.guards and not found.after_loop


def test_a_recording_notes_only_the_loops_counters() -> None:
    """Names the loop never assigns keep their value, which a replay reads from its own
    process, and a test of any other name the loop assigns runs everywhere: a recording
    notes the counters alone. A flip between 1 and True is a change, though 1 == True."""
    scalars = LoopScalars(frozenset({"step", "flag"}))
    frame = {"step": 0, "flag": 1, "batch_size": 64, "model": object()}
    scalars.note(0, "<module>", frame, None)
    scalars.note(1, "<module>", {**frame, "step": 1}, None)
    scalars.note(2, "<module>", {**frame, "step": 1, "flag": True}, None)
    scalars.note(3, "<module>", {**frame, "step": 1, "flag": True}, None)
    assert scalars.take().changes() == {
        0: {"step": 0, "flag": 1, "@scope": "<module>"},
        1: {"step": 1},
        2: {"flag": True},
        3: {},
    }
    assert periodic(LOOP).counters == {"iter_num"}  # not loss: a test of it runs everywhere


def test_a_counter_rebound_to_a_tensor_is_not_known_until_it_is_a_counter_again() -> None:
    """A counter's name bound to a tensor (whose == is elementwise) is noted as not known
    while it is one, without comparing tensors; the loop's value offset and scope stay."""
    scalars = LoopScalars(frozenset({"step"}))
    for g, step in enumerate([0, torch.ones(3), torch.zeros(3), 3, 3]):
        scalars.note(g, "<module>", {"step": step}, g)
    assert scalars.take().changes() == {
        0: {"step": 0, "@": 0, "@scope": "<module>"},
        1: {"step": None},
        2: {},
        3: {"step": 3},
        4: {},
    }


def test_a_project_is_analysed_in_the_file_that_holds_the_loop() -> None:
    """The loop in trainer.py: an edit there is placed as in one file; module-level lines of
    the entry script run after the loop; an edit in a function elsewhere runs everywhere."""
    trainer = (
        "import flor\n"
        "def run(state):\n"
        "    for step in flor.it(range(100)):\n"
        "        state.append(step)\n"
    )
    entry = "import trainer\ndef cb():\n    pass\nstate = []\ntrainer.run(state)\n"
    recorded = {"main.py": entry, "trainer.py": trainer}

    def edited(**files: str) -> dict[str, str]:
        return {**recorded, **files}

    periodic_line = trainer + "        if step % 10 == 0:\n            print(step)\n"
    found = analyze_project(recorded, edited(**{"trainer.py": periodic_line}), "main.py")
    assert found.sparse and [c.test for (c,) in found.guards] == ["step % 10 == 0"]
    after = analyze_project(
        recorded, edited(**{"main.py": entry + "print(len(state))\n"}), "main.py"
    )
    assert after.sparse and after.after_loop and not after.guards
    in_callback = entry.replace("    pass", "    print(1)")
    dense = analyze_project(recorded, edited(**{"main.py": in_callback}), "main.py")
    assert not dense.sparse and "main.py changed" in (dense.dense or "")


def test_a_test_that_starts_firing_often_is_not_rare_from_then_on() -> None:
    """A DQN's update (``step > learning_starts and step % 4 == 0``) never fires for its
    first 500 steps, then in one step of four: from then on its eve is not preferred, and
    the logging branch's (every 100 steps) is."""
    found = periodic(DQN_LOOP)
    ahead = Lookahead(Guards(found.guards, found), dict(found.steps))
    lookup = lookup_in({"learning_starts": 500})
    fired = [g for g in range(2000) if ahead.next_fires(g, {"@": 0}, lookup)]
    late = [g for g in fired if g > 600]
    assert late and all((g + 1) % 100 == 0 for g in late), late[:10]


def test_a_recording_foresees_its_periodic_tests_instead_of_asking_each_iteration() -> None:
    """Between two firings of a test every 100 steps the lookahead evaluates nothing: it
    prefers the eves it preferred asking every iteration, for a small share of the work."""
    found = periodic(DQN_LOOP)
    ahead = Lookahead(Guards(found.guards, found), dict(found.steps))
    lookup = lookup_in({"learning_starts": 500})
    fired = [g for g in range(3000) if ahead.next_fires(g, {"@": 0}, lookup)]
    assert fired[:5] == [99, 199, 299, 399, 499]  # and the update's first few, until frequent
    assert [g for g in fired if g > 600] == list(range(699, 3000, 100))
    assert ahead.evaluations < 3000 / 10  # asked each iteration for each of 2 tests: 6000


def test_foresight_finds_where_each_test_may_hold_as_evaluating_it_would() -> None:
    """The lookahead scans up to 500 iterations ahead in one compiled loop per guard: it
    stops where evaluating the guard in that iteration would not say false (every test
    holds, an ``else`` branch's test fails, or a test raises), as ``Guards.holds`` says."""
    found = periodic(
        """\
import flor
for step in flor.it(range(n)):
    if step % 7 == 3 and 12 // (step - 45) >= 0:
        a()
    else:
        b()
    if step > start and step % period == 0:
        c()
"""
    )
    guards = Guards(found.guards, found)
    lookup = lookup_in({"start": 90, "period": 25})
    for i in range(len(guards.guards)):
        for g in (0, 5, 30, 41, 120):
            foreseen = guards.ahead_of(i, g, {"@": 0}, dict(found.steps), lookup)
            assert foreseen is not None
            expected = next(
                (k for k in range(1, 61) if guards.holds(i, g + k, {"@": 0}, lookup) is not False),
                61,
            )
            assert guards.first_may_hold(i, foreseen, 60) == expected, (i, g)
