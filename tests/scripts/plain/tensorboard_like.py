"""yunjey style: a bookkeeping loop comes first in the body; a logger object is a sink (PATTERNS 2)."""

import torch


class Logger:
    def __init__(self):
        self.lines = 0

    def scalar_summary(self, tag, value, step):
        self.lines += 1


torch.manual_seed(19)
model = torch.nn.Linear(3, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
logger = Logger()
X, y = torch.randn(60, 3), torch.randint(0, 2, (60,))
for epoch in range(5):
    info = {"epoch": epoch}
    for tag, value in info.items():
        logger.scalar_summary(tag, value, epoch)
    for i in range(0, 60, 10):
        loss = torch.nn.functional.cross_entropy(model(X[i : i + 10]), y[i : i + 10])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(
        f"epoch {epoch} loss {loss.item():.5f} logged {logger.lines}"
    )  # @outside: print(f"  w {model.weight.sum().item():.6f}")
