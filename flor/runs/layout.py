"""The layout of runs in a store: the one module that spells key names.

    NAME/RUN_ID/run.json                 metadata (rewritten at the end of the run)
    NAME/RUN_ID/source.py                the exact script that was recorded
    NAME/RUN_ID/original.py              the user's script, when ``flor run`` rewrote it
    NAME/RUN_ID/project.json             the project's other files the script imports, and
    NAME/RUN_ID/files/SHA.py             their sources (as run, and the user's) by SHA-256
    NAME/RUN_ID/stdout.json              what the script printed outside flor.it loops
    NAME/RUN_ID/heartbeat.json           rewritten while the run records (gc spares it)
    NAME/RUN_ID/ckpt/ITER.BLOCK.OCC.pt   checkpoint data (written first)
    NAME/RUN_ID/journal/ITER.json        commit of iteration ITER's checkpoints (written last)
    NAME/RUN_ID/journal/loop-N.json      end of the N-th flor.it loop
    NAME/RUN_ID/logs/SEQ.jsonl           flor.log values while recording
    NAME/RUN_ID/replays/REPLAY_ID/...    what replays produced; never touches the above
    NAME/RUN_ID/ranks/R/...              rank R's own journal, for a job of several
                                         processes (rank 0's is the run's own: the above)
    .blobs/AB/ABCDEF...                  tensor bytes under their SHA-256, shared by all runs

A checkpoint exists for replay only once its journal entry does.
Run ids sort by creation time, so the latest run is the largest id.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from flor import store
from flor.store import KeyKinds, Store, StoreSettings

BLOBS = ".blobs"


def new_id() -> str:
    """A unique, time-sortable id: ``20261130-053300-1a2b3c``."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def run_prefix(name: str, run_id: str) -> str:
    return f"{name}/{run_id}"


def rank_prefix(prefix: str, rank: int) -> str:
    """Where rank ``rank`` of a distributed run keeps its journal."""
    return prefix if rank == 0 else f"{ranks_folder(prefix)}/{rank}"


def ranks_folder(prefix: str) -> str:
    return f"{prefix}/ranks"


def meta_key(prefix: str) -> str:
    return f"{prefix}/run.json"


def source_key(prefix: str) -> str:
    return f"{prefix}/source.py"


def original_key(prefix: str) -> str:
    return f"{prefix}/original.py"


def project_key(prefix: str) -> str:
    return f"{prefix}/project.json"


def project_file_key(prefix: str, sha256: str) -> str:
    return f"{prefix}/files/{sha256}.py"


# A recording rewrites its heartbeat this often; `flor gc` leaves alone a run whose run.json
# says it records and whose heartbeat (or start) is younger than STALE_AFTER.
HEARTBEAT_SECONDS = 30.0
STALE_AFTER = 4 * HEARTBEAT_SECONDS


def heartbeat_key(prefix: str) -> str:
    return f"{prefix}/heartbeat.json"


def stdout_key(prefix: str) -> str:
    return f"{prefix}/stdout.json"


def ckpt_folder(prefix: str) -> str:
    return f"{prefix}/ckpt"


def ckpt_key(prefix: str, iteration: int, block: str, occurrence: int) -> str:
    return f"{ckpt_folder(prefix)}/{iteration:08d}.{block}.{occurrence}.pt"


def blob_key(sha256: str) -> str:
    return f"{BLOBS}/{sha256[:2]}/{sha256}"


def is_blob(key: str) -> bool:
    return key.startswith(BLOBS + "/")


def journal_folder(prefix: str) -> str:
    return f"{prefix}/journal"


def commit_key(prefix: str, iteration: int) -> str:
    return f"{journal_folder(prefix)}/{iteration:08d}.json"


def loop_end_key(prefix: str, loop: int) -> str:
    return f"{journal_folder(prefix)}/loop-{loop:03d}.json"


def is_loop_end(key: str) -> bool:
    return key.rsplit("/", 1)[-1].startswith("loop-")


def is_journal(key: str) -> bool:
    return "/journal/" in key


def logs_folder(prefix: str) -> str:
    return f"{prefix}/logs"


def iteration_logs_key(prefix: str, iteration: int) -> str:
    return f"{logs_folder(prefix)}/{iteration:08d}.jsonl"


def loop_logs_key(prefix: str, loop: int) -> str:
    return f"{logs_folder(prefix)}/loop-{loop:03d}.jsonl"


def replays_folder(prefix: str) -> str:
    return f"{prefix}/replays"


def replay_folder(prefix: str, replay_id: str) -> str:
    return f"{replays_folder(prefix)}/{replay_id}"


def segment_key(prefix: str, replay_id: str, index: int, count: int) -> str:
    return f"{replay_folder(prefix, replay_id)}/segment-{index}-of-{count}.json"


def replay_source_key(prefix: str, replay_id: str) -> str:
    return f"{replay_folder(prefix, replay_id)}/source.py"


def immutable(key: str) -> bool:
    """Keys written once and never changed: a cache may serve them."""
    return (
        is_blob(key)
        or "/ckpt/" in key
        or "/files/" in key
        or key.endswith(("/source.py", "/original.py"))
    )


def is_data(key: str) -> bool:
    """Keys a commit points at; they may be written in parallel, ahead of any commit."""
    return is_blob(key) or "/ckpt/" in key


def put_json(store: Store, key: str, value: Any, compact: bool = False) -> None:
    """``compact``: for the journal's entries, written while training runs, and a replay's
    output (an indented dump takes json's pure-Python encoder, several milliseconds per
    entry, 0.1 s for a replay's 10,000 iterations)."""
    indent = None if compact else 1
    store.put(key, json.dumps(value, indent=indent, sort_keys=True).encode())


def get_json(store: Store, key: str) -> Any:
    return json.loads(store.get(key))


KINDS = KeyKinds(immutable=immutable, data=is_data, content_addressed=is_blob)


def open_store(
    url: str | None,
    settings: StoreSettings,
    cached: bool = True,
    warn: Callable[[str], None] | None = None,
    spool: bool = False,
) -> Store:
    """The store at ``url`` (default: the settings'), its cache told which keys are which;
    ``spool``: a recording, which goes on while an S3 server does not answer."""
    return store.open_store(url, settings, cached, KINDS, warn, spool)
