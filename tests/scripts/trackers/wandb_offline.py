"""An epoch loop that logs to W&B (offline: WANDB_MODE and WANDB_DIR in the environment),
the loss per epoch at its step."""

import torch
import torch.nn.functional as F
import wandb

torch.manual_seed(0)
X = torch.randn(64, 6)
y = (X[:, 0] > 0).long()
model = torch.nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
run = wandb.init(project="flor-test", config={"lr": 0.1})
for epoch in range(6):
    for i in range(0, 64, 16):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(X[i : i + 16]), y[i : i + 16])
        loss.backward()
        optimizer.step()
    wandb.log({"loss": loss.item()}, step=epoch)
    print(f"epoch {epoch} loss {loss.item():.5f}")
    # @outside: wandb.log({"weight_norm": model.weight.norm().item()}, step=epoch)
run.finish()
