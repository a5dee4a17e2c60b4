"""Scripts whose loop lives in a library trainer (Lightning's ``Trainer.fit``, Hugging Face's
``Trainer.train``), unmodified.

flor drives the library's own loop (``flor.runtime.trainers``): each epoch an iteration, its
training the block. A hindsight line after the training (a callback's validation or
evaluation hook, the module's epoch end) restores every epoch's training, counted in backward
passes; one inside it (``training_step``, logging every few steps) re-executes. Either way the
replay prints what a full run of the edited script prints.
"""

from __future__ import annotations

import importlib
import io
import sys
from pathlib import Path

import pytest
from conftest import SCRIPTS, Flor, hindsight

from flor.frameworks import LIGHTNING, TRANSFORMERS, Framework
from flor.runtime.process.reporter import Reporter
from flor.runtime.trainers import versions
from flor.transform import compare, fingerprints

pytestmark = pytest.mark.slow
FRAMEWORKS = SCRIPTS / "frameworks"
FOUND = "lightning_fit.py: Lightning Trainer.fit: epochs as iterations; block: the training epoch"
HF_FOUND = (
    "hf_train.py: Hugging Face Trainer.train: epochs as iterations; block: the training epoch"
)


def write(f: Flor, kind: str, name: str = "lightning_fit.py") -> Path:
    path = f.work / name
    path.write_text(hindsight((FRAMEWORKS / name).read_text(), kind))
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


def test_a_callback_class_in_another_file_and_segments(flor_env: Flor) -> None:
    """The callback lives in the project's ``callbacks.py``: an edit to its validation hook
    restores the training too; ``--segment i/3`` pieces make up the whole replay."""
    f = flor_env
    source = (FRAMEWORKS / "lightning_fit.py").read_text()
    start, end = source.index("class Watcher"), source.index("\n\ntorch.manual_seed")
    callbacks = "import lightning.pytorch as pl\n\n\n" + source[start:end] + "\n"
    entry = source[:start] + "from callbacks import Watcher\n" + source[end:]
    script = f.work / "lightning_fit.py"
    script.write_text(hindsight(entry, "none"))
    (f.work / "callbacks.py").write_text(hindsight(callbacks, "none"))
    plain, full_backwards = f.counting_backwards("plain", (str(script),), hand=True)
    assert f.cli("run", "--name", "exp", script.name).stdout == plain.stdout
    (f.work / "callbacks.py").write_text(hindsight(callbacks, "outside"))
    truth = f.truth(script)
    assert "weight norm" in truth
    replayed, replay_backwards = f.counting_backwards("whole", ("replay", "--name", "exp"))
    assert replayed.stdout == truth and replay_backwards <= full_backwards / 4
    thirds = [f.cli("replay", "--name", "exp", "--segment", f"{i}/3").stdout for i in (1, 2, 3)]
    assert "".join(thirds) == truth


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


def test_hugging_face_s_evaluation_after_the_training_restores_every_epoch(
    flor_env: Flor,
) -> None:
    f = flor_env
    script = write(f, "none", "hf_train.py")
    plain, full_backwards = f.counting_backwards("plain", (str(script),), hand=True)
    recorded = f.cli("run", "--name", "exp", script.name)
    assert recorded.stdout == plain.stdout and HF_FOUND in recorded.stderr
    assert "3 iterations, 3 checkpoints" in recorded.stderr
    write(f, "outside", "hf_train.py")
    truth = f.truth(script)
    assert truth != plain.stdout
    replayed, replay_backwards = f.counting_backwards("whole", ("replay", "--name", "exp"))
    assert replayed.stdout == truth  # the last line: the training loss the Trainer summed
    assert (full_backwards, replay_backwards) == (30, 0)  # 15 steps of 2 accumulated batches
    assert f.cli("replay", "--name", "exp", "--workers", "2").stdout == truth
    thirds = [f.cli("replay", "--name", "exp", "--segment", f"{i}/3").stdout for i in (1, 2, 3)]
    assert "".join(thirds) == truth


