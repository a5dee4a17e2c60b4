"""A DQN-style step loop: one environment step per iteration, a replay buffer filled outside
the update, an update every 4 steps, a target network synced by load_state_dict, epsilon-greedy
with Python's random, and a log branch every 50 steps (PATTERNS 7, 10, 32)."""

import random

import numpy as np
import torch


class Buffer:
    def __init__(self, size):
        self.obs = np.zeros((size, 2), dtype=np.float32)
        self.actions = np.zeros(size, dtype=np.int64)
        self.rewards = np.zeros(size, dtype=np.float32)
        self.next_obs = np.zeros((size, 2), dtype=np.float32)
        self.pos, self.full = 0, False

    def add(self, o, a, r, o2):
        self.obs[self.pos], self.actions[self.pos] = o, a
        self.rewards[self.pos], self.next_obs[self.pos] = r, o2
        self.pos = (self.pos + 1) % len(self.obs)
        self.full = self.full or self.pos == 0

    def sample(self, n):
        idx = np.random.randint(0, len(self.obs) if self.full else self.pos, size=n)
        return (
            torch.from_numpy(self.obs[idx]),
            torch.from_numpy(self.actions[idx]),
            torch.from_numpy(self.rewards[idx]),
            torch.from_numpy(self.next_obs[idx]),
        )


class Chain:
    def __init__(self):
        self.s = 0

    def observe(self):
        return np.array([self.s / 4.0, 1.0], dtype=np.float32)

    def step(self, a):
        self.s = max(0, min(4, self.s + (1 if a else -1)))
        return self.observe(), float(self.s == 4)


random.seed(1)
np.random.seed(1)
torch.manual_seed(1)
env = Chain()
q = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
target = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
target.load_state_dict(q.state_dict())
optimizer = torch.optim.Adam(q.parameters(), lr=0.01)
rb = Buffer(100)
obs = env.observe()
for global_step in range(160):
    epsilon = max(0.05, 1.0 - global_step / 80)
    if random.random() < epsilon:
        action = random.randint(0, 1)
    else:
        action = int(q(torch.from_numpy(obs)).argmax().item())
    next_obs, reward = env.step(action)
    rb.add(obs, action, reward, next_obs)
    obs = next_obs
    if global_step > 32 and global_step % 4 == 0:
        o, a, r, o2 = rb.sample(16)
        with torch.no_grad():
            td = r + 0.9 * target(o2).max(1).values
        qa = q(o).gather(1, a.unsqueeze(1)).squeeze(1)
        loss = torch.nn.functional.mse_loss(qa, td)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if global_step % 24 == 0:
            target.load_state_dict(q.state_dict())
    if global_step % 20 == 0:
        print(f"step {global_step} eps {epsilon:.3f} s {env.s}")  # @outside: print(f"  loss {loss.item() if global_step > 36 else 0:.6f} q {q[0].bias.sum().item():.6f}")
