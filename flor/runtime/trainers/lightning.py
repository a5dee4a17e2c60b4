"""Lightning's ``Trainer.fit``, recorded and replayed: its epochs are flor's iterations and
each epoch's training is the block.

flor's versions of ``_FitLoop.run`` and ``_TrainingEpochLoop.run`` make the same calls in the
same order as Lightning's own (2.6). The fit loop's epochs go through ``flor.it``. The
epoch loop's batches run inside ``SkipBlock.step_into("lightning.fit")`` up to the
validation that ends the epoch, which runs after the block: a hindsight line in
``validation_step``, ``on_validation_epoch_end`` or ``on_train_epoch_end`` then restores the
epoch's training instead of re-running it. What the block ends with is all the fit loop
needs to go on: the LightningModule, optimizers, schedulers, callbacks (a user's by their
attributes, Lightning's by their ``state_dict``), the loops' progress counters, the metrics
``self.log`` gathered, the AMP scaler, and (as for any block) the RNG. A validation inside
the epoch (``val_check_interval``) runs inside the block, so an edit there re-runs training.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flor.frameworks import LIGHTNING
from flor.runtime.loop.api import it
from flor.runtime.process.reporter import Reporter
from flor.runtime.state.capture import Unrestorable
from flor.runtime.trainers import versions
from flor.runtime.trainers.block import run_block

KNOWN = ((2, 6),)  # the versions whose loop bodies these copy: another replays whole
# Each of Lightning's two packages: its import name, where its trainer lives, its distribution.
_PACKAGES = (
    ("lightning", "lightning.pytorch", "lightning"),
    ("pytorch_lightning", "pytorch_lightning", "pytorch-lightning"),
)


def patches(reporter: Reporter) -> dict[str, Callable[[ModuleType], None]]:
    """Module name -> what to do to it once imported, for both of Lightning's packages."""
    out: dict[str, Callable[[ModuleType], None]] = {}
    for _, base, distribution in _PACKAGES:
        check = functools.partial(
            versions.known, distribution, KNOWN, "Lightning", "Trainer.fit", reporter
        )
        out[f"{base}.loops.fit_loop"] = functools.partial(_patch, check, "_FitLoop", _fit_run)
        out[f"{base}.loops.training_epoch_loop"] = functools.partial(
            _patch, check, "_TrainingEpochLoop", _epoch_run
        )
    return out


def _patch(
    known: Callable[[], bool], cls: str, run: Callable[..., None], module: ModuleType
) -> None:
    if known():
        getattr(module, cls).run = run


def _fit_run(self: Any) -> None:
    """``_FitLoop.run``, its epochs flor's iterations (a recorded epoch is known to happen:
    replay does not ask ``done``, which reads the state of epochs it skipped)."""
    self.setup_data()
    if self.skip:
        return
    self.reset()
    self.on_run_start()
    for _ in it(lambda: not self.done):
        try:
            self.on_advance_start()
            self.advance()
            self.on_advance_end()
        except StopIteration:
            break
        finally:
            self.on_iteration_done()
    self._restarting = False
    self.on_run_end()


def _epoch_run(self: Any, data_fetcher: Any) -> None:
    """``_TrainingEpochLoop.run``: the epoch's training a block, the validation ending it after."""
    trainer = self.trainer
    train = functools.partial(_train, self, data_fetcher)
    state = functools.partial(_state, trainer)
    if not run_block(LIGHTNING.block, train, state, functools.partial(_settle, trainer)):
        return
    try:
        self.on_advance_end(data_fetcher)  # the validation, then its batch's bookkeeping
    finally:
        self.on_iteration_done()
    _batches(self, data_fetcher, until_validation=False)  # what is left: nothing, as a rule


def _train(loop: Any, data_fetcher: Any) -> bool:
    """The epoch loop's own ``run``, stopped before the validation that ends the epoch: True
    if that validation is due."""
    loop.reset()
    loop.on_run_start(data_fetcher)
    return _batches(loop, data_fetcher, until_validation=True)


def _batches(loop: Any, data_fetcher: Any, until_validation: bool) -> bool:
    """Lightning's batch loop (``advance``, then ``on_advance_end``) while the epoch lasts;
    ``until_validation``: stopped before the validation that ends the epoch, leaving that
    batch's ``on_advance_end`` (which runs it) to the caller. Whether it stopped there."""
    while not loop.done:
        due = False
        try:
            loop.advance(data_fetcher)
            due = until_validation and _validation_ends_epoch(loop, data_fetcher)
            if not due:
                loop.on_advance_end(data_fetcher)
        except StopIteration:
            break
        finally:
            if not due:
                loop.on_iteration_done()
        if due:
            return True
    return False


