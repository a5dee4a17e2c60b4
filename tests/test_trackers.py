"""Replay respects the trackers a script logs to: MLflow (a local file store) and TensorBoard
(SummaryWriter's default, time-named directory). A recording, then a hindsight edit that logs
a new value to both, replayed whole, with `--workers 2`, and across two recordings with
`--runs all`: each tracker holds one run per recording, the recorded values once, and each
replay's hindsight values once beside them, equal to what a plain run of the edited script
logs. Read back through each library's own API."""

from __future__ import annotations

import json

import pytest
from conftest import SCRIPTS, Flor, hindsight

pytestmark = pytest.mark.slow

STEPS = list(range(6))
READ = """
import glob, json, os, sys
import mlflow
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

out = {"mlflow": {}, "tensorboard": {}}
client = mlflow.MlflowClient()
for run in client.search_runs(["0"]):
    rid = run.info.run_id
    out["mlflow"][rid] = {
        "status": run.info.status,
        "start": run.info.start_time,
        "replay_tags": sorted(k for k in run.data.tags if k.startswith("flor.replay.")),
        **{k: sorted((m.step, m.value) for m in client.get_metric_history(rid, k))
           for k in ("loss", "weight_norm")},
    }
for folder in sorted(glob.glob(os.path.join(sys.argv[1], "*"))):
    events = EventAccumulator(folder)
    events.Reload()
    out["tensorboard"][folder] = {
        "files": len(os.listdir(folder)),
        **{t: sorted((e.step, e.value) for e in events.Scalars(t)) for t in events.Tags()["scalars"]},
    }
print(json.dumps(out))
"""


def _env(f: Flor, store: str) -> dict[str, str]:
    return {
        "MLFLOW_TRACKING_URI": (f.work / store).as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
        "PYTHONWARNINGS": "ignore",
    }


def _read(f: Flor, store: str, runs: str) -> dict:
    (f.work / "read.py").write_text(READ)
    return json.loads(f.python(f.work / "read.py", str(f.work / runs), **_env(f, store)).stdout)


def test_a_replay_adds_its_hindsight_values_to_the_recorded_mlflow_and_tensorboard_runs(
    flor_env: Flor,
) -> None:
    f = flor_env
    source = (SCRIPTS / "trackers/mlflow_tensorboard.py").read_text()
    script = f.work / "train.py"
    script.write_text(hindsight(source, "none"))
    env = _env(f, "mlruns")
    for _ in range(2):  # two recordings: --runs all replays both
        f.cli("run", "--name", "ml", script.name, FLOR_EPSILON="1e9", **env)
    recorded = _read(f, "mlruns", "runs")
    assert len(recorded["mlflow"]) == 2 and len(recorded["tensorboard"]) == 2
    first, second = sorted(recorded["mlflow"], key=lambda r: recorded["mlflow"][r]["start"])

    # Ground truth: a plain run of the edited script, logging to stores of its own.
    edited = hindsight(source, "outside")
    (f.work / "plain").mkdir()
    (f.work / "plain" / "train.py").write_text(edited)
    f.python(f.work / "plain" / "train.py", **_env(f, "plain/mlruns"))
    ((truth_run, truth),) = _read(f, "plain/mlruns", "plain/runs")["mlflow"].items()
    assert [s for s, _ in truth["weight_norm"]] == STEPS

    script.write_text(edited)
    whole = f.cli("replay", "--name", "ml", **env)
    assert "sent 6 hindsight values (weight_norm) to MLflow run" in whole.stderr
    assert "sent 6 hindsight values (weight_norm) to TensorBoard log directory" in whole.stderr
    split = f.cli("replay", "--name", "ml", "--workers", "2", **env)
    assert "sent 6 hindsight values (weight_norm) to MLflow run" in split.stderr
    across = f.cli("replay", "--name", "ml", "--runs", "all", **env)
    assert across.stderr.count("sent 6 hindsight values (weight_norm)") == 4  # 2 runs, 2 trackers

    after = _read(f, "mlruns", "runs")
    assert sorted(after["mlflow"]) == sorted(recorded["mlflow"])  # no run of the tracker's added
    replays_of = {first: 1, second: 3}  # --runs all; and whole and --workers 2 (the latest)
    for run_id, replays in replays_of.items():
        run = after["mlflow"][run_id]
        assert run["status"] == "FINISHED" and run["loss"] == recorded["mlflow"][run_id]["loss"]
        assert len(run["replay_tags"]) == replays
        assert run["weight_norm"] == sorted(truth["weight_norm"] * replays)  # each replay once
    # TensorBoard: the directories are named for the time, so the first recording's sorts first
    for (folder, events), replays in zip(sorted(after["tensorboard"].items()), (1, 3)):
        assert events["loss"] == recorded["tensorboard"][folder]["loss"]  # once, unchanged
        assert sorted(s for s, _ in events["weight_norm"]) == sorted(STEPS * replays)
        assert sorted(events["weight_norm"]) == sorted(truth["weight_norm"] * replays)
        assert events["files"] == 1 + replays + (replays > 1)  # one per replaying process
    assert truth_run not in after["mlflow"]


