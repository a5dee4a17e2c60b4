"""A LightningModule trained by ``Trainer.fit``, unmodified: metrics logged per step and per
epoch, a list the module keeps over an epoch, Adam with a StepLR, gradients accumulated over 2
batches, clipped, ``max_steps`` ending training inside the last epoch, a user callback with
its own counters, ModelCheckpoint and a CSV logger writing files. Hindsight goes in a
callback's validation hook and the module's epoch end (outside the training) or in
``training_step`` (inside)."""

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(pl.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.item())
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss  # @inside: print(f"  batch {batch_idx} loss {loss.item():.6f}")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.net(x), y))

    def on_train_epoch_end(self):
        mean = sum(self.losses) / len(self.losses)
        print(f"epoch {self.current_epoch}: {len(self.losses)} batches, mean loss {mean:.6f}")
        self.losses.clear()  # @outside: print(f"  epoch-mean train_loss {self.trainer.callback_metrics['train_loss_epoch']:.6f} lr {self.lr_schedulers().get_last_lr()[0]}")

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)]


class Watcher(pl.Callback):
    def __init__(self) -> None:
        self.batches = 0
        self.worst = 0.0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.batches += 1
        self.worst = max(self.worst, outputs["loss"].item())

    def on_validation_epoch_end(self, trainer, module):
        val = trainer.callback_metrics["val_loss"]
        print(f"  validation at step {trainer.global_step}: {val:.6f} after {self.batches} batches")  # @outside: print(f"  worst {self.worst:.6f} weight norm {module.net[0].weight.norm():.6f}")


torch.manual_seed(0)
x = torch.randn(256, 8)
y = x.sum(1, keepdim=True) + 0.1 * torch.randn(256, 1)
train = DataLoader(TensorDataset(x[:192], y[:192]), batch_size=16, shuffle=True)
val = DataLoader(TensorDataset(x[192:], y[192:]), batch_size=32)
trainer = pl.Trainer(
    max_epochs=5,
    max_steps=21,  # 6 optimizer steps an epoch: training stops inside the fourth
    accumulate_grad_batches=2,
    gradient_clip_val=1.0,
    logger=CSVLogger("logs"),
    callbacks=[Watcher(), ModelCheckpoint(dirpath="ckpts", monitor="val_loss")],
    enable_progress_bar=False,
    enable_model_summary=False,
    num_sanity_val_steps=0,
    log_every_n_steps=4,
)
trainer.fit(Regressor(lr=0.01), train, val)
print("done at step", trainer.global_step, "best", trainer.checkpoint_callback.best_model_score)
