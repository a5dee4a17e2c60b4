"""Edits that change training itself, not only what gets logged.

A hindsight edit should only read. One that steps an optimizer, updates
parameters in place, assigns to a value a block carries, or draws from the
global random number generators makes the edited script a different experiment
from the recorded one: replay still re-executes what it must, but a full run of
the edited script would not reproduce the recorded numbers. Users are told, by line.
"""

from __future__ import annotations

import difflib
import re

from flor.transform.fingerprints import end_names
from flor.transform.report import Note

_TRAINING = (
    (re.compile(r"\.(backward|step|zero_grad|load_state_dict)\s*\("), "calls {0}"),
    (
        re.compile(r"\.(add_|sub_|mul_|div_|copy_|fill_|zero_|normal_|uniform_|clamp_)\s*\("),
        "updates a tensor in place ({0})",
    ),
    (re.compile(r"\.data\s*=[^=]"), "assigns to .data"),
    (re.compile(r"\b(manual_seed|seed)\s*\("), "reseeds a random number generator"),
    (
        re.compile(
            r"\b(torch\.(rand|randn|randint|randperm|bernoulli|multinomial|normal)|random\.\w+|np\.random\.\w+)\s*\("
        ),
        "draws from the global random number generator ({0}), which shifts every later draw",
    ),
)


def training_edits(recorded: str, edited: str, instrumented: str, filename: str) -> list[Note]:
    """Lines added or changed in ``edited`` (vs ``recorded``) that change training.

    ``instrumented`` is the edited script after ``flor instrument``; the names
    its blocks carry are the state an assignment must not touch.
    """
    state = set().union(*end_names(instrumented, filename).values()) if instrumented else set()
    assigns = (
        re.compile(r"^\s*(" + "|".join(map(re.escape, sorted(state))) + r")\b[^=]*?[+\-*/]?=(?!=)")
        if state
        else None
    )
    old, new = recorded.splitlines(), edited.splitlines()
    notes = []
    matcher = difflib.SequenceMatcher(
        None, [s.strip() for s in old], [s.strip() for s in new], autojunk=False
    )
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("insert", "replace"):
            continue
        for n in range(j1, j2):
            line = new[n].split("#", 1)[0]
            why = _why(line)
            if why is None and assigns is not None and (m := assigns.match(line)):
                why = f"assigns to {m.group(1)}, which a training block carries"
            if why is not None:
                notes.append(
                    Note(
                        n + 1,
                        f"this edit changes training itself: it {why}; "
                        "the replay is a different experiment from the recording",
                    )
                )
    return notes


def _why(line: str) -> str | None:
    for pattern, message in _TRAINING:
        m = pattern.search(line)
        if m:
            return message.format(m.group(0).rstrip("( "))
    return None