# W&B's offline run files: a LevelDB-style log of the library's own protobuf records.
READ_WANDB = """
import glob, json, os, struct, sys
from wandb.proto import wandb_internal_pb2 as pb

def records(path):
    data, pos, block, pending = open(path, "rb").read(), 7, 32768, b""  # after the W&B header
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block  # a block's tail too short for a header: padding
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a whole record, or the last part of one
            yield pending + chunk
            pending = b""
        elif kind in (2, 3):
            pending += chunk

out = {}
for path in glob.glob(os.path.join(sys.argv[1], "wandb", "offline-run-*", "run-*.wandb")):
    run_id, run, history = None, {}, []
    for data in records(path):
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_id, run = record.run.run_id, {"group": record.run.run_group, "notes": record.run.notes}
        elif kind == "history":
            items = record.history.item
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items})
    entry = out.setdefault(run_id, {"processes": 0, "history": [], **run})
    entry["processes"] += 1
    entry["history"] += history
print(json.dumps(out))
"""


def test_a_replay_sends_hindsight_values_to_a_w_and_b_run_linked_to_the_recorded_one(
    flor_env: Flor,
) -> None:
    f = flor_env
    source = (SCRIPTS / "trackers/wandb_offline.py").read_text()
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(f.work), "WANDB_SILENT": "true"}
    env["PYTHONWARNINGS"] = "ignore"
    script = f.work / "train.py"
    script.write_text(hindsight(source, "none"))
    f.cli("run", "--name", "wb", script.name, FLOR_EPSILON="1e9", **env)
    (f.work / "read.py").write_text(READ_WANDB)

    def runs() -> dict:
        return json.loads(f.python(f.work / "read.py", str(f.work), **env).stdout)

    (recorded,) = runs()
    script.write_text(hindsight(source, "outside"))
    (f.work / "plain").mkdir()
    (f.work / "plain" / "train.py").write_text(hindsight(source, "outside"))
    f.python(f.work / "plain" / "train.py", **{**env, "WANDB_DIR": str(f.work / "plain")})
    ((_, plain),) = json.loads(
        f.python(f.work / "read.py", str(f.work / "plain"), **env).stdout
    ).items()
    truth = sorted((h["_step"], h["weight_norm"]) for h in plain["history"] if "weight_norm" in h)
    assert [s for s, _ in truth] == STEPS

    for workers in ("1", "2"):
        replayed = f.cli("replay", "--name", "wb", "--workers", workers, **env)
        assert (
            f"sent 6 hindsight values (weight_norm) to a W&B offline run linked to run {recorded}"
            in replayed.stderr
        )
    found = runs()
    assert found[recorded]["processes"] == 1  # the recorded run's file, untouched
    assert all("weight_norm" not in h for h in found[recorded]["history"])
    linked = {k: v for k, v in found.items() if k != recorded}
    assert sorted(v["processes"] for v in linked.values()) == [1, 2]  # a replay, its 2 workers
    for run_id, run in linked.items():
        assert run_id.startswith(f"{recorded}-flor-") and run["group"] == recorded
        values = sorted((h["_step"], h["weight_norm"]) for h in run["history"])
        assert values == truth  # each value once, at its step, whatever the workers
        assert sorted(h["flor/iteration"] for h in run["history"]) == STEPS
        assert all(
            set(h) <= {"_step", "_runtime", "_timestamp", "weight_norm", "flor/iteration"}
            for h in run["history"]
        )
