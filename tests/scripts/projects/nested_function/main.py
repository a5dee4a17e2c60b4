"""The entry script only parses a config and calls `run.main(cfg)` of lib/ (PATTERNS 33): the
epoch loop is in lib/run.py, the batch loop two calls further, in lib/steps.py."""

import argparse

from lib import run

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--lr", type=float, default=0.02)
cfg = parser.parse_args()
history = run.main(cfg)
print(f"best loss {min(history):.6f}")
