"""``flor replay``: one run (here, or its segments in parallel), or one edit in many runs."""

from __future__ import annotations

import os
import sys
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import click

from flor.cli.edge import SCRIPT_SETTINGS, Edge
from flor.errors import DIVERGED, SKIPPED, FlorError
from flor.inputs import check_name

if TYPE_CHECKING:
    from flor.launch.across import Across, Replayed


@click.command(context_settings=dict(SCRIPT_SETTINGS))
@click.option("--name", required=True, help="Experiment to replay (its latest run by default).")
@click.option("--run", "run_id", help="Replay this run id instead of the latest.")
@click.option(
    "--runs",
    "runs_spec",
    help="Replay these runs, each at its own code version, with the edit carried to it: "
    "all, latest:N, since:YYYY-MM-DD, or ids separated by commas.",
)
@click.option(
    "--show-edits",
    is_flag=True,
    help="With --runs: print, per version, the diff each run would replay; run nothing.",
)
@click.option("--segment", help="Replay only segment I of N (e.g. 2/4); for one worker per GPU.")
@click.option(
    "--workers", type=click.IntRange(min=1), help="Replay in K segments at once; merged output."
)
@click.option(
    "--backend",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the --workers segments run: local processes, or Ray tasks.",
)
@click.option(
    "--address",
    help="Ray cluster: auto, HOST:PORT or ray://HOST:PORT (default: RAY_ADDRESS or a local Ray).",
)
@click.option(
    "--iterations",
    envvar="FLOR_ITERATIONS",
    help="Replay only these iterations (0-based): 9, or 0-4,10.",
)
@click.option(
    "--verify",
    type=click.IntRange(min=0),
    default=0,
    help="Also re-execute K checkpointed blocks (per segment) and compare with the record.",
)
@click.option(
    "--restore",
    type=click.Choice(["auto", "always"]),
    default="auto",
    show_default=True,
    envvar="FLOR_RESTORE",
    help="Restore a checkpointed block only where that is faster than running it (auto; "
    "replay measures it), or wherever a checkpoint is (always).",
)
@click.option(
    "--threads",
    help="Torch threads per replay process: N, or auto (the machine's cores / workers). "
    "Default: the recorded count, for bitwise parity with the record.",
)
@click.option(
    "--plan", "show_plan", is_flag=True, help="Print what would run, and an estimate; run nothing."
)
@click.option(
    "--rank",
    type=click.IntRange(min=0),
    help="Of a run recorded by several processes (torchrun): replay this rank's view in one "
    "process (default 0).",
)
@click.option(
    "--segment-from-env",
    is_flag=True,
    help="Under torchrun: each rank replays segment RANK+1 of WORLD_SIZE of a one-process run.",
)
@click.argument("script", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def replay(
    edge: Edge, /, show_plan: bool, runs_spec: str | None, show_edits: bool, **request: Any
) -> None:
    """Replay a recorded run with the script as it is now (edited with new prints or logs).

    SCRIPT defaults to the recorded path and ARGS to the recorded arguments. Blocks
    whose code is unchanged are restored from checkpoints instead of re-run, where
    restoring is the faster of the two (--restore always: wherever a checkpoint is).
    Inside a Slurm array job, the segment comes from SLURM_ARRAY_TASK_ID unless
    --segment is given. A run recorded under torchrun replays in one process (as
    rank 0, or --rank R) when only its restored state is needed, or under
    `torchrun --nproc_per_node N flor replay` with every rank in step.
    """
    from flor.launch import replay as replaying  # the command is `replay`

    if runs_spec is not None or show_edits:
        sys.exit(_replay_across(edge, runs_spec, show_plan, show_edits, request))
    store = edge.store()
    here = not (request["workers"] or show_plan)  # this process replays: it imports torch
    later = bool(request["workers"]) and not show_plan  # rewritten while the workers start
    prepared = replaying.prepare(
        replaying.ReplayRequest(**request), store, edge.reporter, os.environ, here, not later
    )
    if show_plan:
        click.echo("\n".join(replaying.estimate(prepared)))
        return
    if not prepared.workers:
        sys.exit(replaying.replay_here(prepared, store, edge.reporter))
    from flor.launch.fanout import replay_in_parallel

    done = replay_in_parallel(prepared, store, edge.settings, edge.reporter)
    click.echo(done.output, nl=False)
    click.echo(done.errors, nl=False, err=True)
    for f in done.failures:
        tail = "\n".join(f.stderr.strip().splitlines()[-15:])
        click.echo(
            f"flor: error: segment {f.index}/{prepared.workers} failed "
            f"(exit status {f.exit_status}):\n{tail}",
            err=True,
        )
    for line in done.sent:
        edge.reporter.say(line)
    for where in done.diverged:
        edge.reporter.warn(replaying.divergence(where))
    sys.exit(1 if done.failures else DIVERGED if done.diverged else 0)


_ONE_RUN_ONLY = MappingProxyType(
    {
        "run_id": "--run",
        "segment": "--segment",
        "rank": "--rank",
        "segment_from_env": "--segment-from-env",
        "args": "the script's arguments (each run replays with its own)",
    }
)


def _replay_across(
    edge: Edge, spec: str | None, show_plan: bool, show_edits: bool, request: dict[str, Any]
) -> int:
    """``--runs``: the edit carried to each chosen run's version, and replayed there."""
    from flor.launch import across
    from flor.launch.replay import ray_target

    if spec is None:
        raise FlorError("bad-option", "--show-edits shows the edit carried to each of --runs")
    wrong = [shown for k, shown in _ONE_RUN_ONLY.items() if request[k]]
    if wrong:
        raise FlorError(
            "bad-option", f"--runs replays whole runs: {', '.join(wrong)} cannot go with it"
        )
    if request["address"] and request["backend"] != "ray":
        raise FlorError("bad-option", "--address names a Ray cluster: add --backend ray")
    store = edge.store()
    planned = across.plan_across(store, check_name(request["name"]), spec, request["script"])
    if show_edits or show_plan:
        if show_edits:
            lines = across.shown_edits(planned)
        else:
            lines = across.planned(planned, store, request["restore"], request["verify"])
        click.echo("\n".join(lines))
        return 0
    for plan in planned.plans:
        if plan.skipped:
            edge.reporter.warn(
                f"run {plan.run.run_id} (version {plan.version}) skipped: {plan.skipped}"
            )
        for line in [] if plan.skipped else across.training_warnings(plan):
            edge.reporter.warn(line)
    edge.reporter.say(across.base_line(planned))
    address, env = ray_target(request["backend"], request["address"], os.environ)
    workers = across.Workers(request["workers"] or 1, address, env, _passed_options(request))
    return _print_across(
        edge, planned, across.replay_across(planned, store, edge.settings, edge.reporter, workers)
    )


def _passed_options(request: dict[str, Any]) -> dict[str, Any]:
    """What every run's replay gets of the options given to all of them."""
    return {k: request[k] for k in ("iterations", "verify", "restore", "threads")}


def _print_across(edge: Edge, planned: Across, done: Replayed) -> int:
    """Each replayed run's output under a header, failures' errors, and the summary line."""
    replayed = [p for p in planned.plans if p.skipped is None and p.run.run_id not in done.failures]
    for plan in planned.plans:
        if plan.skipped is None:
            click.echo(f"==> {plan.run.name}/{plan.run.run_id} (version {plan.version}) <==")
            click.echo(done.outputs.get(plan.run.run_id, ""), nl=False)
            click.echo(done.errors.get(plan.run.run_id, ""), nl=False, err=True)
        failure = done.failures.get(plan.run.run_id)
        if failure is not None:
            tail = "\n".join(failure.stderr.strip().splitlines()[-15:])
            edge.reporter.error(
                f"run {plan.run.run_id} failed (exit status {failure.exit_status}):\n{tail}"
            )
    for line in done.sent:
        edge.reporter.say(line)
    skipped = sum(p.skipped is not None for p in planned.plans)
    edge.reporter.say(
        f"{len(replayed)} of {len(planned.plans)} runs replayed, {skipped} skipped, "
        f"{len(done.failures)} failed"
    )
    return 1 if done.failures else SKIPPED if skipped else 0
