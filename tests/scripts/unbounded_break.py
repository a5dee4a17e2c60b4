"""An unbounded loop (itertools.count) that ends with a data-dependent break."""

import itertools

import torch

import flor

torch.manual_seed(5)
policy = torch.nn.Linear(4, 2)
opt = torch.optim.Adam(policy.parameters(), lr=0.02)
running_reward = 0.0
for episode in flor.it(itertools.count(1)):
    if flor.SkipBlock.step_into("episode"):
        states = torch.randn(20, 4)
        logp = torch.log_softmax(policy(states), 1)
        actions = torch.multinomial(logp.exp(), 1).squeeze(1)
        rewards = (actions == (states[:, 0] > 0).long()).float()
        loss = -(logp[torch.arange(20), actions] * (rewards - rewards.mean())).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()  # @inside: print(f"  loss {loss.item():.5f}")
        ep_reward = rewards.sum().item()
        running_reward = 0.05 * ep_reward + 0.95 * running_reward
    policy, opt, running_reward, ep_reward = flor.SkipBlock.end(
        policy, opt, running_reward, locals().get("ep_reward", flor.UNBOUND)
    )
    print(f"episode {episode} reward {ep_reward:.1f} running {running_reward:.4f}")  # @outside: print(f"  w {policy.weight.sum().item():.6f}")
    if running_reward > 6.0:
        print(f"solved after {episode} episodes")
        break
