"""The ImageNet-example shape: main() parses arguments and starts one process per rank with
mp.spawn; each process sets up its process group and runs the training loop."""

import argparse
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main_worker(rank, world_size, port, args):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    torch.manual_seed(0)
    features = torch.randn(128, 6)
    targets = features @ torch.arange(1.0, 7.0) / 10
    dataset = TensorDataset(features, targets)
    sampler = DistributedSampler(dataset, seed=5)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(nn.Linear(6, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = ((model(x).squeeze(1) - y) ** 2).mean()
            loss.backward()
            optimizer.step()
            running += loss.item()
        if rank == 0:
            print(f"epoch {epoch} loss {running / len(loader):.5f}")
            # @outside: print(f"epoch {epoch} bias {model.module.bias.item():.6f}")
    # @raises: raise ValueError(f"boom on rank {rank}")
    dist.barrier()  # no rank tears the group down while another still uses it
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(main_worker, args=(2, port, args), nprocs=2)


if __name__ == "__main__":
    main()
