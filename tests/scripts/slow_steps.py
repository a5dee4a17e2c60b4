"""Slow iterations, one line each: the test kills the recording mid-run.

``HANG_AT=K`` (a test hook) blocks iteration K after its print, until the process is killed.
"""

import os
import sys
import threading
import time

import torch

import flor

torch.manual_seed(7)
width = int(os.environ.get("WIDTH", "4"))
model = torch.nn.Linear(width, width)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 6
for i in flor.it(range(iterations)):
    if flor.SkipBlock.step_into("work"):
        loss = model(torch.randn(8, width)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(float(os.environ.get("SLOW_STEP", "0")))
    model, opt = flor.SkipBlock.end(model, opt)
    print(f"iter {i} w {model.weight.sum().item():.6f}", flush=True)  # @outside: print(f"  b {model.bias.sum().item():.6f}")
    if i == int(os.environ.get("HANG_AT", "-1")):
        threading.Event().wait()
print("finished")
