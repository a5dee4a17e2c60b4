"""Every common torch building block checkpoints and restores exactly.

Each case trains a model for two steps, checkpoints it (through real serialization, as a
skipped block's state), trains two more: the full run. The replay then starts from a model
trained differently (three other steps), restores the checkpoint and trains the same two
steps: its parameters, buffers, optimizer state and output must equal the full run's, bit for
bit. An RNN's flat-weight caches hold weak references, which no checkpoint can save; they are
rebuilt by torch, not saved (and they used to refuse the whole model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from flor.runtime.state.capture import Snapshot, capture, capture_rng
from flor.runtime.state.codec import decode, encode
from flor.runtime.state.restore import restore, restore_rng


@dataclasses.dataclass
class Config:
    width: int
    vocab: list[str]


class Tokenized(nn.Module):
    """A module holding plain Python objects: a config and a tokenizer's vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.config = Config(width=8, vocab=["a", "b", "c"])
        self.seen = 0
        self.embed = nn.Embedding(len(self.config.vocab), self.config.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen += 1
        return self.embed(x)


class Hooked(nn.Module):
    """Forward hooks, one of which counts the calls on the module it watches."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(6, 6)
        self.calls = 0
        self.layer.register_forward_hook(lambda m, i, o: o * 0.5)
        self.register_forward_pre_hook(self._count)

    def _count(self, module: nn.Module, inputs: Any) -> None:
        self.calls += 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class Ema(nn.Module):
    """A model and its exponential moving average (``AveragedModel``), updated every step."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(6, 6)
        self.ema = torch.optim.swa_utils.AveragedModel(
            self.net, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.ema.update_parameters(self.net)
        return self.net(x) + self.ema(x)


def _first(out: Any) -> torch.Tensor:
    return out[0] if isinstance(out, tuple) else out


SEQ = (5, 3, 6)  # (time, batch, features): the recurrent modules' default layout
CASES: dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor]]] = {
    "lstm": (lambda: nn.LSTM(6, 8, num_layers=2, dropout=0.1), lambda: torch.randn(SEQ)),
    "gru": (lambda: nn.GRU(6, 8, bidirectional=True), lambda: torch.randn(SEQ)),
    "rnn": (lambda: nn.RNN(6, 8, nonlinearity="relu"), lambda: torch.randn(SEQ)),
    "lstm_cell": (lambda: nn.LSTMCell(6, 8), lambda: torch.randn(3, 6)),
    "transformer": (
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(6, 2, dim_feedforward=12, dropout=0.1, batch_first=True),
            num_layers=2,
        ),
        lambda: torch.randn(SEQ),
    ),
    "attention": (
        lambda: _SelfAttention(nn.MultiheadAttention(6, 2, dropout=0.1)),
        lambda: torch.randn(SEQ),
    ),
    "weight_norm": (
        lambda: nn.utils.parametrizations.weight_norm(nn.Linear(6, 6)),
        lambda: torch.randn(4, 6),
    ),
    "spectral_norm": (  # its power-iteration vectors are buffers updated by every forward
        lambda: nn.utils.parametrizations.spectral_norm(nn.Linear(6, 6)),
        lambda: torch.randn(4, 6),
    ),
    "averaged_model": (Ema, lambda: torch.randn(4, 6)),
    "hooks": (Hooked, lambda: torch.randn(4, 6)),
    "compiled": (
        lambda: torch.compile(nn.Sequential(nn.Linear(6, 6), nn.GELU()), backend="eager"),
        lambda: torch.randn(4, 6),
    ),
    "batchnorm": (
        lambda: nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU()),
        lambda: torch.randn(4, 6),
    ),
    "embedding": (lambda: nn.Embedding(10, 6), lambda: torch.randint(10, (4, 3))),
    "plain_objects": (Tokenized, lambda: torch.randint(3, (4,))),
}


class _SelfAttention(nn.Module):
    def __init__(self, attention: nn.MultiheadAttention) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x)[0]


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, data: Callable[[], Any]) -> None:
    loss = _first(model(data())).float().pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _state(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[Any]:
    """Everything a full run's later output depends on, flattened to compare bit for bit."""
    tensors = [t.clone() for t in model.state_dict().values()]
    for group in optimizer.state_dict()["state"].values():
        tensors += [v.clone() for v in group.values() if isinstance(v, torch.Tensor)]
    plain = [
        (m.training, {k: v for k, v in vars(m).items() if k in ("seen", "calls", "config")})
        for m in model.modules()
    ]
    return [tensors, plain]


def _equal(a: list[Any], b: list[Any]) -> bool:
    return len(a[0]) == len(b[0]) and all(map(torch.equal, a[0], b[0])) and a[1] == b[1]


@pytest.mark.parametrize("name", list(CASES))
def test_a_building_block_restores_bit_for_bit(name: str) -> None:
    build, data = CASES[name]
    torch.manual_seed(0)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(2):
        _step(model, optimizer, data)
    snap = Snapshot()
    enc = encode([capture(model, snap), capture(optimizer, snap), capture_rng()])
    for _ in range(2):
        _step(model, optimizer, data)
    full = _state(model, optimizer)

    for _ in range(3):  # a replay's objects, in a state the full run never had
        _step(model, optimizer, data)
    assert not _equal(_state(model, optimizer), full)
    nodes = decode(enc.data, enc.sha256, "k")
    done: dict[int, Any] = {}
    assert restore(model, nodes[0], done) is model
    assert restore(optimizer, nodes[1], done) is optimizer
    restore_rng(nodes[2])
    for _ in range(2):
        _step(model, optimizer, data)
    assert _equal(_state(model, optimizer), full)


def test_an_rnn_keeps_its_flat_weights_on_its_own_parameters_after_a_restore() -> None:
    """The caches are neither saved nor deleted: the module still runs on its parameters."""
    model = nn.LSTM(4, 4)
    enc = encode([capture(model, Snapshot())])
    flat = list(model._flat_weights)
    with torch.no_grad():
        model.weight_hh_l0.add_(1.0)
    restore(model, decode(enc.data, enc.sha256, "k")[0], {})
    assert all(a is b for a, b in zip(model._flat_weights, flat))
    assert [r() for r in model._flat_weight_refs] == flat
    assert model._flat_weights[1] is model.weight_hh_l0
