from .loop import train_epoch  # noqa: F401
