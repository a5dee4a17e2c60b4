"""A DQN-shaped step loop, unmodified (for `flor run`): one environment step per iteration,
epsilon-greedy with Python's random, a replay buffer filled outside the update, an update every
train_frequency steps, a target network synced every target_interval, and a log branch every 100
steps. A small point-mass environment in numpy.

    python dqn_loop.py [total_timesteps]
"""

import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

total_timesteps = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
learning_starts, train_frequency, target_interval = 500, 4, 500
batch_size, gamma, hidden = 128, 0.99, 256


class PointMass:
    """Push a mass toward the origin; an episode ends after 200 steps or when it escapes."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self):
        self.state = self.rng.uniform(-1, 1, size=4).astype(np.float32)
        self.t = 0
        return self.state.copy()

    def step(self, action):
        x, v = self.state[:2], self.state[2:]
        force = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]][action], dtype=np.float32)
        v = 0.9 * v + 0.1 * force
        x = x + 0.1 * v
        self.state = np.concatenate([x, v]).astype(np.float32)
        self.t += 1
        reward = float(-np.linalg.norm(x))
        done = self.t >= 200 or bool(np.abs(x).max() > 3)
        return self.state.copy(), reward, done


class ReplayBuffer:
    def __init__(self, size):
        self.obs = np.zeros((size, 4), dtype=np.float32)
        self.next_obs = np.zeros((size, 4), dtype=np.float32)
        self.actions = np.zeros(size, dtype=np.int64)
        self.rewards = np.zeros(size, dtype=np.float32)
        self.dones = np.zeros(size, dtype=np.float32)
        self.pos, self.full = 0, False

    def add(self, o, a, r, o2, d):
        i = self.pos
        self.obs[i], self.actions[i], self.rewards[i], self.next_obs[i], self.dones[i] = (
            o,
            a,
            r,
            o2,
            d,
        )
        self.pos = (i + 1) % len(self.obs)
        self.full = self.full or self.pos == 0

    def sample(self, n):
        idx = np.random.randint(0, len(self.obs) if self.full else self.pos, size=n)
        return tuple(
            torch.from_numpy(a[idx])
            for a in (self.obs, self.actions, self.rewards, self.next_obs, self.dones)
        )


def q_network():
    return nn.Sequential(
        nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 4)
    )


random.seed(7)
np.random.seed(7)
torch.manual_seed(7)
env = PointMass(7)
q_net, target_net = q_network(), q_network()
target_net.load_state_dict(q_net.state_dict())
optimizer = torch.optim.Adam(q_net.parameters(), lr=2.5e-4)
rb = ReplayBuffer(total_timesteps)
obs = env.reset()
episode_return, returns = 0.0, []
started = time.perf_counter()  # the loop's own time, on stderr: benchmarks/bench_overhead.py
for global_step in range(total_timesteps):
    epsilon = max(0.05, 1.0 - global_step / (0.5 * total_timesteps))
    if random.random() < epsilon:
        action = random.randrange(4)
    else:
        with torch.no_grad():
            action = int(q_net(torch.from_numpy(obs)).argmax())
    next_obs, reward, done = env.step(action)
    rb.add(obs, action, reward, next_obs, float(done))
    episode_return += reward
    obs = next_obs
    if done:
        returns.append(episode_return)
        episode_return, obs = 0.0, env.reset()
    if global_step > learning_starts and global_step % train_frequency == 0:
        o, a, r, o2, d = rb.sample(batch_size)
        with torch.no_grad():
            td_target = r + gamma * target_net(o2).max(1).values * (1 - d)
        q_value = q_net(o).gather(1, a.unsqueeze(1)).squeeze(1)
        loss = F.mse_loss(q_value, td_target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if global_step % target_interval == 0:
            target_net.load_state_dict(q_net.state_dict())
    # HINDSIGHT-EVERY
    if global_step % 100 == 0:
        recent = np.mean(returns[-10:]) if returns else 0.0
        print(
            f"step {global_step} epsilon {epsilon:.3f} episodes {len(returns)} return {recent:.3f}"
        )
        # HINDSIGHT-SPARSE
print(f"done: {len(returns)} episodes")
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
