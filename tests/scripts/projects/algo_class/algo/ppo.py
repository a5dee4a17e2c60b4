"""A clipped policy-gradient update over a rollout."""

import torch


class PPO:
    def __init__(self, actor, lr, epochs):
        self.actor = actor
        self.optimizer = torch.optim.Adam(actor.parameters(), lr=lr)
        self.epochs = epochs
        self.updates = 0

    def update(self, rollouts):
        obs, actions, advantages, old = rollouts.batch()
        for _ in range(self.epochs):
            probs = torch.softmax(self.actor(obs), -1).gather(1, actions[:, None]).squeeze(1)
            ratio = probs / old
            loss = -torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages).mean()
            self.optimizer.zero_grad()
            loss.backward()  # @inside: print(f"  ratio {ratio.mean().item():.5f}")
            self.optimizer.step()
        self.updates += 1
        return loss.item()
