"""The store contract; every backend runs the same suite (fsspec-style).

``s3`` is a real S3 server on loopback (``weed mini``); ``s3-cached`` is that
server behind the local write-back cache that ``FLOR_STORE=s3://...`` uses.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from s3server import S3Server

from flor import runs
from flor.store import LocalStore, Store, StoreSettings

BACKENDS = [
    "local",
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("s3-cached", marks=pytest.mark.s3),
]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    if request.param == "local":
        return LocalStore(tmp_path / "store")
    server: S3Server = request.getfixturevalue("s3_server")
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    settings = StoreSettings(home=str(tmp_path / "home"))
    url = f"{server.bucket('flor-contract')}/{tmp_path.name}"
    return runs.open_store(url, settings, cached=request.param == "s3-cached")


def test_put_get_list_delete(store: Store) -> None:
    store.put("a/b/1.json", b"one")
    store.put("a/b/2.json", b"two")
    store.put("a/c.txt", b"three")
    assert store.get("a/b/1.json") == b"one"
    assert list(store.keys("a/b")) == ["a/b/1.json", "a/b/2.json"]
    assert store.children("a") == ["b", "c.txt"]
    assert store.size("a/c.txt") == 5
    assert store.sizes("a") == {"a/b/1.json": 3, "a/b/2.json": 3, "a/c.txt": 5}
    store.put("a/c.txt", b"new")
    assert store.get("a/c.txt") == b"new"
    store.flush()
    assert store.children("a") == ["b", "c.txt"]
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


def test_blobs_are_stored_once(store: Store) -> None:
    data = b"x" * 1000
    key = ".blobs/" + hashlib.sha256(data).hexdigest()
    assert store.put_blob(key, data)
    assert not store.put_blob(key, data)
    store.flush()
    assert store.get(key) == data
    assert store.children("") == [".blobs"]


def test_holds_compares_content(store: Store) -> None:
    store.put("k", b"payload")
    store.flush()
    assert store.holds("k", b"payload")
    assert not store.holds("k", b"payloaX")
    assert not store.holds("missing", b"payload")


def test_write_back_survives_a_new_process(store: Store, tmp_path: Path) -> None:
    """What one process flushed, a fresh store object (another worker) reads."""
    store.put("run/ckpt/1.pt", b"data")
    store.put("run/journal/1.json", b"{}")
    store.flush()
    again = (
        runs.open_store(store.url, StoreSettings(home=str(tmp_path / "home")))
        if store.url.startswith("s3://")
        else LocalStore(store.url)
    )
    assert list(again.keys("run")) == ["run/ckpt/1.pt", "run/journal/1.json"]
    assert again.get("run/ckpt/1.pt") == b"data"
