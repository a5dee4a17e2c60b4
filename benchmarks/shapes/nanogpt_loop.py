"""A nanoGPT-shaped step loop, unmodified (for `flor run`): `while True` over iter_num, a
prefetched batch, a warm-up/cosine learning rate, an eval branch every eval_interval steps, a
break at max_iters. A tiny causal transformer on synthetic tokens.

    python nanogpt_loop.py [max_iters]
"""

import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

max_iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
eval_interval, eval_iters = 100, 4
batch_size, block_size, vocab, n_embd, n_head = 12, 32, 48, 48, 4
learning_rate, warmup_iters = 3e-3, 100

torch.manual_seed(1337)
tokens = torch.randint(vocab, (40000,))
tokens[1::2] = (tokens[0::2] * 7 + 3) % vocab  # something to learn
n = int(0.9 * len(tokens))
train_data, val_data = tokens[:n], tokens[n:]


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )
        mask = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), 1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(n_embd, vocab)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        logits = self.head(self.blocks(x))
        return logits, F.cross_entropy(logits.view(-1, vocab), targets.view(-1))


model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.1)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            losses[k] = model(X, Y)[1].item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / warmup_iters
    ratio = (it - warmup_iters) / max(1, max_iters - warmup_iters)
    return learning_rate * 0.1 + 0.5 * (1 + math.cos(math.pi * ratio)) * learning_rate * 0.9


started = time.perf_counter()  # the loop's own time, on stderr: benchmarks/bench_overhead.py
X, Y = get_batch("train")
iter_num = 0
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        # HINDSIGHT-SPARSE
    logits, loss = model(X, Y)
    X, Y = get_batch("train")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    # HINDSIGHT-EVERY
    iter_num += 1
    if iter_num > max_iters:
        break
print(f"done at {iter_num}")
print(f"loop {time.perf_counter() - started:.3f} s", file=sys.stderr)
