import torch


class RolloutStorage:
    def __init__(self, steps):
        self.steps = steps
        self.obs, self.actions, self.rewards, self.probs = [], [], [], []

    def insert(self, obs, action, reward, prob):
        self.obs.append([float(v) for v in obs])
        self.actions.append(action)
        self.rewards.append(reward)
        self.probs.append(prob)

    def batch(self):
        rewards = torch.tensor(self.rewards)
        advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-6)
        return torch.tensor(self.obs), torch.tensor(self.actions), advantages, torch.tensor(self.probs)

    def after_update(self):
        self.obs, self.actions, self.rewards, self.probs = [], [], [], []