def test_hugging_face_s_logging_inside_the_epoch_re_executes(flor_env: Flor) -> None:
    """``on_log`` runs every ``logging_steps``, inside the epoch; evaluating every
    ``eval_steps`` moves ``on_evaluate`` inside too. An edit to either re-executes."""
    f = flor_env
    for kind, steps in (("inside", False), ("outside", True)):
        source = (FRAMEWORKS / "hf_train.py").read_text()
        if steps:
            source = source.replace(
                'eval_strategy="epoch",', 'eval_strategy="steps",\n    eval_steps=5,'
            )
        script = f.work / "hf_train.py"
        script.write_text(hindsight(source, "none"))
        f.cli("run", "--name", kind, script.name)
        script.write_text(hindsight(source, kind))
        truth = f.truth(script)
        assert f.cli("replay", "--name", kind).stdout == truth
        assert f.replays(kind)[-1]["probed"] == [TRANSFORMERS.block]


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


HF_SCRIPT = """
from transformers import Trainer, TrainerCallback, TrainingArguments

class Printer(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        print(logs)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        print(metrics)

Trainer(model=None, args=TrainingArguments("out", eval_strategy="epoch")).train()
"""


@pytest.mark.parametrize(
    ("script", "old", "new", "block", "touched"),
    [
        (SCRIPT, "return batch.sum()", "return batch.mean()", LIGHTNING, True),  # training's
        (SCRIPT, 'print("val")', 'print("val", self.current_epoch)', LIGHTNING, False),
        (SCRIPT, "max_epochs=2)", "max_epochs=2, val_check_interval=3)", LIGHTNING, True),
        (SCRIPT, "max_epochs=2)", "max_epochs=2, val_check_interval=1.0)", LIGHTNING, False),
        (HF_SCRIPT, "print(logs)", "print(logs, state.epoch)", TRANSFORMERS, True),
        (HF_SCRIPT, "print(metrics)", "print(metrics, state.epoch)", TRANSFORMERS, False),
        (HF_SCRIPT, '"epoch")', '"steps")', TRANSFORMERS, True),  # evaluation moves in
    ],
)
def test_an_edit_touches_a_trainer_s_block_where_the_training_calls_it(
    script: str, old: str, new: str, block: Framework, touched: bool
) -> None:
    assert old in script
    changes = compare(script, script.replace(old, new))
    assert (block.block in changes.changed) is touched and not changes.added


def test_a_loop_of_its_own_or_no_trainer_built_is_not_a_library_s_training() -> None:
    """``model.train()`` and sklearn's ``fit`` are not a library's training loop: a script
    with a loop of its own, or one that builds no ``...Trainer``, gets no trainer's block."""
    loop = "for epoch in flor.it(range(3)):\n    if flor.SkipBlock.step_into('b'):\n        m.train()\n    flor.SkipBlock.end(m)\n"
    built = "from transformers import Trainer\nTrainer(model=m).train()\n"
    assert set(fingerprints("import transformers\n" + loop + built)) == {"b"}
    assert set(fingerprints("import transformers\nm.train()\nm.fit(x)\n")) == set()
    assert set(fingerprints(built)) == {TRANSFORMERS.block}


@pytest.mark.parametrize(
    ("adapter", "module", "cls", "method", "said"),
    [
        ("lightning", "lightning.pytorch.loops.fit_loop", "_FitLoop", "run", "Lightning 2.99.1"),
        ("hf", "transformers.trainer", "Trainer", "_run_epoch", "transformers 2.99.1"),
    ],
)
def test_a_version_flor_does_not_know_is_named_and_left_alone(
    monkeypatch: pytest.MonkeyPatch, adapter: str, module: str, cls: str, method: str, said: str
) -> None:
    patches = importlib.import_module(f"flor.runtime.trainers.{adapter}")
    monkeypatch.setattr(versions.importlib.metadata, "version", lambda name: "2.99.1")
    out = io.StringIO()
    patched = type(cls, (), {method: "the library's"})
    imported = type(sys)(module)
    setattr(imported, cls, patched)
    patches.patches(Reporter(out))[module](imported)
    assert getattr(patched, method) == "the library's"
    known = ", ".join(f"{a}.{b}" for a, b in patches.KNOWN)
    entry = "Trainer.fit" if adapter == "lightning" else "Trainer.train"
    assert out.getvalue() == (
        f"flor: warning: {said} is not a version flor knows ({known}): {entry} runs "
        "without checkpoints, and replays whole\n"
    )
