"""Fan replay segments out to workers and merge their output (``flor replay``)."""
