"""A DDP step loop in the nanoGPT shape under torchrun: `while True` over iter_num, a batch drawn
per rank, an eval branch every eval_interval steps on the master process only (PATTERNS 9), and
a break at max_iters. A hindsight line in that branch is needed by rank 0 alone, yet every rank
must run the steps it needs: their backward passes all-reduce."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
master_process = rank == 0
torch.manual_seed(0)
val_x = torch.randn(64, 8)
val_y = (val_x[:, :4].sum(1) > 0).long()
torch.manual_seed(1 + rank)  # each rank draws its own batches
model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()
iter_num, max_iters, eval_interval = 0, 40, 10
while True:
    if iter_num % eval_interval == 0 and master_process:
        with torch.no_grad():
            val = criterion(model.module(val_x), val_y)
        print(f"step {iter_num} val {val.item():.5f}")
        # @sparse: print(f"  hindsight w {model.module[0].weight.norm():.6f}")
    x = torch.randn(16, 8)
    y = (x[:, :4].sum(1) > 0).long()
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    iter_num += 1
    if iter_num > max_iters:
        break
dist.barrier()
dist.destroy_process_group()
