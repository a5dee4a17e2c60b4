"""An edit carried to older versions of a file (flor/transform/carry.py): where each added
statement lands, and the one-line reasons it cannot."""

from __future__ import annotations

import textwrap

import pytest

from flor.errors import FlorError
from flor.transform.carry import carry, edit_of

BASE = textwrap.dedent(
    """\
    import torch
    net = torch.nn.Linear(2, 2)
    for epoch in range(3):
        for x in range(4):
            loss = net(torch.ones(2)).sum()
            loss.backward()
        print("epoch", epoch, loss.item())
    print("done")
    """
)
ADDED = '    print("norm", net.weight.norm().item())\n'
EDITED = BASE.replace("loss.item())\n", "loss.item())\n" + ADDED)


def carried(older: str, base: str = BASE, edited: str = EDITED) -> str:
    done = carry(edit_of(base, edited, "train.py"), older, "train.py")
    assert done.refused is None, done.refused
    return done.source


def refusal(older: str, base: str = BASE, edited: str = EDITED) -> str:
    done = carry(edit_of(base, edited, "train.py"), older, "train.py")
    assert done.refused is not None and done.source == older
    return done.refused


def test_the_edit_is_what_the_edited_file_adds_to_its_base() -> None:
    edit = edit_of(BASE, EDITED, "train.py")
    assert edit.pure and [a.shown for a in edit.added] == [ADDED.strip()]
    assert edit.added[0].reads == {"net"}
    assert carried(BASE) == EDITED


def test_an_edit_that_rewrites_or_removes_a_statement_is_not_pure() -> None:
    assert not edit_of(BASE, EDITED.replace('"done"', '"finished"'), "t.py").pure
    assert not edit_of(BASE, EDITED.replace('print("done")\n', ""), "t.py").pure
    assert edit_of(BASE, EDITED.replace("import torch", "import torch  # a comment"), "t.py").pure


def test_lands_beside_its_neighbours_in_a_version_that_changed_elsewhere() -> None:
    older = BASE.replace("range(3)", "range(EPOCHS)").replace(
        "import torch\n", "import torch\nEPOCHS = 5\n"
    )
    older = older.replace("        loss.backward()\n", "        loss.backward()\n        pass\n")
    assert carried(older) == older.replace("loss.item())\n", "loss.item())\n" + ADDED)


def test_a_changed_neighbour_at_the_same_place_stands_in_for_it() -> None:
    """The newest version prints differently; the older one's print is where the edit goes
    after (not before it, which a print would show in the wrong order)."""
    older = BASE.replace('print("epoch", epoch, loss.item())', "print(epoch, loss)")
    assert carried(older) == older.replace("print(epoch, loss)\n", "print(epoch, loss)\n" + ADDED)


def test_keeps_the_older_files_indentation() -> None:
    older = BASE.replace("    ", "\t")
    assert carried(older) == older.replace(
        "loss.item())\n", "loss.item())\n" + ADDED.replace("    ", "\t")
    )


def test_a_group_of_statements_and_a_compound_one_travel_whole() -> None:
    group = (
        '    if epoch % 2 == 0:\n        total = net.weight.sum()\n        print("sum", total)\n'
    )
    edited = BASE.replace("loss.item())\n", "loss.item())\n" + group)
    older = BASE.replace("range(3)", "range(9)")
    assert carried(older, edited=edited) == older.replace(
        "loss.item())\n", "loss.item())\n" + group
    )
    assert edit_of(BASE, edited, "t.py").added[0].reads == {"epoch", "net"}  # binds total


def test_inside_a_function_its_parameters_count_as_defined() -> None:
    base = "def train(model, steps):\n    for s in range(steps):\n        model.step()\n"
    edited = base + "    print(model.norm(), steps)\n"
    older = base.replace("model.step()", "model.step(1)")
    assert carried(older, base, edited) == older + "    print(model.norm(), steps)\n"
    renamed = older.replace("model", "net")
    assert "reads model" in refusal(renamed, base, edited)


def test_a_statement_in_an_else_suite() -> None:
    base = "for i in range(3):\n    x = i\nelse:\n    y = 1\n"
    edited = base + "    print(y)\n"
    assert carried(base.replace("range(3)", "range(4)"), base, edited).endswith(
        "    y = 1\n    print(y)\n"
    )


def test_refuses_where_a_name_it_reads_is_not_defined_there() -> None:
    why = refusal(BASE.replace("net", "model"))
    assert why == (
        '`print("norm", net.weight.norm().item())` cannot be carried: it reads net, '
        "which this version does not define there"
    )


def test_refuses_where_its_enclosing_loop_is_gone() -> None:
    older = "import torch\nnet = torch.nn.Linear(2, 2)\nwhile True:\n    break\n"
    assert "its enclosing `for epoch in range(3):` is not in this version" in refusal(older)


def test_refuses_where_no_neighbour_is_left() -> None:
    base = "for epoch in range(3):\n    a = 1\n"
    edited = base + "    print(a)\n"
    older = "a = 1\nfor epoch in range(3):\n    b = 2\n    c = 3\n"
    assert "no statement next to it" in refusal(older, base, edited)


def test_a_file_that_does_not_parse_is_a_one_line_error() -> None:
    with pytest.raises(FlorError, match="train.py"):
        edit_of(BASE, "for :\n", "train.py")


def test_an_if_is_found_by_its_whole_test_only() -> None:
    """A loop is still found when its range changed; another `if` is another place."""
    base = "for e in range(3):\n    if e % 2 == 0:\n        a = e\n"
    edited = base + "        print(a)\n"
    older = base.replace("e % 2 == 0", "e > 1")
    assert "its enclosing `if e % 2 == 0:` is not in this version" in refusal(older, base, edited)
    assert carried(base.replace("range(3)", "range(5)"), base, edited).endswith("print(a)\n")
