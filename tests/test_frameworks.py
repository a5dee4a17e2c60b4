"""Scripts whose loop lives in a library trainer (Lightning's ``Trainer.fit``), unmodified.

flor drives the library's own loop (``flor.runtime.trainers``): each epoch an iteration, its
training the block. A hindsight line after the training (a callback's validation hook, the
module's epoch end) restores every epoch's training, counted in backward passes; one inside
``training_step`` re-executes. Either way the replay prints what a full run of the edited
script prints.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

from flor.frameworks import LIGHTNING
from flor.runtime.process.reporter import Reporter
from flor.transform import compare

pytestmark = pytest.mark.slow
FRAMEWORKS = SCRIPTS / "frameworks"
FOUND = "lightning_fit.py: Lightning Trainer.fit: epochs as iterations; block: the training epoch"


def write(f: Flor, kind: str, edit: tuple[str, str] = ("", "")) -> Path:
    path = f.work / "lightning_fit.py"
    source = (FRAMEWORKS / "lightning_fit.py").read_text().replace(*edit)
    path.write_text(hindsight(source, kind))
    return path


def test_a_hook_after_the_training_restores_every_epoch(flor_env: Flor) -> None:
    f = flor_env
    script = write(f, "none")
    plain, full_backwards = f.counting_backwards("plain", (str(script),), hand=True)
    recorded = f.cli("run", "--name", "exp", script.name)
    assert recorded.stdout == plain.stdout and FOUND in recorded.stderr
    assert "4 iterations, 4 checkpoints" in recorded.stderr
    write(f, "outside")
    truth = f.truth(script)
    assert truth != plain.stdout, "the hindsight edit prints something new"
    replayed, replay_backwards = f.counting_backwards("whole", ("replay", "--name", "exp"))
    assert replayed.stdout == truth
    assert (full_backwards, replay_backwards) == (42, 0)  # 21 steps of 2 accumulated batches
    assert f.cli("replay", "--name", "exp", "--workers", "2").stdout == truth


def test_a_line_in_training_step_re_executes_the_training(flor_env: Flor) -> None:
    f = flor_env
    script = write(f, "none")
    f.cli("run", "--name", "exp", script.name)
    write(f, "inside")
    truth = f.truth(script)
    replayed, replay_backwards = f.counting_backwards("whole", ("replay", "--name", "exp"))
    assert replayed.stdout == truth and replay_backwards == 42
    assert f.replays("exp")[-1]["probed"] == [LIGHTNING.block]


def test_validation_inside_the_epoch_is_training_s_and_pytorch_lightning_too(
    flor_env: Flor,
) -> None:
    """With ``val_check_interval`` a validation runs inside the epoch's training: an edit in a
    validation hook then re-executes the training it interleaves with (and stays exact). The
    script imports the ``pytorch_lightning`` package, which flor drives the same way."""
    f = flor_env
    swaps = [
        ("import lightning.pytorch as pl", "import pytorch_lightning as pl"),
        ("from lightning.pytorch.", "from pytorch_lightning."),
        ("    max_epochs=5,\n", "    max_epochs=5,\n    val_check_interval=6,\n"),
    ]
    source = (FRAMEWORKS / "lightning_fit.py").read_text()
    for old, new in swaps:
        assert old in source
        source = source.replace(old, new)
    script = f.work / "lightning_fit.py"
    script.write_text(hindsight(source, "none"))
    recorded = f.cli("run", "--name", "exp", script.name)
    assert "4 checkpoints" in recorded.stderr
    script.write_text(hindsight(source, "outside"))
    truth = f.truth(script)
    assert truth.count("validation at step") == 7  # two an epoch, none in the unfinished last
    assert f.cli("replay", "--name", "exp").stdout == truth
    assert f.replays("exp")[-1]["probed"] == [LIGHTNING.block]


SCRIPT = """
import lightning.pytorch as pl

class Model(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        return self.loss(batch)

    def loss(self, batch):
        return batch.sum()

    def on_validation_epoch_end(self):
        print("val")

pl.Trainer(max_epochs=2).fit(Model())
"""


@pytest.mark.parametrize(
    ("old", "new", "touched"),
    [
        ("return batch.sum()", "return batch.mean()", True),  # what training_step calls
        ('print("val")', 'print("val", self.current_epoch)', False),
        ("max_epochs=2)", "max_epochs=2, val_check_interval=3)", True),  # validation moves in
    ],
)
def test_an_edit_touches_lightning_s_block_where_the_training_calls_it(
    old: str, new: str, touched: bool
) -> None:
    changes = compare(SCRIPT, SCRIPT.replace(old, new))
    assert (LIGHTNING.block in changes.changed) is touched and not changes.added


def test_a_version_flor_does_not_know_is_named_and_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flor.runtime.trainers import lightning

    monkeypatch.setattr(lightning.importlib.metadata, "version", lambda name: "2.99.1")
    said = io.StringIO()
    patched = type("Loop", (), {"run": "Lightning's"})
    module = type(sys)("fit_loop")
    module._FitLoop = patched  # type: ignore[attr-defined]
    lightning.patches(Reporter(said))["lightning.pytorch.loops.fit_loop"](module)
    assert patched.run == "Lightning's"
    assert said.getvalue() == (
        "flor: warning: Lightning 2.99.1 is not a version flor knows (2.6): Trainer.fit runs "
        "without checkpoints, and replays whole\n"
    )
