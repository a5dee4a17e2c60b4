"""An epoch-shaped LightningModule trained by ``Trainer.fit``, unmodified (for `flor run`): an
MLP classifier on synthetic data, Adam with a cosine schedule, validation at each epoch's end
and a callback printing it (where benchmarks/bench_frameworks.py adds its hindsight line).

    python lightning_epochs.py [epochs]
"""

import sys
import time

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 16


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=1e-3)
        return [opt], [torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(epochs, 1))]


class Report(pl.Callback):
    def on_validation_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        print(f"epoch {trainer.current_epoch} val_acc {metrics['val_acc']:.4f}")
        # HINDSIGHT


torch.manual_seed(0)
teacher = torch.nn.Linear(64, 10)
X = torch.randn(40960, 64)
y = teacher(X).argmax(1)
train = DataLoader(TensorDataset(X[:38912], y[:38912]), batch_size=64, shuffle=True)
val = DataLoader(TensorDataset(X[38912:], y[38912:]), batch_size=1024)
trainer = pl.Trainer(
    max_epochs=epochs,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    num_sanity_val_steps=0,
    callbacks=[Report()],
)
started = time.perf_counter()  # the loop's own time, on stderr: bench_frameworks.py
trainer.fit(Classifier(), train, val)
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
