"""A callback-driven trainer: the main loop is `run`'s `while True`."""

import time
from collections import defaultdict

import torch


class Trainer:
    def __init__(self, model, tokens, max_iters, batch_size, learning_rate):
        self.model = model
        self.tokens = tokens
        self.max_iters = max_iters
        self.batch_size = batch_size
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
        self.callbacks = defaultdict(list)
        self.iter_num = 0
        self.iter_time = 0.0
        self.iter_dt = 0.0

    def set_callback(self, onevent, callback):
        self.callbacks[onevent] = [callback]

    def trigger_callbacks(self, onevent):
        for callback in self.callbacks.get(onevent, []):
            callback(self)

    def run(self):
        model = self.model
        model.train()
        self.iter_time = time.time()
        while True:  # @main-loop
            rows = torch.randint(0, len(self.tokens), (self.batch_size,))
            batch = self.tokens[rows]
            x, y = batch[:, :-1], batch[:, 1:]
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()  # @inside: print(f"  grad {model.head.weight.grad.norm().item():.6f}")
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.optimizer.step()
            self.trigger_callbacks("on_batch_end")
            self.iter_num += 1
            now = time.time()
            self.iter_dt = now - self.iter_time
            self.iter_time = now
            if self.iter_num >= self.max_iters:
                break
