"""The library trainers flor records without a loop in the script: what both sides agree on.

A script trained by Lightning's ``Trainer.fit`` or Hugging Face's ``Trainer.train`` has no
main loop of its own; its loop lives in the library. ``flor.runtime.trainers`` drives flor's loop protocol from that library's
loop (the iteration is an epoch, the block its training); the transform needs the same
block's name and which of the user's methods the block calls, to tell whether an edit
touched it (``flor.transform.fingerprints``) and to say what it found
(``flor.transform.instrumenter``). Pure data: nothing here imports a framework.

Imports: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    title: str  # what flor says it found: "Lightning Trainer.fit"
    packages: tuple[str, ...]  # the import names that bring it in
    entry: str  # the method whose call starts training (``trainer.fit(...)``), on a ``*Trainer``
    block: str  # the SkipBlock its adapter opens each iteration
    shape: str  # what an iteration and the block are, said once
    calls: frozenset[str]  # the user's methods (hooks, callbacks) the block runs, by name
    # an argument of the trainer that, passed with any value but the one named, moves more
    # hooks inside the block; and those hooks
    inside_if: tuple[tuple[str, object, frozenset[str]], ...]


LIGHTNING = Framework(
    title="Lightning Trainer.fit",
    packages=("lightning", "pytorch_lightning"),
    entry="fit",
    block="lightning.fit",
    shape="epochs as iterations; block: the training epoch (validation after it)",
    calls=frozenset(
        {
            # the training step and what it runs, module and callbacks alike
            "training_step",
            "on_train_batch_start",
            "on_train_batch_end",
            "on_before_backward",
            "backward",
            "manual_backward",
            "on_after_backward",
            "on_before_optimizer_step",
            "optimizer_step",
            "optimizer_zero_grad",
            "on_before_zero_grad",
            "configure_gradient_clipping",
            "clip_gradients",
            "lr_scheduler_step",
            # the batch on its way in, and the data behind it
            "on_before_batch_transfer",
            "transfer_batch_to_device",
            "on_after_batch_transfer",
            "__getitem__",
            "__getitems__",
            "__iter__",
            "__next__",
            "__len__",
        }
    ),
    # Validation within an epoch (``val_check_interval``) runs inside its training.
    inside_if=(
        (
            "val_check_interval",
            1.0,
            frozenset(
                {
                    "validation_step",
                    "on_validation_start",
                    "on_validation_end",
                    "on_validation_epoch_start",
                    "on_validation_epoch_end",
                    "on_validation_batch_start",
                    "on_validation_batch_end",
                    "on_validation_model_eval",
                    "on_validation_model_train",
                    "on_validation_model_zero_grad",
                }
            ),
        ),
    ),
)

TRANSFORMERS = Framework(
    title="Hugging Face Trainer.train",
    packages=("transformers",),
    entry="train",
    block="transformers.train",
    shape="epochs as iterations; block: the training epoch (evaluation after it)",
    calls=frozenset(
        {
            # the step, the Trainer methods a subclass overrides for it, and step callbacks
            "training_step",
            "compute_loss",
            "compute_loss_func",
            "get_batch_samples",
            "_prepare_inputs",
            "log",
            "on_step_begin",
            "on_substep_end",
            "on_pre_optimizer_step",
            "on_optimizer_step",
            "on_step_end",
            "on_log",  # logging every logging_steps happens inside the epoch
            "on_save",
            # the data
            "__getitem__",
            "__getitems__",
            "__iter__",
            "__next__",
            "__len__",
        }
    ),
    # Evaluation every eval_steps (not at each epoch's end) runs inside the training.
    inside_if=tuple(
        (
            argument,
            "epoch",
            frozenset(
                {
                    "evaluate",
                    "evaluation_loop",
                    "prediction_step",
                    "compute_metrics",
                    "preprocess_logits_for_metrics",
                    "on_evaluate",
                    "on_prediction_step",
                }
            ),
        )
        for argument in ("eval_strategy", "evaluation_strategy")
    ),
)

KNOWN = (LIGHTNING, TRANSFORMERS)
