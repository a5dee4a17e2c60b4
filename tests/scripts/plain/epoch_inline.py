"""Epoch loop with the batch loop inline (PATTERNS 2), shuffled loader, dropout."""

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
X = torch.randn(240, 12)
y = (X[:, 0] > 0).long()
loader = DataLoader(TensorDataset(X, y), batch_size=24, shuffle=True)
model = torch.nn.Sequential(
    torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 2)
)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
print("start")
for epoch in range(6):
    model.train()
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.item()
        # @inside: print(f"    batch loss {loss.item():.5f}")
    model.eval()
    with torch.no_grad():
        acc = (model(X).argmax(1) == y).float().mean().item()
    print(
        f"epoch {epoch} loss {total:.5f} acc {acc:.4f}"
    )  # @outside: print(f"  grad {model[0].weight.grad.norm():.6f}")
