"""A DistributedDataParallel trainer in the torchrun shape: gloo on CPU, a sharded sampler
re-seeded per epoch, a scheduler, and printing on rank 0 only."""

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    features = torch.randn(192, 8)
    labels = (features[:, :4].sum(1) > 0).long()
    dataset = TensorDataset(features, labels)
    sampler = DistributedSampler(dataset, shuffle=True, seed=3)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        if os.environ.get("KILL_RANK") == str(rank) and epoch == 3:
            time.sleep(1.0)  # flor's writer commits epochs 0-2 meanwhile, even on a loaded host
            os.kill(os.getpid(), signal.SIGKILL)  # a rank lost mid-run
        sampler.set_epoch(epoch)
        model.train()
        total = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()  # @inside: if rank == 0 and epoch == 2: print(f"grad {model.module[0].weight.grad.norm():.6f}")
            total += loss.item()
        scheduler.step()
        # @collective: dist.all_reduce(torch.tensor([total]))
        if rank == 0:
            print(f"epoch {epoch} loss {total / len(loader):.5f}")
            # @outside: print(f"epoch {epoch} weight {model.module[0].weight.norm():.6f} lr {scheduler.get_last_lr()[0]:.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
