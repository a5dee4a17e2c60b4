"""What instrumented code calls: run context, flor.it, SkipBlock, state, checkpoints.

Modules that need torch (recorder, state, codec) are imported only
once a run is active, so ``import flor`` stays cheap.
"""
