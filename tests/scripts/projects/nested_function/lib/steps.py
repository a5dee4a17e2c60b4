"""One epoch of minibatches."""

import torch


def fit_epoch(model, optimizer, data, batch_size=20):
    x, y = data
    order = torch.randperm(len(x))
    total = 0.0
    for start in range(0, len(x), batch_size):
        rows = order[start : start + batch_size]
        total += step(model, optimizer, x[rows], y[rows])
    return total / (len(x) // batch_size)


def step(model, optimizer, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()  # @inside: print(f"  grad {model[0].weight.grad.norm().item():.6f}")
    return loss.item()
