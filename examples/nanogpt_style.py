"""nanoGPT style: while True, prefetched batch, gradient accumulation, lr schedule, break on iter_num (PATTERNS 6, 7, 17)."""

import math

import torch

torch.manual_seed(3)
data = torch.randn(2000, 8)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
max_iters, accum = 12, 3


def get_batch():
    ix = torch.randint(len(data) - 1, (16,))
    return data[ix], data[ix + 1]


def get_lr(it):
    return 1e-3 * 0.5 * (1 + math.cos(math.pi * it / max_iters))


X, Y = get_batch()
iter_num = 0
while True:
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group["lr"] = lr
    if iter_num % 4 == 0:
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(data[:100]), data[1:101]).item()
        print(f"iter {iter_num} val {val:.5f}")
    for micro_step in range(accum):
        loss = torch.nn.functional.mse_loss(model(X), Y) / accum
        X, Y = get_batch()
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {iter_num} loss {loss.item() * accum:.5f}")
    iter_num += 1
    if iter_num > max_iters:
        break
print("done", iter_num)
