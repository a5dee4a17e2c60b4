"""Hogwild: a shared-memory model trained by several processes (PATTERNS 22): refused."""

import torch
import torch.multiprocessing as mp


def train(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        loss = model(torch.randn(4, 2)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    model = torch.nn.Linear(2, 1)
    model.share_memory()
    procs = [mp.Process(target=train, args=(model,)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print("done")
