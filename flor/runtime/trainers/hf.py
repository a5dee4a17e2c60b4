"""Hugging Face's ``Trainer.train``, recorded and replayed: its epochs are flor's iterations
and each epoch's training is the block.

Nothing of the Trainer's own code is replaced; its loop is driven from three places
(transformers 5): ``on_epoch_begin``, called by the epoch loop, begins flor's iteration
(the epochs go through ``flor.it``); ``_run_epoch`` runs inside
``SkipBlock.step_into("transformers.train")`` until it calls ``on_epoch_end``, where the
block ends; the epoch's end (``on_epoch_end``, then the evaluation, logging and saving due)
runs after the block, as the Trainer would have run it. A hindsight line in
``on_epoch_end``, ``on_evaluate`` or ``compute_metrics`` then restores the epoch's training
instead of re-running it. What the block ends with is what the Trainer reads after an
epoch: the model, optimizer, scheduler, ``TrainerState`` and ``TrainerControl``, the user's
callbacks (by their attributes), the loader's position, the running loss and counters, the
AMP scaler and (as for any block) the RNG. Logging every ``logging_steps`` and evaluating
every ``eval_steps`` happen inside the epoch, so edits there re-run training.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Generator, Iterator
from types import ModuleType
from typing import Any, cast

from flor.frameworks import TRANSFORMERS
from flor.runtime.loop.api import it
from flor.runtime.process.reporter import Reporter
from flor.runtime.trainers import versions
from flor.runtime.trainers.block import run_block

KNOWN = ((5, 25),)  # the versions whose Trainer calls these hooks where this expects
_DISPLAY = ("ProgressCallback", "PrinterCallback", "NotebookProgressCallback")  # not state


def patches(reporter: Reporter) -> dict[str, Callable[[ModuleType], None]]:
    """Module name -> what to do to it once imported."""
    return {"transformers.trainer": functools.partial(_patch, reporter)}


def _patch(reporter: Reporter, module: ModuleType) -> None:
    if not versions.known("transformers", KNOWN, "transformers", "Trainer.train", reporter):
        return
    trainer = module.Trainer
    trainer._inner_training_loop = _drives(trainer._inner_training_loop)
    trainer._run_epoch = _epoch(trainer._run_epoch)


def _drives(inner: Callable[..., Any]) -> Callable[..., Any]:
    """The Trainer's training loop, its epochs begun by flor's loop."""

    @functools.wraps(inner)
    def training_loop(self: Any, *args: Any, **kwargs: Any) -> Any:
        handler = self.callback_handler
        training = [True]  # flor's loop as a `while`: it goes on while the Trainer's does
        epochs = cast(Generator[int, None, None], it(lambda: training[0]))  # a session's loop
        handler.on_epoch_begin = functools.partial(_begin, self, epochs, handler.on_epoch_begin)
        try:
            result = inner(self, *args, **kwargs)
        except BaseException:
            epochs.close()  # the loop ends in the exception, as it would in a script
            raise
        finally:
            del handler.on_epoch_begin  # the class's again
            self._flor_epoch = None
        training[0] = False
        next(epochs, None)  # its condition, false: flor's loop ends where the Trainer's did
        return result

    return training_loop


def _begin(
    trainer: Any,
    epochs: Iterator[int],
    begin: Callable[..., Any],
    args: Any,
    state: Any,
    control: Any,
) -> Any:
    """``on_epoch_begin``: flor's next iteration, or the end of training where a replay has
    shown every recorded epoch (its callbacks then do not run for an epoch that never was)."""
    trainer._flor_epoch = next(epochs, None)
    if trainer._flor_epoch is None:
        control.should_training_stop = True
        return control
    return begin(args, state, control)


def _epoch(run_epoch: Callable[..., None]) -> Callable[..., None]:
    """``_run_epoch``: the epoch's training a block, its end after it."""

    @functools.wraps(run_epoch)
    def epoch(self: Any, **kwargs: Any) -> None:
        g = self._flor_epoch
        if g is None:  # past the last epoch a replay shows: ``_begin`` stopped the training
            return
        kwargs["epoch"] = kwargs["epochs_trained"] + g  # a replay may begin at any epoch
        train = functools.partial(_train, run_epoch, self, kwargs)
        state = functools.partial(_state, self, kwargs["train_dataloader"])
        last = run_block(TRANSFORMERS.block, train, state, functools.partial(_settle, self))
        grad_norm, learning_rate = last
        self.control = self.callback_handler.on_epoch_end(self.args, self.state, self.control)
        self._maybe_log_save_evaluate(
            self._tr_loss,
            grad_norm,
            kwargs["model"],
            kwargs["trial"],
            kwargs["epoch"],
            kwargs["ignore_keys_for_eval"],
            kwargs["start_time"],
            learning_rate=learning_rate,
        )

    return epoch


class _Trained(Exception):
    """Raised by ``on_epoch_end`` inside the block: the epoch's training is over."""


def _train(run_epoch: Callable[..., None], trainer: Any, kwargs: dict[str, Any]) -> Any:
    """The Trainer's ``_run_epoch`` up to its ``on_epoch_end``: the last step's gradient norm
    and learning rate, which the epoch's end logs."""
    handler = trainer.callback_handler

    def trained(*args: Any, **kw: Any) -> None:
        epoch = sys._getframe(1).f_locals  # _run_epoch's
        raise _Trained(_scalar(epoch["grad_norm"]), epoch["learning_rate"])

    handler.on_epoch_end = trained
    try:
        run_epoch(trainer, **kwargs)
    except _Trained as done:
        return done.args
    finally:
        del handler.on_epoch_end
    raise RuntimeError("Trainer._run_epoch returned without calling on_epoch_end")


def _scalar(value: Any) -> Any:
    """A gradient norm as the epoch's end reads it: a float (``.item()``) or None."""
    return value.item() if hasattr(value, "item") else value


# -- the state an epoch's training leaves -------------------------------------------------
def _state(trainer: Any, loader: Any) -> dict[str, Any]:
    """Everything the Trainer reads after an epoch's training, as values flor restores in
    place (a dict's items too)."""
    return {
        "model": trainer.model,
        "optimizer": trainer.optimizer,
        "scheduler": trainer.lr_scheduler,
        "state": trainer.state,
        "control": trainer.control,
        "callbacks": [
            vars(cb)
            for cb in trainer.callback_handler.callbacks
            if type(cb).__name__ not in _DISPLAY and not _tracker(cb)
        ],
        "loader": loader,
        "loss": trainer._tr_loss,
        "counters": {
            "total_loss": trainer._total_loss_scalar,
            "last_logged": trainer._globalstep_last_logged,
            "flos": trainer.current_flos,
            "accumulation": getattr(trainer, "current_gradient_accumulation_steps", None),
        },
        "scaler": trainer.accelerator.scaler,
    }


def _tracker(callback: Any) -> bool:
    """A tracker's callback (MLflow, TensorBoard, W&B): it holds a connection, not state."""
    return type(callback).__module__.startswith("transformers.integrations")


def _settle(trainer: Any, parts: dict[str, Any]) -> None:
    trainer._tr_loss = parts["loss"]
    counters = parts["counters"]
    trainer._total_loss_scalar = counters["total_loss"]
    trainer._globalstep_last_logged = counters["last_logged"]
    trainer.current_flos = counters["flos"]
    trainer.current_gradient_accumulation_steps = counters["accumulation"]
