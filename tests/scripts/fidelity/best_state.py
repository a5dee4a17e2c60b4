"""Early stopping on validation: the best weights are copied outside the block when validation
improves, and loaded after the loop for the final evaluation (PATTERNS 5, 14). A replay that
skips iterations, or a segment that starts mid-run, must find the copy a full run had."""

import copy

import torch
import torch.nn as nn

torch.manual_seed(3)
data, targets = torch.randn(64, 5), torch.randn(64, 1)
held_out, held_targets = torch.randn(32, 5), torch.randn(32, 1)
# Over 1 MB of weights: the copy is state to carry, not a cheap value a checkpoint takes anyway.
model = nn.Sequential(
    nn.Linear(5, 512), nn.Dropout(0.2), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 1)
)
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=1, factor=0.5)
best, best_state, bad_epochs = float("inf"), copy.deepcopy(model.state_dict()), 0
for epoch in range(12):
    model.train()
    for i in range(0, 64, 16):
        loss = nn.functional.mse_loss(model(data[i : i + 16]), targets[i : i + 16])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val = nn.functional.mse_loss(model(held_out), held_targets).item()
    scheduler.step(val)
    if val < best:
        best, best_state, bad_epochs = val, copy.deepcopy(model.state_dict()), 0
    else:
        bad_epochs += 1
    print(f"epoch {epoch} val {val:.6f} lr {optimizer.param_groups[0]['lr']:.5f}")
    if bad_epochs >= 4:
        break
model.load_state_dict(best_state)
with torch.no_grad():
    final = nn.functional.mse_loss(model(held_out), held_targets).item()
print(f"best {best:.6f} final {final:.6f}")  # @outside: print(f"  best bias {model[0].bias.sum().item():.6f}")
