"""`flor push` / `flor pull`: copy runs between stores, verified, in commit order.

The blobs and checkpoint data go first (in parallel), journal entries next,
``run.json`` last: a run appears in the destination only once everything it
points at is there, and an interrupted copy is finished by running it again
(what the destination already holds is skipped).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from flor import runs
from flor.errors import CorruptCheckpoint, FlorError
from flor.runs import layout
from flor.store import Store


@dataclass
class Copied:
    objects: int = 0  # copied now
    nbytes: int = 0
    present: int = 0  # already in the destination


def run_keys(store: Store, run: runs.RecordedRun) -> list[str]:
    """Every key of ``run`` in the order a copy must write them."""
    keys = list(store.keys(run.prefix))
    meta = layout.meta_key(run.prefix)
    commits = [k for k in keys if layout.is_journal(k)]
    data = [k for k in keys if k not in commits and k != meta]
    return (
        [layout.blob_key(sha) for sha in sorted(runs.referenced_blobs(run))]
        + data
        + commits
        + [meta]
    )


def copy_run(
    src: Store, dst: Store, run: runs.RecordedRun, progress: Callable[[str], None]
) -> Copied:
    """Copy ``run`` from ``src`` to ``dst``; raise if any object does not verify afterwards."""
    keys = run_keys(src, run)
    commits = [k for k in keys if layout.is_journal(k) or k == layout.meta_key(run.prefix)]
    data = keys[: len(keys) - len(commits)]
    done = Copied()
    count = threading.Lock()  # copies run on a pool

    def copy(key: str) -> None:
        payload = src.get(key)
        if layout.is_blob(key) and hashlib.sha256(payload).hexdigest() != key.rsplit("/", 1)[1]:
            raise CorruptCheckpoint(key, "the source copy fails its checksum; not copied")
        if dst.holds(key, payload):
            with count:
                done.present += 1
            return
        dst.put(key, payload)
        if not dst.holds(key, payload):
            raise FlorError("copy-unverified", f"{key} did not verify in {dst.url} after copying")
        with count:
            done.objects += 1
            done.nbytes += len(payload)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(copy, data))  # re-raises the first failure: no commit goes up then
    for key in commits:
        copy(key)
    progress(
        f"{run.name}/{run.run_id}: {done.objects} objects ({done.nbytes / 1e6:.1f} MB) copied, "
        f"{done.present} already in {dst.url}"
    )
    return done


def copy_runs(
    src: Store, dst: Store, name: str, run_id: str | None, progress: Callable[[str], None]
) -> set[str]:
    """Copy run ``run_id`` (default: every run) of ``name``; the prefixes copied."""
    ids = [run_id] if run_id else runs.list_runs(src, name)
    if not ids:
        raise FlorError("no-run", f"no recorded run named {name!r} in {src.url}")
    copied = set()
    for rid in ids:
        run = runs.load_run(src, name, rid)
        copy_run(src, dst, run, progress)
        copied.add(run.prefix)
    return copied


def remote_url(url: str | None, home: str, option: str) -> str:
    """The store ``flor push``/``pull`` copies to or from: ``url``, never the local one."""
    if not url:
        raise FlorError("no-store", f"say where: {option} s3://BUCKET/PREFIX, or set FLOR_STORE")
    if os.path.abspath(url) == os.path.abspath(home):
        raise FlorError("same-store", f"{url} is the local store itself")
    return url
