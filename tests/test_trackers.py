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
