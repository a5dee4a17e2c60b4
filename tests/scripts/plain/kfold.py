"""k-fold: the fold loop contains the epochs; the model is rebuilt per fold (PATTERNS 23)."""

import torch

torch.manual_seed(16)
X, y = torch.randn(90, 4), torch.randint(0, 2, (90,))
scores = []
for fold in range(3):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    train_idx = [i for i in range(90) if i % 3 != fold]
    for epoch in range(4):
        loss = torch.nn.functional.cross_entropy(model(X[train_idx]), y[train_idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(X[fold::3]).argmax(1) == y[fold::3]).float().mean().item()
    scores.append(acc)
    print(
        f"fold {fold} acc {acc:.4f} mean {sum(scores) / len(scores):.4f}"
    )  # @outside: print(f"  w {model.weight.sum().item():.6f}")
