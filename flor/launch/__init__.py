"""What starts a user's script, to record or to replay it: plain, under torchrun, or mp.spawn.

``start`` builds and installs the session a process asked for (the ``flor`` command's, or
``import flor``'s legacy flags); ``record`` rewrites and records a script; ``replay`` checks
a replay request and runs it here; ``fanout`` spreads one over processes, each a
``worker`` taking a frozen job; ``across`` replays one edit in several runs; ``spawn`` turns an ``mp.spawn`` into ranks of one job. ``execfile`` runs a script
as ``__main__``, ``import_hook`` rewrites project modules as they are imported,
``project_files`` says which modules are the project's, ``startup`` overlaps flor's start-up
with torch's import, ``process_end`` ends the process without Python's teardown.

Imports: flor.errors, flor.inputs, flor.replay, flor.runs, flor.runtime.journal, flor.runtime.loop,
flor.runtime.process, flor.runtime.state, flor.runtime.trackers, flor.runtime.trainers,
flor.sources, flor.store,
flor.transform.
"""
