"""A small entry script; the step loop lives in the project's package (PATTERNS 33, minGPT's
shape): `Trainer.run` holds a `while True` loop with callbacks, `self.iter_num` and a `break`."""

import torch
from mypkg.model import TinyLM
from mypkg.trainer import Trainer

torch.manual_seed(3)
tokens = torch.randint(0, 11, (64, 9))
model = TinyLM(vocab=11, width=12)
trainer = Trainer(model, tokens, max_iters=30, batch_size=8, learning_rate=0.02)


def batch_end_callback(trainer):
    if trainer.iter_num % 10 == 0:
        print(f"iter {trainer.iter_num} loss {trainer.loss.item():.5f}")  # @callback: print(f"  lr {trainer.optimizer.param_groups[0]['lr']:.4f} dt {trainer.iter_dt >= 0}")


trainer.set_callback("on_batch_end", batch_end_callback)
trainer.run()
print(f"done after {trainer.iter_num} iterations")  # @outside: print(f"  weight {model.head.weight.sum().item():.6f}")
