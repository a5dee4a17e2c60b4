"""The loop protocol and the session behind it.

``api`` is what a script calls (``flor.it``, ``SkipBlock``, ``flor.log``), a no-op without a
session; ``context`` holds the process's one session; ``session`` is what recording and
replaying share (iterations, blocks); ``recorder`` is record mode. Replay mode lives in
``flor.replay``, above.

Imports: flor.errors, flor.runs, flor.runtime.checkpoints, flor.runtime.journal,
flor.runtime.process, flor.runtime.state, flor.runtime.trackers, flor.store.
"""
