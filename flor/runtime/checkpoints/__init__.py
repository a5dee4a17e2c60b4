"""Taking a block's checkpoint, and when: within a time budget and a storage budget.

``checkpointer`` copies a block's state on the training thread and hands it to ``writer``,
which encodes and stores it in the background; ``policy`` keeps checkpoint cost under
epsilon of the compute ``clock`` measured; ``thinning`` drops what outgrows the storage
budget.

Imports: flor.inputs, flor.runs, flor.runtime.state, flor.store.
"""
