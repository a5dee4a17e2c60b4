"""A runner object owns the agent and the replay memory (PATTERNS 33, the RL-runner shape): the
entry loop collects transitions and calls `runner.agent.learn(runner.memory)`, a method of a
class in agents.py that only the runner's `__init__` names."""

import random

import torch
from runner import Runner

random.seed(2)
torch.manual_seed(2)
runner = Runner(obs_size=4, actions=2, capacity=256, seed=2)
for episode in range(6):  # @main-loop
    reward = runner.collect(steps=24)
    loss = runner.agent.learn(runner.memory, batch_size=32)
    print(f"episode {episode} reward {reward:.3f} loss {loss:.6f}")  # @outside: print(f"  epsilon {runner.agent.epsilon:.4f} memory {len(runner.memory)}")
print(f"learned {runner.agent.updates} times")
