"""REINFORCE in the pytorch/examples shape: an episode loop over count(1), a rollout that
appends log-probs and rewards to lists on the policy, finish_episode() that computes returns,
steps the optimizer and clears both lists, and a running reward that ends the loop (PATTERNS 27)."""

from itertools import count

import numpy as np
import torch


class LineWorld:
    """A tiny pure-numpy environment: walk left or right towards a goal."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.pos = 0

    def reset(self):
        self.pos = int(self.rng.integers(-3, 4))
        return np.array([self.pos / 5.0, 1.0], dtype=np.float32)

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        done = abs(self.pos) >= 5
        reward = 1.0 if self.pos > 0 else 0.0
        return np.array([self.pos / 5.0, 1.0], dtype=np.float32), reward, done


class Policy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.affine = torch.nn.Linear(2, 16)
        self.head = torch.nn.Linear(16, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        return torch.softmax(self.head(torch.tanh(self.affine(x))), dim=-1)


torch.manual_seed(3)
env = LineWorld(7)
policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=0.02)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    probs = policy(torch.from_numpy(state).unsqueeze(0))
    m = torch.distributions.Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R, returns = 0.0, []
    for r in policy.rewards[::-1]:
        R = r + 0.9 * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    loss = torch.cat([-lp * R for lp, R in zip(policy.saved_log_probs, returns)]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]


running_reward = 0.0
for i_episode in count(1):
    state, ep_reward = env.reset(), 0.0
    for t in range(1, 30):
        action = select_action(state)
        state, reward, done = env.step(action)
        policy.rewards.append(reward)
        ep_reward += reward
        if done:
            break
    running_reward = 0.1 * ep_reward + 0.9 * running_reward
    finish_episode()
    print(f"episode {i_episode} reward {ep_reward:.1f} running {running_reward:.4f} t {t}")  # @outside: print(f"  bias {policy.head.bias.sum().item():.6f} pos {env.pos}")
    if i_episode >= 16:
        print(f"stopped at episode {i_episode}, last t={t}")
        break
