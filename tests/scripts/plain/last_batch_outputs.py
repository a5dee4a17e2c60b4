"""regression style: the loop index and last-batch loss are read after the block (PATTERNS 14)."""

import torch

torch.manual_seed(15)
W_target = torch.randn(3, 1)
fc = torch.nn.Linear(3, 1)
for epoch in range(4):
    for batch_idx in range(1, 30):
        x = torch.randn(16, 3)
        output = torch.nn.functional.smooth_l1_loss(fc(x), x @ W_target)
        fc.zero_grad()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        if output.item() < 1e-3:
            break
    print(
        f"epoch {epoch}: loss {output.item():.6f} after {batch_idx} batches"
    )  # @outside: print(f"  w {fc.weight.sum().item():.6f}")
