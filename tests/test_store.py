"""The store contract; every backend runs the same suite (fsspec-style)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flor.store import LocalStore, Store


@pytest.fixture(params=["local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return LocalStore(tmp_path / "store")


def test_put_get_list_delete(store: Store) -> None:
    store.put("a/b/1.json", b"one")
    store.put("a/b/2.json", b"two")
    store.put("a/c.txt", b"three")
    assert store.get("a/b/1.json") == b"one"
    assert list(store.keys("a/b")) == ["a/b/1.json", "a/b/2.json"]
    assert store.children("a") == ["b", "c.txt"]
    assert store.size("a/c.txt") == 5
    store.put("a/c.txt", b"new")
    assert store.get("a/c.txt") == b"new"
    store.delete("a/c.txt")
    store.delete("a/c.txt")
    assert not store.exists("a/c.txt")
    with pytest.raises(KeyError):
        store.get("a/c.txt")
    assert list(store.keys("nothing")) == []
    for key in list(store.keys("a")):
        store.delete(key)
    assert store.children("") == []


def test_keys_cannot_escape(store: Store) -> None:
    with pytest.raises(ValueError):
        store.put("../x", b"")
