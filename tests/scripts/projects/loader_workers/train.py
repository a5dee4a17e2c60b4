"""A loader with worker processes over a dataset class of the project's package, whose trainer
module flor rewrites as it is imported (PATTERNS 33 with `DataLoader(num_workers=2)`): the
workers, forked, use the rewritten module's class."""

import torch
from shapes.trainer import Shapes, Trainer

torch.manual_seed(8)
loader = torch.utils.data.DataLoader(Shapes(96, seed=8), batch_size=16, shuffle=True, num_workers=2)
trainer = Trainer(torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)))
trainer.fit(loader, epochs=4)
print(f"{trainer.seen} samples seen")
