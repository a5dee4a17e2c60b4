"""end() names values the block binds first (`loss`, `x`), positionally, inside a function."""

import torch

import flor


def main():
    torch.manual_seed(10)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    total = 0
    for epoch in flor.it(range(6)):
        if flor.SkipBlock.step_into("training"):
            for i in range(5):
                x = torch.randn(8, 3)
                loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += 1
        model, optimizer, loss, x = flor.SkipBlock.end(model, optimizer, loss, x)
        print(f"epoch {epoch} loss {loss.item():.6f} total {total}")  # @outside: print(f"  x {x.sum().item():.5f} i {i}")


if __name__ == "__main__":
    main()
