"""A small Q-learning agent: the training step is `learn`."""

import random

import torch


class QAgent:
    def __init__(self, obs_size, actions):
        self.q = torch.nn.Sequential(torch.nn.Linear(obs_size, 16), torch.nn.ReLU(), torch.nn.Linear(16, actions))
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=5e-3)
        self.epsilon = 1.0
        self.updates = 0

    def act(self, obs):
        if random.random() < self.epsilon:
            return random.randrange(2)
        with torch.no_grad():
            return int(self.q(obs).argmax())

    def learn(self, memory, batch_size):
        batch = random.sample(memory, min(batch_size, len(memory)))
        obs = torch.stack([b[0] for b in batch])
        actions = torch.tensor([b[1] for b in batch])
        rewards = torch.tensor([b[2] for b in batch])
        following = torch.stack([b[3] for b in batch])
        with torch.no_grad():
            target = rewards + 0.9 * self.q(following).max(1).values
        chosen = self.q(obs).gather(1, actions[:, None]).squeeze(1)
        loss = torch.nn.functional.smooth_l1_loss(chosen, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()  # @inside: print(f"  grad {self.q[0].weight.grad.norm().item():.6f}")
        self.epsilon = max(0.05, self.epsilon * 0.8)
        self.updates += 1
        return loss.item()
