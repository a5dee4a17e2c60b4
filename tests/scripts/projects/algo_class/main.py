"""The entry script's loop collects a rollout and calls `agent.update(rollouts)` of an algorithm
class in a sibling package (PATTERNS 33, the PPO/A2C shape); the rollout storage in storage.py."""

import numpy as np
import torch
from algo import PPO
from envs import LineWorld
from storage import RolloutStorage

torch.manual_seed(5)
env = LineWorld(seed=5)
actor = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
agent = PPO(actor, lr=0.01, epochs=2)
rollouts = RolloutStorage(steps=16)
obs = env.reset()
episode_return, returns = 0.0, []
for update in range(8):  # @main-loop
    for step in range(16):
        with torch.no_grad():
            probs = torch.softmax(actor(torch.as_tensor(obs, dtype=torch.float32)), -1)
        action = int(torch.multinomial(probs, 1))
        next_obs, reward, done = env.step(action)
        rollouts.insert(obs, action, reward, probs[action].item())
        episode_return += reward
        obs = next_obs
        if done:
            returns.append(episode_return)
            episode_return, obs = 0.0, env.reset()
    loss = agent.update(rollouts)
    rollouts.after_update()
    mean = np.mean(returns[-5:]) if returns else 0.0
    print(f"update {update} loss {loss:.5f} episodes {len(returns)} mean {mean:.3f}")  # @outside: print(f"  position {env.position:.3f} updates {agent.updates}")
