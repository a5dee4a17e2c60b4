"""One rank of the job: DDP over gloo."""

import torch
import torch.distributed as dist


def main_worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        x = torch.randn(16, 4)
        loss = (model(x) - x.mean(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.6f}")
    dist.destroy_process_group()
