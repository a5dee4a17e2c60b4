"""The trainer comes from a factory (PATTERNS 33, config-built trainers): `build_trainer(cfg)`
in build.py returns a `Trainer` of trainer.py, whose `train` holds the step loop."""

import torch
from build import build_trainer

torch.manual_seed(12)
trainer = build_trainer({"width": 12, "lr": 0.03, "steps": 30, "log_every": 10})
trainer.train()
print(f"final loss {trainer.last_loss:.6f}")
