"""The runner: an environment, an agent and its memory."""

import random

import torch
from agents import QAgent


class Chain:
    """A toy environment: move left or right on a line, rewarded near the middle."""

    def __init__(self, obs_size, seed):
        self.obs_size = obs_size
        self.rng = random.Random(seed)
        self.position = 0.0

    def observe(self):
        return torch.tensor([self.position * (i + 1) for i in range(self.obs_size)])

    def step(self, action):
        self.position += (0.1 if action else -0.1) + self.rng.uniform(-0.02, 0.02)
        return 1.0 - abs(self.position)


class Runner:
    def __init__(self, obs_size, actions, capacity, seed):
        self.env = Chain(obs_size, seed)
        self.agent = QAgent(obs_size, actions)
        self.memory = []
        self.capacity = capacity

    def collect(self, steps):
        total = 0.0
        for _ in range(steps):
            obs = self.env.observe()
            action = self.agent.act(obs)
            reward = self.env.step(action)
            self.memory.append((obs, action, reward, self.env.observe()))
            del self.memory[: max(0, len(self.memory) - self.capacity)]
            total += reward
        return total / steps
