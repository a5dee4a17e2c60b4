"""word LM style: manual SGD unless --use-optimizer; the optimizer exists only sometimes (PATTERNS 8, 20)."""

import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--use-optimizer", action="store_true")
args = parser.parse_args()
torch.manual_seed(10)
model = torch.nn.Linear(4, 4)
if args.use_optimizer:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
X = torch.randn(64, 4)
for epoch in range(5):
    total = 0.0
    for i in range(0, 64, 8):
        model.zero_grad()
        loss = ((model(X[i : i + 8]) - X[i : i + 8]) ** 2).mean()
        loss.backward()
        if args.use_optimizer:
            optimizer.step()
        else:
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.05)
        total += loss.item()
    print(
        f"epoch {epoch} total {total:.6f}"
    )  # @outside: print(f"  w {model.weight.sum().item():.6f}")
