"""The model and data of the train_util project."""

import torch


def tiny_denoiser():
    return torch.nn.Sequential(torch.nn.Linear(6, 24), torch.nn.SiLU(), torch.nn.Linear(24, 6))


def noisy_pairs(n, seed):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randn(n, 6, generator=g)
    return clean + 0.3 * torch.randn(n, 6, generator=g), clean


def checksum(module):
    return sum(p.detach().sum().item() for p in module.parameters())
