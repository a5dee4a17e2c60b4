"""GAN: two networks, two optimizers, both updated in the inline batch loop (PATTERNS 15)."""

import torch

torch.manual_seed(4)
real = torch.randn(256, 2) * 0.5 + 2
G = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
D = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.LeakyReLU(0.2), torch.nn.Linear(16, 1))
opt_G = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_D = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
bce = torch.nn.BCEWithLogitsLoss()
fixed_z = torch.randn(8, 4)
for epoch in range(5):
    for i in range(0, 256, 32):
        batch = real[i : i + 32]
        z = torch.randn(32, 4)
        opt_D.zero_grad()
        d_loss = bce(D(batch), torch.ones(32, 1)) + bce(D(G(z).detach()), torch.zeros(32, 1))
        d_loss.backward()
        opt_D.step()
        opt_G.zero_grad()
        g_loss = bce(D(G(z)), torch.ones(32, 1))
        g_loss.backward()
        opt_G.step()
    with torch.no_grad():
        sample = G(fixed_z).mean(0)
    print(
        f"epoch {epoch} d {d_loss.item():.5f} g {g_loss.item():.5f} sample {sample[0]:.5f}"
    )  # @outside: print(f"  D norm {D[0].weight.norm():.6f}")
