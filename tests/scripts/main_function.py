"""Loop inside main(); argparse; a scheduler stepped outside the block; a best-acc tracker."""

import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import flor


def evaluate(model, X, y):
    with torch.no_grad():
        return (model(X).argmax(1) == y).float().mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=7)
    parser.add_argument("--lr", type=float, default=0.2)
    args = parser.parse_args()
    torch.manual_seed(2)
    X = torch.randn(200, 10)
    y = (X[:, 0] * X[:, 1] > 0).long()
    loader = DataLoader(TensorDataset(X, y), batch_size=20, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.Tanh(), torch.nn.Linear(24, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    best_acc = 0.0
    for epoch in flor.it(range(args.epochs)):
        if flor.SkipBlock.step_into("train"):
            for xb, yb in loader:
                optimizer.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                optimizer.step()  # @inside: print(f"  grad {model[2].bias.grad.sum().item():.6f}")
        model, optimizer, best_acc = flor.SkipBlock.end(model, optimizer, best_acc)
        scheduler.step()
        acc = evaluate(model, X, y)
        best_acc = max(best_acc, acc)
        print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.4f} acc {acc:.4f} best {best_acc:.4f}")  # @outside: print(f"  bias {model[2].bias.sum().item():.6f}")
    print(f"final best {best_acc:.4f}")


if __name__ == "__main__":
    main()
