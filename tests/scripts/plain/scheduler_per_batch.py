"""OneCycleLR stepped per batch inside the block; loss history list (PATTERNS 10, 12)."""

import torch

torch.manual_seed(6)
X, Y = torch.randn(200, 5), torch.randn(200, 1)
model = torch.nn.Linear(5, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
epochs, steps = 5, 10
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.2, total_steps=epochs * steps)
history = []
for epoch in range(epochs):
    for s in range(steps):
        idx = torch.randint(0, 200, (20,))
        loss = torch.nn.functional.mse_loss(model(X[idx]), Y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    history.append(round(loss.item(), 5))
    print(
        f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.5f} history {history}"
    )  # @outside: print(f"  b {model.bias.item():.6f}")
