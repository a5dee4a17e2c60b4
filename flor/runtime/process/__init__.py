"""This process's facts: what it was asked to do, how it speaks, which rank of a job it is.

``options`` (built from what a user typed, checked in ``flor.inputs``), ``reporter`` (the
one voice on the terminal), ``job`` (torchrun's or mp.spawn's ranks, and agreeing with them).

Imports: flor.errors, flor.inputs, flor.sources.
"""
