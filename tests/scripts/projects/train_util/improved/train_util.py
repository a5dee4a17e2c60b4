"""The training loop: a step loop in a method, the step in another method (improved-diffusion's
TrainLoop shape), an EMA copy of the model, logging every `log_interval` steps."""

import copy

import torch


class TrainLoop:
    def __init__(self, *, model, data, batch_size, lr, ema_rate, log_interval, total_steps):
        self.model = model
        self.noisy, self.clean = data
        self.batch_size = batch_size
        self.ema_rate = ema_rate
        self.log_interval = log_interval
        self.total_steps = total_steps
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
        self.ema = copy.deepcopy(model).requires_grad_(False)
        self.step = 0
        self.losses = []

    def run_loop(self):
        while self.step < self.total_steps:  # @main-loop
            rows = torch.randint(0, len(self.noisy), (self.batch_size,))
            self.run_step(self.noisy[rows], self.clean[rows])
            if self.step % self.log_interval == 0:
                mean = sum(self.losses[-self.log_interval:]) / len(self.losses[-self.log_interval:])
                print(f"step {self.step} loss {mean:.6f}")  # @outside: print(f"  ema {sum(p.sum().item() for p in self.ema.parameters()):.6f}")
            self.step += 1

    def run_step(self, x, y):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.opt.step()  # @inside: print(f"  grad {sum(p.grad.norm().item() for p in self.model.parameters()):.6f}")
        self._update_ema()
        self.losses.append(loss.item())

    @torch.no_grad()
    def _update_ema(self):
        for target, source in zip(self.ema.parameters(), self.model.parameters()):
            target.mul_(self.ema_rate).add_(source, alpha=1 - self.ema_rate)
