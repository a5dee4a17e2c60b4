"""pytorch/examples mnist style: train(args, model, loader, optimizer, epoch) + test() + scheduler (PATTERNS 3, 12, 24)."""

import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 20)
        self.fc2 = torch.nn.Linear(20, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(args, model, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"  train epoch {epoch} batch {batch_idx} loss {loss.item():.5f}")
        # @inside: print(f"  grad norm {model.fc1.weight.grad.norm():.5f}")


def test(model, X, y):
    model.eval()
    with torch.no_grad():
        return (model(X).argmax(1) == y).float().mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--log-interval", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(1)
    X = torch.randn(160, 10)
    y = (X[:, :3].argmax(1)).long()
    loader = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, args.epochs + 1):
        train(args, model, loader, optimizer, epoch)
        acc = test(model, X, y)
        scheduler.step()
        print(
            f"epoch {epoch} acc {acc:.4f} lr {scheduler.get_last_lr()[0]:.5f}"
        )  # @outside: print(f"  fc2 {model.fc2.weight.sum().item():.6f}")


if __name__ == "__main__":
    main()
