"""Early stopping: patience counter and best loss updated after the block, break out of the epoch loop (PATTERNS 5, 6)."""

import torch

torch.manual_seed(8)
X, Y = torch.randn(100, 3), torch.randn(100, 1)
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
best, patience, bad = float("inf"), 2, 0
for epoch in range(30):
    for i in range(0, 100, 10):
        loss = torch.nn.functional.mse_loss(model(X[i : i + 10]), Y[i : i + 10])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        val = torch.nn.functional.mse_loss(model(X), Y).item()
    if val < best - 1e-3:
        best, bad = val, 0
    else:
        bad += 1
    print(
        f"epoch {epoch} val {val:.6f} best {best:.6f} bad {bad}"
    )  # @outside: print(f"  w {model.weight.sum().item():.6f}")
    if bad >= patience:
        print("early stop")
        break
