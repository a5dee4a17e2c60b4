"""Helpers that call helpers; the training step is two calls deep; a dict of metrics (PATTERNS 3, 10)."""

import torch

torch.manual_seed(17)
net = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.RMSprop(net.parameters(), lr=0.01)
metrics = {"steps": 0, "loss": []}


def step(x, t):
    loss = torch.nn.functional.mse_loss(net(x), t)
    opt.zero_grad()
    loss.backward()
    opt.step()
    metrics["steps"] += 1
    return loss.item()


def run_epoch(batches):
    return sum(step(x, t) for x, t in batches) / len(batches)


def main():
    batches = [(torch.randn(10, 5), torch.randn(10, 1)) for _ in range(6)]
    for epoch in range(5):
        avg = run_epoch(batches)
        metrics["loss"].append(round(avg, 5))
        print(
            f"epoch {epoch} avg {avg:.5f} steps {metrics['steps']} hist {metrics['loss'][-2:]}"
        )  # @outside: print(f"  w {net[0].weight.norm():.6f}")


main()
