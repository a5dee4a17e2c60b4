"""An accelerate trainer, run under torchrun on CPU: `accelerator.prepare` wraps the model,
optimizer, loader and scheduler; `accelerator.backward`; `accelerator.print` on the main
process. The prepared loader reshuffles by an epoch count it keeps itself, and the prepared
scheduler watches the optimizer inside the wrapper."""

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
x = torch.randn(192, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(192, 1)
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

for epoch in range(4):
    model.train()
    total = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        accelerator.backward(loss)
        optimizer.step()  # @inside: accelerator.print(f"  batch {yb.sum().item():.5f}")
        total += loss.item()
    scheduler.step()
    accelerator.print(f"epoch {epoch} loss {total:.6f}")
    # @outside: accelerator.print(f"  w {accelerator.unwrap_model(model)[0].weight.sum():.6f}")
