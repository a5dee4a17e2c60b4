"""vae style: train(epoch) reads module globals; test() updates `global best_loss` (PATTERNS 3, 19)."""

import torch

torch.manual_seed(9)
model = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Linear(3, 6))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
data = torch.randn(96, 6)
best_loss = float("inf")
seen = 0


def train(epoch):
    global seen
    model.train()
    for i in range(0, 96, 12):
        x = data[i : i + 12]
        loss = torch.nn.functional.mse_loss(model(x), x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen += len(x)
    # @inside: print(f"  train {epoch} last {loss.item():.6f}")


def test(epoch):
    global best_loss
    model.eval()
    with torch.no_grad():
        loss = torch.nn.functional.mse_loss(model(data), data).item()
    best_loss = min(best_loss, loss)
    print(f"epoch {epoch} test {loss:.6f} best {best_loss:.6f} seen {seen}")


if __name__ == "__main__":
    for epoch in range(1, 6):
        train(epoch)
        test(epoch)  # @outside: print(f"  w {model[0].weight.sum().item():.6f}")
