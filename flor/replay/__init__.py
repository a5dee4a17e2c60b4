"""Replay: plan which iterations run, restore checkpoints instead of training, and fan
segments out to workers (local processes or Ray tasks) and merge what they printed.

Imports: flor.errors, flor.inputs, flor.runs, flor.runtime.journal, flor.runtime.loop,
flor.runtime.process, flor.runtime.state, flor.runtime.trackers, flor.sources, flor.store,
flor.transform.
"""
