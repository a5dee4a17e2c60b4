"""A small entry script in scripts/ calls `TrainLoop(...).run_loop()` of the project's package,
importable from the project root (installed with `pip install -e .`, or on PYTHONPATH)."""

import argparse

import torch
from improved import nets
from improved.train_util import TrainLoop


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=24)
    args = parser.parse_args()
    torch.manual_seed(3)
    model = nets.tiny_denoiser()
    data = nets.noisy_pairs(256, seed=3)
    loop = TrainLoop(model=model, data=data, batch_size=16, lr=3e-3, ema_rate=0.9,
                     log_interval=6, total_steps=args.steps)
    loop.run_loop()
    print(f"done after {loop.step} steps, ema {nets.checksum(loop.ema):.6f}")


if __name__ == "__main__":
    main()
