"""The ImageNet example's `mp.spawn(main_worker, ...)`, with main_worker imported from the
project's other file: flor records spawned ranks only for a function of the entry script, so
it refuses, naming this line."""

import os

import torch.multiprocessing as mp
from dist_worker import main_worker

if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    mp.spawn(main_worker, args=(2,), nprocs=2)  # @refused
