"""How long `flor instrument` takes on a 1,000-line training script (target: under a second).

    python benchmarks/bench_instrument.py [--lines 1000] [--repeats 5]

The script is a realistic trainer (tests/scripts/plain/train_function.py)
followed by enough helper functions (data transforms, metrics, a model zoo) to
reach --lines; the median over repeats of a full `instrument()` is reported.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from flor.transform import instrument

BASE = Path(__file__).resolve().parents[1] / "tests" / "scripts" / "plain" / "train_function.py"
HELPER = '''

def helper_{i}(batch, scale={i}):
    """Transform {i}: normalise, clip and augment a batch."""
    mean = batch.mean(0, keepdim=True)
    std = batch.std(0, keepdim=True) + 1e-6
    out = (batch - mean) / std
    if scale % 2 == 0:
        out = out.clamp(-3, 3)
    else:
        out = out * 0.5 + torch.randn_like(out) * 0.01
    stats = {{"mean": mean.sum().item(), "std": std.sum().item()}}
    for key, value in stats.items():
        if value != value:
            raise ValueError(key)
    return out, stats
'''


def script(lines: int) -> str:
    base = BASE.read_text()
    head, main_block = base.split('\nif __name__ == "__main__":')
    helpers, i = [], 0
    while len((head + "".join(helpers)).splitlines()) < lines - 3:
        helpers.append(HELPER.format(i=i))
        i += 1
    return head + "".join(helpers) + '\nif __name__ == "__main__":' + main_block


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    source = script(args.lines)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = instrument(source, "big.py")
        times.append(time.perf_counter() - start)
    assert result.changed and result.loops, result.report()
    print(
        f"instrument: {len(source.splitlines())} lines in {statistics.median(times):.3f}s "
        f"(median of {args.repeats}; min {min(times):.3f}s, max {max(times):.3f}s)"
    )


if __name__ == "__main__":
    main()
