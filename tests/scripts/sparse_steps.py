"""A step loop in the nanoGPT shape, hand-annotated: a counter advanced outside the block, an
eval branch every `eval_every` steps at the top of the body, a log branch after the counter
moved, and a break (PATTERNS 6, 32). Hindsight lines go beside the periodic branches."""

import itertools
import os
import sys

import torch

import flor

max_iters = int(sys.argv[1]) if len(sys.argv) > 1 else 40
eval_every, log_every = 10, 7
torch.manual_seed(5)
data = torch.randn(300, 4)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
label = os.environ.get("RUN_LABEL", "-")  # differs between processes, like a timer
iter_num = 0
for _ in flor.it(itertools.count()):
    if iter_num % eval_every == 0:
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(data[:50]), data[50:100]).item()
        print(f"eval {iter_num}: {val:.5f}")
    if flor.SkipBlock.step_into("train"):
        ix = torch.randint(0, 300, (16,))
        loss = torch.nn.functional.mse_loss(model(data[ix]), data[(ix + 1) % 300])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model, optimizer, loss = flor.SkipBlock.end(model, optimizer, loss)
    iter_num += 1
    if iter_num % log_every == 0:
        print(f"log {iter_num}: loss {loss.item():.5f}")
    if iter_num >= max_iters:
        break
print("done", iter_num)
