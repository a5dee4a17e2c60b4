"""The GPU paths, checked where CUDA is (CI has none; the suite tests them as far as a CPU can).

    python benchmarks/gpu_check.py      # one line per check; exit status 0 when all pass

A small model on ``cuda`` with dropout (its masks come from the device's RNG stream) is
recorded by ``flor run`` with a checkpoint every epoch, in a temporary ``FLOR_HOME``. Then:

1. GPU-to-CPU snapshots: an edit after the step, replayed whole, restores every epoch from
   checkpoints copied off the device and prints what a full run of the edited script prints.
2. CUDA RNG capture: an edit inside the step, replayed from ``--segment 2/2`` (epoch 2's
   checkpoint restored, epochs 3-5 re-executed), prints what a full run prints: the dropout
   masks after the restore come from the restored device stream.
3. ``capture_rng`` holds a state for every device once CUDA is in use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

TRAIN = """\
import torch
torch.manual_seed(0)
device = "cuda"
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(64, 1)
).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(512, 32, device=device)
y = x.sum(1, keepdim=True)
for epoch in range(6):
    for i in range(0, 512, 64):
        loss = ((model(x[i : i + 64]) - y[i : i + 64]) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # INSIDE
    print(f"epoch {epoch} loss {loss.item():.6f}")
    # OUTSIDE
"""
EDITS = {
    "outside": ("    # OUTSIDE", '    print("w", model[0].weight.sum().item())'),
    "inside": ("        # INSIDE", '        print("  g", model[0].weight.grad.norm().item())'),
}


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing checked")
        return 2
    work = Path(tempfile.mkdtemp(prefix="flor-gpu-"))
    env = {**os.environ, "FLOR_HOME": str(work / "home"), "FLOR_EPSILON": "1e9"}
    script = work / "train.py"

    def run(*args: str) -> str:
        proc = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"gpu_check: {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
        return proc.stdout

    def flor(*args: str) -> str:
        return run(sys.executable, "-m", "flor.cli", *args)

    script.write_text(TRAIN)
    flor("run", "--name", "gpu", "train.py")
    results = []
    for kind, (marker, line) in EDITS.items():
        script.write_text(TRAIN.replace(marker, line))
        truth = run(sys.executable, "train.py")
        if kind == "outside":
            replayed, expected = flor("replay", "--name", "gpu"), truth
        else:
            replayed = flor("replay", "--name", "gpu", "--segment", "2/2")
            expected = truth[truth.index("epoch 2 loss") :].split("\n", 1)[1]
        results.append((f"{kind} edit replays like a full run", replayed == expected))
    torch.zeros(1, device="cuda")
    from flor.runtime.state.capture import capture_rng

    states = capture_rng().get("cuda", [])
    results.append(("a CUDA RNG state per device", len(states) == torch.cuda.device_count()))
    for what, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {what}")
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
