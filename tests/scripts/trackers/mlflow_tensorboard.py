"""An epoch loop that logs the way people log: to MLflow (the store MLFLOW_TRACKING_URI
names) and to TensorBoard (SummaryWriter's default directory, named for the time and host),
the loss per epoch and a parameter."""

import mlflow
import torch
import torch.nn.functional as F
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)
X = torch.randn(64, 6)
y = (X[:, 0] > 0).long()
model = torch.nn.Linear(6, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
writer = SummaryWriter()
with mlflow.start_run(run_name="train"):
    mlflow.log_param("lr", 0.1)
    for epoch in range(6):
        for i in range(0, 64, 16):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(X[i : i + 16]), y[i : i + 16])
            loss.backward()
            optimizer.step()
        mlflow.log_metric("loss", loss.item(), step=epoch)
        writer.add_scalar("loss", loss.item(), epoch)
        print(f"epoch {epoch} loss {loss.item():.5f}")
        # @outside: w = model.weight.norm().item(); mlflow.log_metric("weight_norm", w, step=epoch); writer.add_scalar("weight_norm", w, epoch)
writer.close()
