"""Fine-tuning with a frozen backbone: only the small head trains.

The backbone's weights are the same in every checkpoint, which is what
content-addressed deduplication is for: flor stores them once.
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--width", type=int, default=256)
    args = parser.parse_args()

    torch.manual_seed(0)
    backbone = nn.Sequential(
        nn.Linear(64, args.width), nn.ReLU(), nn.Linear(args.width, args.width), nn.ReLU()
    )
    for param in backbone.parameters():
        param.requires_grad_(False)
    head = nn.Linear(args.width, 10)
    model = nn.Sequential(backbone, head)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.05, momentum=0.9)
    inputs, labels = torch.randn(512, 64), torch.randint(0, 10, (512,))

    for epoch in range(args.epochs):
        for i in range(0, len(inputs), 64):
            loss = nn.functional.cross_entropy(model(inputs[i : i + 64]), labels[i : i + 64])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        # @outside: print(f"head norm {head.weight.norm():.4f}")
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
