"""What instrumented code calls, in seven rooms, each importing only the ones below it:

- ``trainers``: loops that live in a library (Lightning's ``Trainer.fit``), driven through
  the loop protocol;
- ``loop``: the loop protocol (``flor.it``, ``SkipBlock``, ``flor.log``), the process's
  session, and the recorder that decides when to checkpoint;
- ``checkpoints``: taking a checkpoint and writing it in the background, within a time
  budget (policy, clock) and a storage budget (thinning);
- ``journal``: what a run writes about itself besides checkpoint data (commits, stdout by
  iteration, the loop's counters) and what a sparse replay reads back from it;
- ``state``: what a checkpoint holds (captured in memory, restored in place, as bytes);
- ``process``: what this process was asked (options), its voice (reporter), its rank;
- ``trackers``: the trackers the script logs to (MLflow, TensorBoard, W&B), patched as it
  imports them: where a recording sent what, and what a replay sends them.

Modules that need torch are imported only once a run is active, so ``import flor`` stays
cheap: no package here imports a module that needs torch (or a tracker) in ``__init__``.

Imports: nothing.
"""
