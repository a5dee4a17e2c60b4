"""snli style: dev evaluation every few batches inside the block updates best_dev_acc (PATTERNS 5)."""

import torch

torch.manual_seed(14)
X, y = torch.randn(120, 6), torch.randint(0, 3, (120,))
model = torch.nn.Linear(6, 3)
opt = torch.optim.Adam(model.parameters(), lr=0.05)
best_dev_acc, iterations = 0.0, 0
for epoch in range(5):
    for i in range(0, 120, 20):
        loss = torch.nn.functional.cross_entropy(model(X[i : i + 20]), y[i : i + 20])
        opt.zero_grad()
        loss.backward()
        opt.step()
        iterations += 1
        if iterations % 4 == 0:
            with torch.no_grad():
                dev_acc = (model(X[:40]).argmax(1) == y[:40]).float().mean().item()
            best_dev_acc = max(best_dev_acc, dev_acc)
    print(
        f"epoch {epoch} iterations {iterations} best dev {best_dev_acc:.4f}"
    )  # @outside: print(f"  b {model.bias.sum().item():.6f}")
