"""What a checkpoint holds: a block's state captured in memory, restored in place, as bytes.

``kinds`` says what kind of value each object is; ``capture`` and ``restore`` are inverses
over that tree; ``scope`` is the cheap part of a block's calling scope (rebound by name);
``loader_position`` a persistent DataLoader iterator's position; ``codec`` and ``chunks``
turn a snapshot into a manifest plus content-addressed chunks, written where they changed;
``unpickle`` loads the values that had to be pickled without running what their bytes name.

Imports: flor.errors, flor.runs, flor.store.
"""
