"""The training step and evaluation, called from main.py."""

import torch

steps_done = 0  # a module global the training step advances: state of engine.py
seen_losses = []  # and one it mutates


def progress():
    return f"{steps_done} steps, last loss {seen_losses[-1]:.6f}"


def train_one_epoch(model, criterion, loader, optimizer, lr_scheduler, epoch, loss_scaler, model_ema):
    global steps_done
    model.train()
    total, batches = 0.0, 0
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss_scaler(loss, optimizer)
        lr_scheduler.step()
        model_ema.update(model)
        total += loss.item()  # @inside: print(f"  grad {sum(p.grad.norm().item() for p in model.parameters()):.6f}")
        batches += 1
        steps_done += 1
    seen_losses.append(total / batches)
    return {"loss": total / batches, "epoch": epoch}


@torch.no_grad()
def evaluate(loader, model):
    model.eval()
    right = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    return {"acc": right / len(loader.dataset)}
