"""time-sequence style: LBFGS with a closure defined in the block (PATTERNS 21)."""

import torch

torch.manual_seed(11)
x = torch.linspace(-1, 1, 50).unsqueeze(1)
y = torch.sin(3 * x)
model = torch.nn.Sequential(torch.nn.Linear(1, 10), torch.nn.Tanh(), torch.nn.Linear(10, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
for step in range(5):

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        print(
            f"step {step} loss {torch.nn.functional.mse_loss(model(x), y).item():.6f}"
        )  # @outside: print(f"  b {model[2].bias.item():.6f}")
