"""A numpy environment: walk a line towards a target."""

import numpy as np


class LineWorld:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.position, self.target, self.t = 0.0, 0.0, 0

    def reset(self):
        self.position, self.target, self.t = 0.0, float(self.rng.uniform(-1, 1)), 0
        return np.array([self.position, self.target])

    def step(self, action):
        self.position += (action - 1) * 0.1 + float(self.rng.normal(0, 0.01))
        self.t += 1
        reward = -abs(self.position - self.target)
        done = self.t >= 10
        return np.array([self.position, self.target]), reward, done
