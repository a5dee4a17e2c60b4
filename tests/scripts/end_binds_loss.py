"""end() names a value the block binds first (`loss`), positionally, as users write it; at
module level (PATTERNS 14)."""

import torch

import flor

torch.manual_seed(9)
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in flor.it(range(6)):
    if flor.SkipBlock.step_into("training"):
        for i in range(5):
            x = torch.randn(8, 3)
            loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model, optimizer, loss = flor.SkipBlock.end(model, optimizer, loss)
    print(f"epoch {epoch} loss {loss.item():.6f}")  # @outside: print(f"  w {model.weight.sum().item():.6f} i {i}")
