import torch


def make_batches(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(60, 4, generator=g)
    y = x[:, :3].argmax(1)
    return [(x[i : i + 15], y[i : i + 15]) for i in range(0, 60, 15)]
