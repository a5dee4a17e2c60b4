"""The cheap part of a scope, and what a module or object holds besides its state_dict:
captured, serialized and restored in process, as a skipped block sees them."""

from __future__ import annotations

import sys
from collections import OrderedDict

import numpy as np
import torch

from flor.runtime.state.capture import Snapshot, capture
from flor.runtime.state.codec import decode, encode
from flor.runtime.state.kinds import stateful_in_scope
from flor.runtime.state.restore import restore
from flor.runtime.state.scope import (
    CHECKPOINT_VALUE_BYTES,
    VALUE_BYTES,
    bind,
    cheap_values,
    same,
    unbound,
)


def _roundtrip(obj: object) -> dict:
    enc = encode(capture(obj, Snapshot()))
    return decode(enc.data, enc.sha256, "k")


def test_cheap_values_take_scalars_small_containers_and_small_tensors_only() -> None:
    big = torch.zeros(VALUE_BYTES // 4 + 1)
    names = {
        "step": 3,
        "lr": 0.1,
        "tag": "run",
        "history": [0.5, 0.25],
        "loss": torch.tensor(1.5, requires_grad=True) * 2,  # has a graph: a value
        "weight": torch.nn.Parameter(torch.ones(2)),  # trainable: state, not a value
        "big": big,
        "acc": np.float32(0.5),
        "model": torch.nn.Linear(2, 2),
        "best_state": torch.nn.Linear(2, 2).state_dict(),  # an OrderedDict of small tensors
        "__name__": "__main__",
        "_flor_step": 1,
    }
    chosen = ["acc", "best_state", "history", "loss", "lr", "step", "tag"]
    assert sorted(cheap_values(names)) == chosen
    restored = restore(None, capture(names["best_state"], Snapshot()), {})
    assert type(restored) is OrderedDict and list(restored) == ["weight", "bias"]
    assert restored._metadata == names["best_state"]._metadata  # versions, for loading
    assert all(torch.equal(restored[k], v) for k, v in names["best_state"].items())


def test_cheap_values_stop_at_the_checkpoint_budget() -> None:
    chunk = torch.zeros(VALUE_BYTES // 4)  # exactly one value's limit
    names = {f"t{i}": chunk.clone() for i in range(CHECKPOINT_VALUE_BYTES // VALUE_BYTES + 2)}
    assert len(cheap_values(names)) == CHECKPOINT_VALUE_BYTES // VALUE_BYTES


def test_same_compares_content_and_type() -> None:
    assert same(torch.ones(2), torch.ones(2))
    assert not same(torch.ones(2), torch.ones(2, dtype=torch.float64))
    assert not same(1, 1.0)
    assert same([1, "a"], [1, "a"])
    assert not same((torch.ones(2),), (torch.ones(2),))  # ambiguous: rebind, never wrongly keep


def test_bind_rebinds_function_locals_and_module_globals() -> None:
    def loop() -> tuple[int, float]:
        step, loss = 0, 0.0
        bind(sys._getframe(), {"step": 7, "loss": 2.5})
        return step, loss

    assert loop() == (7, 2.5)
    namespace: dict = {"__builtins__": __builtins__}
    exec(
        "import sys\nfrom flor.runtime.state.scope import bind\nbind(sys._getframe(), {'x': 1})",
        namespace,
    )
    assert namespace["x"] == 1


def test_unbound_sees_locals_not_yet_bound() -> None:
    def block() -> list[str]:
        found = unbound(sys._getframe(), frozenset({"loss", "print", "model"}))
        loss = 1  # a local: unbound until here, although a global of that name may exist
        return found + [str(loss)]

    assert block() == ["loss", "model", "1"]


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=0.1)
        self.rewards: list[float] = []


def test_a_module_keeps_its_optimizer_and_lists_through_a_restore() -> None:
    policy = Policy()
    policy.fc(torch.ones(1, 2)).sum().backward()
    policy.optimizer.step()
    policy.rewards.append(1.0)
    node = _roundtrip(policy)
    expected = {k: v.clone() for k, v in policy.optimizer.state_dict()["state"][0].items()}

    fresh = Policy()  # a new process: Adam has no moments, the list is empty
    fresh.cache = "made lazily after the checkpoint"
    assert restore(fresh, node) is fresh
    moments = fresh.optimizer.state_dict()["state"][0]
    assert torch.equal(moments["exp_avg"], expected["exp_avg"])
    assert fresh.rewards == [1.0]
    assert not hasattr(fresh, "cache")
    assert fresh.optimizer.param_groups[0]["params"][0] is fresh.fc.weight  # identity kept


class Spec:
    def __init__(self, steps: int) -> None:
        self.steps = steps


class Env:
    def __init__(self) -> None:
        self.x = 0.0

    @property
    def spec(self) -> Spec:
        if not hasattr(self, "_cached_spec"):
            self._cached_spec = Spec(8)
        return self._cached_spec


def test_a_lazily_cached_attribute_is_rebuilt_where_this_process_lacks_it() -> None:
    env = Env()
    assert env.spec.steps == 8
    env.x = 2.0
    node = _roundtrip(env)
    fresh = Env()
    assert restore(fresh, node) is fresh
    assert fresh.x == 2.0 and isinstance(fresh.__dict__["_cached_spec"], Spec)


def test_a_private_generator_is_state_restored_in_place() -> None:
    gen = torch.Generator().manual_seed(3)
    assert list(stateful_in_scope({"gen": gen})) == ["gen"]
    torch.rand(2, generator=gen)
    node = _roundtrip(gen)
    expected = torch.rand(2, generator=gen)
    fresh = torch.Generator().manual_seed(99)
    assert restore(fresh, node) is fresh
    assert torch.equal(torch.rand(2, generator=fresh), expected)
