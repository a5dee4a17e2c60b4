"""The epoch loop in the entry script, the batch loop in engine.py (PATTERNS 33, DeiT's shape):
AdamW, a scheduler stepped per batch inside train_one_epoch, an EMA model, a loss scaler."""

import argparse

import torch
import utils
from engine import evaluate, progress, train_one_epoch

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(7)
features = torch.randn(96, 8)
labels = (features[:, :3].sum(1) > 0).long()
dataset = torch.utils.data.TensorDataset(features, labels)
loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
model_ema = utils.ModelEma(model, decay=0.8)
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.7)
loss_scaler = utils.NativeScaler()

max_accuracy = 0.0
for epoch in range(args.epochs):  # @main-loop
    train_stats = train_one_epoch(
        model, criterion, loader, optimizer, lr_scheduler, epoch, loss_scaler, model_ema
    )
    test_stats = evaluate(loader, model_ema.module)
    max_accuracy = max(max_accuracy, test_stats["acc"])
    print(f"epoch {epoch} loss {train_stats['loss']:.6f} acc {test_stats['acc']:.4f}")  # @outside: print(f"  lr {optimizer.param_groups[0]['lr']:.6f} steps {loss_scaler.steps} ema {sum(p.sum().item() for p in model_ema.module.parameters()):.6f}")
print(f"max accuracy {max_accuracy:.4f} after {progress()}")
