"""A Lightning-like split (PATTERNS 33): the model class in models/ computes its own loss in
`training_step` and builds its optimizer; the `Fitter` in trainer/ owns the epoch loop and the
backward pass. The entry script only wires them together."""

import torch
from models.net import Classifier
from trainer.fit import Fitter

torch.manual_seed(9)
points = torch.randn(120, 2)
classes = ((points[:, 0] * points[:, 1]) > 0).long()
batches = [(points[i : i + 24], classes[i : i + 24]) for i in range(0, 120, 24)]
model = Classifier(hidden=16)
fitter = Fitter(max_epochs=5)
fitter.fit(model, batches)
print(f"trained {fitter.global_step} steps, final accuracy {model.accuracy(points, classes):.4f}")
