"""A loop of short torch calls, the shape of a DQN's (a small network, a replay buffer a row
at a time), that says on stderr how often its thread gave up the CPU while it ran: Linux's
count of its voluntary context switches, which its waits at the GIL for another thread are."""

import resource
import sys

import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.01)
buffer = torch.zeros(20000, 8)  # 640 KB: stored as chunks, one of which a step writes to
log = [torch.zeros(4) for _ in range(300)]  # many small values: Python work to write
before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 100):
    x = torch.randn(16, 8)
    buffer[step] = x[0]
    log[step % 300] = x[1, :4]
    for _ in range(20):  # short calls, each of which lets another thread in
        y = net(x)
    loss = y.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.6f}")
print(f"switches {resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before}", file=sys.stderr)