def _validation_ends_epoch(loop: Any, data_fetcher: Any) -> bool:
    trainer = loop.trainer
    ending = loop._is_training_done or (trainer.should_stop and trainer.fit_loop._can_stop_early)
    return bool(ending and not loop._skip_next_val and loop._should_check_val_fx(data_fetcher))


# -- the state an epoch's training leaves -------------------------------------------------
def _state(trainer: Any) -> dict[str, Any]:
    """Everything the fit loop reads after an epoch's training, as values flor restores in
    place (a dict's items too)."""
    loop = trainer.fit_loop.epoch_loop
    connector = trainer._logger_connector
    return {
        "module": trainer.lightning_module,
        "optimizers": list(trainer.optimizers),
        "schedulers": [config.scheduler for config in trainer.lr_scheduler_configs],
        "callbacks": [cb if _lightning_s(cb) else vars(cb) for cb in trainer.callbacks],
        "progress": {
            "epochs": trainer.fit_loop.epoch_progress,
            "batches": loop.batch_progress,
            "schedulers": loop.scheduler_progress,
            "optimizer": loop.automatic_optimization.optim_progress,
            "manual": loop.manual_optimization.optim_step_progress,
            "validation": loop.val_loop.batch_progress,
        },
        "counters": {
            "batches_that_stepped": loop._batches_that_stepped,
            "should_stop": trainer.should_stop,
            "first_loop_iter": connector._first_loop_iter,
        },
        "metrics": [
            connector._logged_metrics,
            connector._progress_bar_metrics,
            connector._callback_metrics,
        ],
        "logged": _logged(loop._results),
        "scaler": getattr(trainer.precision_plugin, "scaler", None),
    }


def _lightning_s(callback: Any) -> bool:
    """Lightning's own callbacks say their state in ``state_dict``; a user's often hold it
    in attributes that ``state_dict`` (Callback's: empty) leaves out."""
    return type(callback).__module__.split(".")[0] in (p for p, _, _ in _PACKAGES)


def _settle(trainer: Any, parts: dict[str, Any]) -> None:
    """Put the restored values that live in ints, flags and Lightning's metric objects back
    where the fit loop reads them."""
    loop = trainer.fit_loop.epoch_loop
    counters = parts["counters"]
    loop._batches_that_stepped = counters["batches_that_stepped"]
    trainer.should_stop = counters["should_stop"]
    trainer._logger_connector._first_loop_iter = counters["first_loop_iter"]
    _relog(loop._results, parts["logged"], trainer)


_META = ("fx", "name", "prog_bar", "logger", "on_step", "on_epoch", "enable_graph")
_MORE_META = ("add_dataloader_idx", "dataloader_idx", "metric_attribute")


def _logged(results: Any) -> dict[str, Any]:
    """What ``self.log`` gathered in the epoch (Lightning's ``_ResultCollection``) as plain
    values: its keys and settings, the running sums and the last step's value."""
    out = {}
    for key, metric in results.items():
        if not metric.is_tensor:
            raise Unrestorable(f"self.log({metric.meta.name!r}) logs a torchmetrics Metric")
        meta = metric.meta
        saved: dict[str, Any] = {f: getattr(meta, f) for f in (*_META, *_MORE_META)}
        saved["reduce_fx"] = meta.reduce_fx.__name__
        saved["sync"] = [meta.sync.should, meta.sync.rank_zero_only]
        saved["value"] = metric.value
        saved["batch_sizes"] = getattr(metric, "cumulated_batch_size", None)
        saved["step_value"] = metric._forward_cache
        saved["computed"] = metric._computed
        saved["state"] = [metric.has_reset, metric._update_count]
        out[key] = saved
    return out


def _relog(results: Any, logged: dict[str, Any], trainer: Any) -> None:
    """Rebuild ``results`` from ``_logged``'s values: what ``self.log`` had gathered."""
    lightning = sys.modules[type(results).__module__]
    results.clear()
    for key, saved in logged.items():
        meta = lightning._Metadata(
            **{f: saved[f] for f in (*_META, *_MORE_META)}, reduce_fx=saved["reduce_fx"]
        )
        should, rank_zero_only = saved["sync"]
        meta.sync = lightning._Sync(
            _should=should, fn=trainer.strategy.reduce, rank_zero_only=rank_zero_only
        )
        metric = lightning._ResultMetric(meta, True)
        metric.value = saved["value"]
        if saved["batch_sizes"] is not None:
            metric.cumulated_batch_size = saved["batch_sizes"]
        metric._forward_cache = saved["step_value"]
        metric._computed = saved["computed"]
        metric.has_reset, metric._update_count = saved["state"]
        results[key] = metric
