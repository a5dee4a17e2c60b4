import torch


def train_epoch(model, optimizer, batches, step):
    total = 0.0
    for x, y in batches:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # @inside: print(f"  grad {model[0].weight.grad.norm().item():.6f}")
        total += loss.item()
        step += 1
    return total / len(batches), step
