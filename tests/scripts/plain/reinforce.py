"""REINFORCE: itertools.count episodes, a rollout loop, finish_episode() using module globals, running reward and break (PATTERNS 6, 7, 16, 19)."""

from itertools import count

import torch

torch.manual_seed(5)
policy = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=0.03)
saved_log_probs = []
rewards = []


def select_action(state):
    probs = torch.softmax(policy(state), -1)
    action = torch.multinomial(probs, 1).item()
    saved_log_probs.append(torch.log(probs[action]))
    return action


def finish_episode():
    returns = torch.tensor(rewards)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    loss = torch.stack([-lp * r for lp, r in zip(saved_log_probs, returns)]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del rewards[:]
    del saved_log_probs[:]


running_reward = 0.0
for i_episode in count(1):
    state, ep_reward = torch.randn(3), 0.0
    for t in range(1, 20):
        action = select_action(state)
        reward = 1.0 if action == int(state[0] > 0) else 0.0
        rewards.append(reward)
        ep_reward += reward
        state = torch.randn(3)
    running_reward = 0.1 * ep_reward + 0.9 * running_reward
    finish_episode()
    print(
        f"episode {i_episode} last {ep_reward:.1f} running {running_reward:.4f}"
    )  # @outside: print(f"  p {policy[0].bias.sum().item():.6f}")
    if running_reward > 11 or i_episode >= 25:
        print(f"stopped after {i_episode} episodes, t={t}")
        break
