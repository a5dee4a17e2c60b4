"""Version 3: a lower learning rate."""

import torch  # @outside: import flor

torch.manual_seed(0)
X = torch.randn(64, 4)
Y = (X.sum(1) > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def evaluate(model):
    with torch.no_grad():
        return (model(X).argmax(1) == Y).float().mean().item()


for epoch in range(4):
    for i in range(0, 64, 16):
        loss = torch.nn.functional.cross_entropy(model(X[i : i + 16]), Y[i : i + 16])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f} acc {evaluate(model):.3f}")  # @outside: flor.log("weight_norm", model[0].weight.norm().item()); print(f"epoch {epoch} weight norm {model[0].weight.norm().item():.6f}")
