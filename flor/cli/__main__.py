"""``python -m flor.cli``: the ``flor`` command."""

from flor.cli import main

main()
