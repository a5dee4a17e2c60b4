"""``flor.UNBOUND``: stands for a name that was not bound when its block ended."""

from __future__ import annotations


class _Unbound:
    _instance: _Unbound | None = None

    def __new__(cls) -> _Unbound:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "flor.UNBOUND"

    def __reduce__(self) -> str:
        return "UNBOUND"


UNBOUND = _Unbound()
