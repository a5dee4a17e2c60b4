"""A wrapped environment that caches an attribute the first time it is read (gymnasium's
`_cached_spec` on `env.spec`), so a checkpoint holds an attribute a fresh process lacks (PATTERNS 30)."""

import numpy as np
import torch


class Spec:
    def __init__(self, max_steps, threshold):
        self.max_steps = max_steps
        self.threshold = threshold


class Walk:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.x = 0.0

    def reset(self):
        self.x = float(self.rng.normal())
        return np.array([self.x], dtype=np.float32)

    def step(self, a):
        self.x += (a - 0.5) * 0.4 + float(self.rng.normal(0, 0.1))
        return np.array([self.x], dtype=np.float32), -abs(self.x)


class Wrapper:
    def __init__(self, env):
        self.env = env

    @property
    def spec(self):
        if not hasattr(self, "_cached_spec"):
            self._cached_spec = Spec(8, -0.5)
        return self._cached_spec

    def reset(self):
        return self.env.reset()

    def step(self, a):
        return self.env.step(a)


torch.manual_seed(2)
env = Wrapper(Wrapper(Walk(4)))
net = torch.nn.Linear(1, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
for episode in range(9):
    obs = env.reset()
    logps, total = [], 0.0
    for t in range(8):
        dist = torch.distributions.Categorical(logits=net(torch.from_numpy(obs)))
        a = dist.sample()
        logps.append(dist.log_prob(a))
        obs, r = env.step(a.item())
        total += r
    loss = -torch.stack(logps).sum() * total
    opt.zero_grad()
    loss.backward()
    opt.step()
    solved = total / env.spec.max_steps > env.spec.threshold
    print(f"episode {episode} return {total:.4f} solved {solved}")  # @outside: print(f"  w {net.weight.sum().item():.6f}")
