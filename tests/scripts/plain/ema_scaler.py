"""EMA of weights and a GradScaler (disabled on CPU, still stateful) (PATTERNS 18)."""

import copy

import torch

torch.manual_seed(7)
model = torch.nn.Linear(4, 2)
ema = copy.deepcopy(model)
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
scaler = torch.amp.GradScaler("cpu", enabled=False)
X, y = torch.randn(128, 4), torch.randint(0, 2, (128,))


def ema_update(ema_model, src, decay=0.9):
    with torch.no_grad():
        for pe, p in zip(ema_model.parameters(), src.parameters()):
            pe.mul_(decay).add_(p, alpha=1 - decay)


for epoch in range(6):
    for i in range(0, 128, 16):
        loss = torch.nn.functional.cross_entropy(model(X[i : i + 16]), y[i : i + 16])
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        ema_update(ema, model)
    with torch.no_grad():
        acc = (ema(X).argmax(1) == y).float().mean().item()
    print(
        f"epoch {epoch} ema acc {acc:.4f} scale {scaler.get_scale()}"
    )  # @outside: print(f"  ema w {ema.weight.sum().item():.6f}")
