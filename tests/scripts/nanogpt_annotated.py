"""nanoGPT shape annotated as the original FLOR README teaches: the counters (iter_num,
best_val_loss) are updated outside the block and not listed in end() (PATTERNS 29)."""

import itertools

import torch

import flor

torch.manual_seed(8)
data = torch.randn(400, 4)
model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)


def get_batch():
    ix = torch.randint(len(data) - 1, (8,))
    return data[ix], data[ix + 1]


X, Y = get_batch()
iter_num = 0
best_val_loss = 1e9
for _ in flor.it(itertools.count()):
    if iter_num % 4 == 0:
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(data[:64]), data[1:65]).item()
        best_val_loss = min(best_val_loss, val)
        print(f"step {iter_num}: val {val:.5f} best {best_val_loss:.5f}")
    if flor.SkipBlock.step_into("training"):
        for micro_step in range(2):
            loss = torch.nn.functional.mse_loss(model(X), Y) / 2
            X, Y = get_batch()
            loss.backward()
        # @inside: print(f"  inside {iter_num}: loss {loss.item():.6f}")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    model, optimizer, X, Y = flor.SkipBlock.end(model, optimizer, X, Y)
    iter_num += 1
    print(f"iter {iter_num}")  # @outside: print(f"  w {model[0].weight.sum().item():.6f} best {best_val_loss:.5f}")
    if iter_num >= 18:
        break
print("done", iter_num, f"{best_val_loss:.5f}")
