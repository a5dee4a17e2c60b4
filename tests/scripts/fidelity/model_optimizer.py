"""minimalRL actor-critic shape: the optimizer and the rollout list live on the model
(self.optimizer, self.data), train_net() steps them; a pure-numpy environment (PATTERNS 26)."""

import numpy as np
import torch
import torch.nn.functional as F


class Corridor:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.pos = 0.0

    def reset(self):
        self.pos = float(self.rng.uniform(-1, 1))
        return np.array([self.pos, 0.5], dtype=np.float32)

    def step(self, a):
        self.pos += 0.3 if a == 1 else -0.3
        self.pos += float(self.rng.normal(0, 0.05))
        done = abs(self.pos) > 2
        return np.array([self.pos, 0.5], dtype=np.float32), float(self.pos > 0), done


class ActorCritic(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.data = []
        self.fc1 = torch.nn.Linear(2, 32)
        self.fc_pi = torch.nn.Linear(32, 2)
        self.fc_v = torch.nn.Linear(32, 1)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=0.005)

    def pi(self, x):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=-1)

    def v(self, x):
        return self.fc_v(F.relu(self.fc1(x)))

    def put_data(self, transition):
        self.data.append(transition)

    def make_batch(self):
        s, a, r, s2, d = zip(*self.data)
        self.data = []
        return (
            torch.tensor(np.array(s)),
            torch.tensor(a).unsqueeze(1),
            torch.tensor(r, dtype=torch.float32).unsqueeze(1),
            torch.tensor(np.array(s2)),
            torch.tensor([0.0 if x else 1.0 for x in d]).unsqueeze(1),
        )

    def train_net(self):
        s, a, r, s2, mask = self.make_batch()
        td_target = r + 0.98 * self.v(s2) * mask
        delta = td_target - self.v(s)
        pi_a = self.pi(s).gather(1, a)
        loss = -torch.log(pi_a) * delta.detach() + F.smooth_l1_loss(self.v(s), td_target.detach())
        self.optimizer.zero_grad()
        loss.mean().backward()
        self.optimizer.step()


torch.manual_seed(11)
env = Corridor(5)
model = ActorCritic()
score = 0.0
for n_epi in range(12):
    done = False
    s = env.reset()
    steps = 0
    while not done and steps < 40:
        for t in range(5):
            prob = model.pi(torch.from_numpy(s))
            a = torch.distributions.Categorical(prob).sample().item()
            s_prime, r, done = env.step(a)
            model.put_data((s, a, r, s_prime, done))
            s = s_prime
            score += r
            steps += 1
            if done:
                break
        model.train_net()
    if n_epi % 3 == 2:
        print(f"episode {n_epi} avg score {score / 3:.3f}")  # @outside: print(f"  fc_pi {model.fc_pi.weight.sum().item():.6f} adam steps {len(model.optimizer.state)}")
        score = 0.0
