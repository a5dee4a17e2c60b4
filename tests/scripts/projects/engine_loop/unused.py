"""A file of the project that the entry script never imports."""


def helper():
    return 1
