"""Helpers with state of their own: a loss scaler and an EMA of the model."""

import copy

import torch


class NativeScaler:
    """Backward and step in one call, counting the steps (a GradScaler stand-in on CPU)."""

    def __init__(self):
        self.steps = 0

    def __call__(self, loss, optimizer):
        loss.backward()
        optimizer.step()
        self.steps += 1

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


class ModelEma:
    def __init__(self, model, decay):
        self.module = copy.deepcopy(model)
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for ema, p in zip(self.module.parameters(), model.parameters()):
            ema.mul_(self.decay).add_(p, alpha=1 - self.decay)
