"""An epoch loop with an inline batch loop; the hindsight line reads the last batch's loss and
logits, which the recorded script never read after the loop (PATTERNS 28)."""

import torch

torch.manual_seed(21)
data = torch.randn(96, 6)
labels = (data[:, 0] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(data, labels), batch_size=16, shuffle=True
)
history = []
for epoch in range(6):
    model.train()
    for xb, yb in loader:
        logits = model(xb)
        loss = torch.nn.functional.cross_entropy(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        acc = (model(data).argmax(1) == labels).float().mean().item()
    history.append(round(acc, 4))
    print(f"epoch {epoch} acc {acc:.4f}")  # @outside: print(f"  last loss {loss.item():.6f} logits {logits.sum().item():.5f} best {max(history)}")
print("history", history)
