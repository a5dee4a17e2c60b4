"""S3 benchmark: upload throughput of `flor push` and what deduplication saves.

    python benchmarks/bench_s3.py [--epochs 12] [--width 1024] [--repeats 3]

Starts a real S3 server on loopback (`weed mini`, as the tests do).

- Upload throughput: a fine-tuning run (frozen backbone, checkpoint every
  epoch) is recorded locally, then `flor push`ed to the server; the same files
  are then uploaded with plain boto3 `upload_file`, one after another (what
  `aws s3 cp --recursive` does, minus its parallelism), to fresh prefixes.
  Alternating, medians of MB/s over the same bytes.
- Deduplication: bytes the run's checkpoints hold (what a store without
  deduplication keeps) vs bytes it actually stored.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from s3server import S3Server  # noqa: E402

SCRIPT = ROOT / "tests" / "scripts" / "plain" / "finetune_frozen.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "s3.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = S3Server(work / "s3")
        server.start()
        try:
            result = measure(server, work, args)
        finally:
            server.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def record(
    work: Path, env: dict[str, str], name: str, source: str, args: argparse.Namespace
) -> Path:
    """Record ``source`` with `flor run`, a checkpoint every epoch; return its run folder."""
    (work / f"{name}.py").write_text(source)
    command = [sys.executable, "-m", "flor.cli", "run", "--name", name, f"{name}.py"]
    command += ["--epochs", str(args.epochs), "--width", str(args.width)]
    subprocess.run(command, env=env, cwd=work, check=True, capture_output=True)
    return next((work / "home" / name).iterdir())


def measure(server: S3Server, work: Path, args: argparse.Namespace) -> dict[str, object]:
    from flor import runs
    from flor.runs.transfer import copy_run, run_keys
    from flor.store import LocalStore
    from flor.store.s3 import S3Store

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOR_", "AWS_"))}
    env.update(server.env(), FLOR_HOME=str(work / "home"), FLOR_EPSILON="1e9")
    os.environ.update(server.env())
    frozen = record(work, env, "frozen", SCRIPT.read_text(), args)
    # Throughput needs bytes that change: the same script with the backbone trained too.
    trained = SCRIPT.read_text().replace("param.requires_grad_(False)", "pass")
    trained = trained.replace("head.parameters()", "model.parameters()")
    record(work, env, "trained", trained, args)

    local = LocalStore(work / "home")
    run = runs.load_run(local, "trained")
    keys = run_keys(local, run)
    nbytes = sum(local.size(k) for k in keys)
    bucket = server.bucket("flor-bench")
    client = server.client()
    push, plain = [], []
    for i in range(args.repeats):
        start = time.perf_counter()
        copy_run(local, S3Store(f"{bucket}/push{i}"), run, lambda m: None)
        push.append(time.perf_counter() - start)
        start = time.perf_counter()
        for key in keys:
            client.upload_file(str(local.root / key), "flor-bench", f"plain{i}/{key}")
        plain.append(time.perf_counter() - start)
    meta = json.loads((frozen / "run.json").read_text())
    med = statistics.median
    return {
        "upload": {
            "objects": len(keys),
            "bytes": nbytes,
            "flor_push_seconds": [round(s, 3) for s in push],
            "upload_file_seconds": [round(s, 3) for s in plain],
            "flor_push_MBps": round(nbytes / med(push) / 1e6, 1),
            "upload_file_MBps": round(nbytes / med(plain) / 1e6, 1),
            "speedup": round(med(plain) / med(push), 2),
            "note": "flor push's copy, in process: uploads, checksums, verification",
        },
        "dedup_frozen_backbone": {
            "checkpoints": meta["checkpoints"],
            "bytes_without_dedup": meta["checkpoint_bytes"],
            "bytes_stored": meta["stored_bytes"],
            "ratio": round(meta["checkpoint_bytes"] / meta["stored_bytes"], 2),
        },
    }


if __name__ == "__main__":
    main()
