"""A step loop whose block updates the model only every third step (DQN's shape, PATTERNS 32),
of a model large enough (4 MB) that restoring it takes longer than a step that does not
update: such a step does a moment's work (one backward pass of a scalar, so that it is
counted). Updates sleep, to take longer than any restore, and count ten backward passes
(nine of a scalar besides their own): a re-run update counts apart from a re-run step."""

import sys
import time

import torch

import flor

torch.manual_seed(3)
model = torch.nn.Linear(1024, 1024)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for i in flor.it(range(int(sys.argv[1]) if len(sys.argv) > 1 else 9)):
    if flor.SkipBlock.step_into("update"):
        if i % 3 == 0:
            loss = model(torch.randn(4, 1024)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for _ in range(9):
                torch.ones(1, requires_grad=True).sum().backward()
            time.sleep(0.05)
        else:
            torch.ones(1, requires_grad=True).sum().backward()
    model, opt = flor.SkipBlock.end(model, opt)
    print(f"iter {i} w {model.weight.sum().item():.5f}")  # @outside: print(f"  b {model.bias.sum().item():.6f}")
