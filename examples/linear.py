"""flor's hello world: a linear classifier on the 8x8 digits that ship with scikit-learn.

Record:   python examples/linear.py --flor linear
Replay:   add a print outside the training block, then
          python examples/linear.py --flor linear --replay_flor
"""

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import flor

torch.manual_seed(0)
digits = load_digits()
X = torch.tensor(digits.data, dtype=torch.float32) / 16
y = torch.tensor(digits.target)
train = DataLoader(TensorDataset(X[:1500], y[:1500]), batch_size=2, shuffle=True)
X_test, y_test = X[1500:], y[1500:]

model = torch.nn.Linear(64, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02)

for epoch in flor.it(range(10)):
    train_loss = 0.0
    if flor.SkipBlock.step_into("training"):
        for x, t in train:
            loss = F.cross_entropy(model(x), t)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_loss += loss.item() * len(t)
    model, optimizer, train_loss = flor.SkipBlock.end(model, optimizer, train_loss)

    with torch.no_grad():
        accuracy = (model(X_test).argmax(1) == y_test).float().mean().item()
    print(f"epoch {epoch}: train loss {train_loss / 1500:.4f}, test accuracy {accuracy:.3f}")
