"""transfer-learning style: the same train_model() called twice, so two flor.it loops run (PATTERNS 23)."""

import torch


def train_model(model, optimizer, epochs, tag):
    for epoch in range(epochs):
        x = torch.randn(32, 4)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(
            f"{tag} epoch {epoch} loss {loss.item():.5f}"
        )  # @outside: print(f"  {tag} w {model.weight.sum().item():.6f}")
    return model


torch.manual_seed(13)
net = torch.nn.Linear(4, 1)
train_model(net, torch.optim.SGD(net.parameters(), lr=0.05), 3, "finetune")
head = torch.nn.Linear(4, 1)
train_model(head, torch.optim.SGD(head.parameters(), lr=0.05), 3, "head")
