"""A LightningModule trained by ``Trainer.fit``, as people write it, no flor in it (``flor run``
drives Lightning's own loop: each epoch an iteration, its training the block).

    flor run --name pl examples/lightning_style.py
"""

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=1e-2)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)]


class Report(pl.Callback):
    def on_validation_epoch_end(self, trainer, module):
        metrics = trainer.callback_metrics
        print(f"epoch {trainer.current_epoch} val_loss {metrics['val_loss']:.4f}")


torch.manual_seed(0)
x = torch.randn(256, 8)
y = x.sum(1, keepdim=True) + 0.1 * torch.randn(256, 1)
train = DataLoader(TensorDataset(x[:192], y[:192]), batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(x[192:], y[192:]), batch_size=64)
trainer = pl.Trainer(
    max_epochs=4,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    num_sanity_val_steps=0,
    callbacks=[Report()],
)
trainer.fit(Regressor(), train, val)
