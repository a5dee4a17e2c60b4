"""Capture/restore round trips through real serialization, as a skipped block sees them."""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict

import numpy as np
import pytest
import torch

from flor.errors import CorruptCheckpoint
from flor.runtime.state.capture import (
    GlobalRng,
    Snapshot,
    Unrestorable,
    capture,
    capture_rng,
)
from flor.runtime.state.codec import MANIFEST, decode, encode
from flor.runtime.state.kinds import stateful_in_scope
from flor.runtime.state.restore import restore, restore_rng
from flor.runtime.state.unbound import UNBOUND


class Box:
    def __init__(self) -> None:
        self.model = torch.nn.Linear(3, 2)
        self.opt = torch.optim.Adam(self.model.parameters())
        self.count = 0
        self.history: list[float] = []
        self.loader = torch.utils.data.DataLoader(list(range(4)))


def _roundtrip(objs: list) -> list:
    snap = Snapshot()
    enc = encode([capture(o, snap) for o in objs])
    return decode(enc.data, enc.sha256, "k")


def _train(box: Box) -> None:
    loss = box.model(torch.randn(4, 3)).sum()
    loss.backward()
    box.opt.step()
    box.count += 1
    box.history.append(loss.item())


def test_plain_object_with_modules_restores_in_place() -> None:
    box = Box()
    _train(box)
    nodes = _roundtrip([box])
    expected = {k: v.clone() for k, v in box.model.state_dict().items()}
    model, opt, loader = box.model, box.opt, box.loader
    box.model.weight.data.zero_()
    box.opt.zero_grad()
    box.count, box.history = 99, []
    assert restore(box, nodes[0], {}) is box
    assert box.model is model and box.opt is opt and box.loader is loader
    assert box.count == 1 and len(box.history) == 1
    assert all(torch.equal(box.model.state_dict()[k], v) for k, v in expected.items())
    assert opt.param_groups[0]["params"][0] is model.weight, "optimizer still drives the model"
    assert model.weight.grad is not None, "gradients of the last step are restored too"


def test_shared_objects_are_saved_once_and_aliases_survive() -> None:
    model = torch.nn.Linear(2, 2)
    pair = [model, {"m": model}]
    nodes = _roundtrip([model, pair])
    assert nodes[1]["v"][0]["k"] == "ref"
    done: dict[int, object] = {}
    assert restore(model, nodes[0], done) is model
    out = restore(pair, nodes[1], done)
    assert out is pair and pair[0] is model and pair[1]["m"] is model


def test_values_tensors_parameters_and_unbound() -> None:
    p = torch.nn.Parameter(torch.ones(3))
    t = torch.arange(4.0)
    nodes = _roundtrip([3, 2.5, "s", None, t, p, UNBOUND, np.arange(3), {1, 2}, (1, t)])
    p.data.zero_()
    done: dict[int, object] = {}
    restored = [
        restore(cur, n, done) for cur, n in zip([0, 0, "", 1, None, p, 0, None, set(), None], nodes)
    ]
    assert restored[:4] == [3, 2.5, "s", None]
    assert torch.equal(restored[4], t)
    assert restored[5] is p and torch.equal(p, torch.ones(3))
    assert restored[6] is UNBOUND
    assert restored[7].tolist() == [0, 1, 2]
    assert restored[8] == {1, 2}
    assert restored[9][0] == 1 and torch.equal(restored[9][1], t)


@pytest.mark.parametrize("length", [5, 5000])
def test_a_list_of_primitives_is_restored_in_place_with_each_type(length: int) -> None:
    """Saved as its values in one go (long ones pickled, as chunks): each comes back with its
    own type, into the same list; a tuple of them comes back a tuple."""
    history = [0.5 * i for i in range(length)] + [None, "s", True, 7, b"b", torch.float16]
    history += [torch.Size([2, 3]), torch.device("cpu")]
    scalars = tuple(range(length))
    nodes = _roundtrip([history, scalars])
    expected = list(history)
    history.clear()
    done: dict[int, object] = {}
    assert restore(history, nodes[0], done) is history
    assert history == expected and [type(v) for v in history] == [type(v) for v in expected]
    assert restore(None, nodes[1], done) == scalars


def test_module_train_mode_and_scheduler_flags_restored() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout())
    model.train()
    nodes = _roundtrip([model])
    model.eval()
    restore(model, nodes[0], {})
    assert model.training and model[1].training


def test_a_modules_state_dict_keeps_its_order_and_versions_in_the_plain_manifest() -> None:
    def net() -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))

    trained = net()
    trained(torch.randn(4, 3))
    enc = encode(capture(trained))
    assert enc.data.startswith(MANIFEST)  # not torch.save's slower format
    node = decode(enc.data, enc.sha256, "k")
    sd = node["v"]
    assert type(sd) is OrderedDict and list(sd) == list(trained.state_dict())
    assert sd._metadata == trained.state_dict()._metadata  # BatchNorm's loading reads versions
    fresh = net()
    restore(fresh, node, {})
    for a, b in zip(fresh.state_dict().values(), trained.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_self_reference() -> None:
    box = Box()
    box.me = box  # type: ignore[attr-defined]
    nodes = _roundtrip([box])
    assert restore(box, nodes[0], {}) is box and box.me is box  # type: ignore[attr-defined]


def test_generators_cannot_be_checkpointed() -> None:
    with pytest.raises(Unrestorable, match="generator"):
        capture(i for i in range(3))


def test_a_cycle_over_a_loader_says_what_it_holds() -> None:
    cycled = itertools.cycle(torch.utils.data.DataLoader(list(range(4))))
    next(cycled)
    with pytest.raises(Unrestorable) as e:
        capture(cycled)
    assert str(e.value) == (
        "a cycle, which cannot be saved (_SingleProcessDataLoaderIter cannot be pickled)"
    )


def test_stateful_objects_in_scope_are_found() -> None:
    box = Box()
    sched = torch.optim.lr_scheduler.StepLR(box.opt, 1)
    found = stateful_in_scope({"self": box, "sched": sched, "n": 3, "torch": torch})
    assert set(found) == {"self.model", "self.opt", "self.loader", "sched"}


def test_a_loader_keeps_its_position_not_its_data() -> None:
    """Its counters and generators come back in place (one generator the loader and its
    sampler share, restored once); its dataset is not saved, and a setting the edited
    script changed stays as the edit has it."""
    data = torch.utils.data.TensorDataset(torch.randn(4096, 8))
    loader = torch.utils.data.DataLoader(
        data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1)
    )
    loader.sampler.epoch = 3  # type: ignore[attr-defined]  # a counter a library keeps
    [node] = _roundtrip([loader])
    assert len(encode(node).data) < 8192  # a generator state (5 KB), no dataset (128 KB)
    expected = [batch[0].sum().item() for batch in loader]
    fresh = torch.utils.data.DataLoader(
        data,
        batch_size=8,
        shuffle=True,
        generator=torch.Generator().manual_seed(99),
        in_order=False,
    )
    assert restore(fresh, node, {}) is fresh
    assert fresh.sampler.epoch == 3  # type: ignore[attr-defined]
    assert (fresh.batch_size, fresh.in_order) == (8, False)  # settings: the edited script's
    assert fresh.sampler.generator is fresh.generator  # type: ignore[attr-defined]
    fresh.batch_sampler.batch_size = 4  # type: ignore[union-attr]  # compare the same batches
    assert [batch[0].sum().item() for batch in fresh] == expected


def test_rng_streams_round_trip() -> None:
    enc = encode(capture_rng())
    rng = decode(enc.data, enc.sha256, "k")
    a = (random.random(), float(np.random.rand()), torch.rand(1).item())
    restore_rng(rng)
    assert (random.random(), float(np.random.rand()), torch.rand(1).item()) == a


def test_the_global_streams_read_again_reuse_only_what_did_not_draw() -> None:
    """Python's state read again without a draw reuses its last conversion; after a draw, or
    with numpy's cached Gaussian put back by ``set_state`` (no word of its state moved), each
    read says what the streams are."""
    rng = GlobalRng()
    first = rng.read()
    assert rng.read()["python"][1] is first["python"][1]
    random.random()
    assert rng.read()["python"][1] is not first["python"][1]
    np.random.standard_normal()  # draws a pair: one returned, one cached
    saved = np.random.get_state()
    want = np.random.standard_normal()  # the cached one: the words stay as they were
    assert rng.read()["numpy"][3] == 0
    np.random.set_state(saved)
    enc = encode(rng.read())
    np.random.standard_normal()
    restore_rng(decode(enc.data, enc.sha256, "k"))
    assert np.random.standard_normal() == want


def test_numpy_generators_and_scalars_restore_exactly_in_place() -> None:
    class Env:
        pass

    makers = [
        lambda: np.random.default_rng(7),
        lambda: np.random.Generator(np.random.MT19937(3)),
        lambda: np.random.default_rng(7).spawn(2)[1],
    ]
    for make in makers:
        env = Env()
        env.rng, env.mean = make(), np.float32(0.25)  # type: ignore[attr-defined]
        env.rng.random(5)  # type: ignore[attr-defined]
        (node,) = _roundtrip([env])
        assert node["v"]["rng"]["k"] == "npgen"
        want = env.rng.random(3)  # type: ignore[attr-defined]
        for into in (Env(), env):  # a new generator, or the same one moved back
            if into is env:
                env.rng = make()  # type: ignore[attr-defined]  # as a replay starts it
            kept = getattr(into, "rng", None)
            back = restore(into, node)
            assert np.array_equal(back.rng.random(3), want)
            assert kept is None or back.rng is kept
            assert type(back.mean) is np.float32 and back.mean == np.float32(0.25)


def test_every_cuda_devices_stream_is_saved_once_cuda_is_in_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CUDA path as far as a CPU can take it (a GPU check: benchmarks/gpu_check.py):
    each device's generator state goes through the codec and back to set_rng_state_all."""
    states = [torch.arange(16, dtype=torch.uint8), torch.arange(16, 32, dtype=torch.uint8)]
    set_to: list[list[torch.Tensor]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert "cuda" not in capture_rng()  # reading it would create a CUDA context
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [t.clone() for t in states])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_to.append)
    enc = encode(capture_rng())
    restore_rng(decode(enc.data, enc.sha256, "k"))
    [restored] = set_to
    assert all(torch.equal(a, b) for a, b in zip(restored, states, strict=True))


def test_corrupt_bytes_are_detected_before_loading() -> None:
    enc = encode({"k": "val", "v": 1})
    data, sha = enc.data, enc.sha256
    with pytest.raises(CorruptCheckpoint, match="checksum"):
        decode(data[:-1] + b"x", sha, "some/key")


def test_a_dataloader_iterator_is_restored_to_its_position_without_loading_data() -> None:
    from torch.utils.data import DataLoader, RandomSampler, TensorDataset

    from flor.runtime.state import loader_position

    loader_position.install()
    ds = TensorDataset(torch.arange(100.0).view(-1, 1))
    own = torch.Generator().manual_seed(3)
    samplers = {
        "shuffle": lambda: {"shuffle": True},
        "own generator": lambda: {"sampler": RandomSampler(ds, generator=own)},
        "replacement": lambda: {"sampler": RandomSampler(ds, replacement=True, num_samples=10**10)},
    }
    for how, kwargs in samplers.items():
        torch.manual_seed(0)
        loader = DataLoader(ds, batch_size=4, **kwargs())
        it = iter(loader)
        for _ in range(3):
            next(it)
        node = capture(it)
        expected = [next(it)[0].flatten().tolist() for _ in range(2)]
        torch.manual_seed(123)  # another process: another global random state
        fresh = iter(loader)
        assert restore(fresh, node) is fresh
        assert [next(fresh)[0].flatten().tolist() for _ in range(2)] == expected, how


def test_a_dataloader_iterator_with_workers_says_why_it_cannot_be_saved_and_where() -> None:
    from torch.utils.data import DataLoader, TensorDataset

    from flor.runtime.state import loader_position

    loader_position.install()
    it = iter(DataLoader(TensorDataset(torch.zeros(8, 1)), batch_size=2, num_workers=1))
    with pytest.raises(
        Unrestorable, match=r"worker processes \(num_workers=1, created at test_state"
    ):
        capture(it)


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")  # torchdata 0.11 on torch 2.13
@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_iterator_resumes_from_its_own_state_in_place(workers: int) -> None:
    from torch.utils.data import TensorDataset
    from torchdata.stateful_dataloader import StatefulDataLoader

    from flor.runtime.state import loader_position

    loader_position.install()
    ds = TensorDataset(torch.arange(40.0).view(-1, 1))
    torch.manual_seed(0)
    loader = StatefulDataLoader(ds, batch_size=4, shuffle=True, num_workers=workers)
    it = iter(loader)
    for _ in range(3):
        next(it)
    enc = encode(capture(it))
    expected = [next(it)[0].flatten().tolist() for _ in range(2)]
    torch.manual_seed(123)  # another process: another global random state
    fresh = iter(loader)
    before = torch.get_rng_state()
    assert restore(fresh, decode(enc.data, enc.sha256, "k")) is fresh
    assert torch.equal(torch.get_rng_state(), before)  # restoring draws nothing
    assert loader._iterator is fresh
    assert [next(fresh)[0].flatten().tolist() for _ in range(2)] == expected


class _Gadget:
    """Unpickles as ``fn(*args)``: how a crafted pickle runs code."""

    def __init__(self, fn: object, *args: object) -> None:
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[object, ...]:
        return (self.fn, self.args)


def test_pickled_values_of_training_state_load_and_code_does_not() -> None:
    import collections
    import datetime
    import fractions
    import os
    import pickle
    import re
    import subprocess

    from flor.runtime.state import unpickle

    state = [
        np.arange(3), np.float32(1.5), np.random.default_rng(3), np.random.RandomState(3),
        torch.ones(3), torch.nn.Parameter(torch.ones(2)), torch.float16, torch.device("cpu"),
        collections.deque([1, 2], maxlen=5), collections.Counter("abca"), OrderedDict(a=1),
        collections.defaultdict(list, a=[1]), datetime.datetime(2026, 1, 2), {1, 2},
        fractions.Fraction(1, 3), re.compile("a+"), random.Random(4), slice(1, 5), range(3),
    ]  # fmt: skip
    loaded = unpickle.loads(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), "k")
    assert [type(x) for x in loaded] == [type(x) for x in state]
    assert loaded[2].random() == state[2].random() and loaded[4].equal(state[4])
    gadgets = [
        (os.system, "true"), (subprocess.Popen, ["true"]), (eval, "1"), (getattr, random.Random(1), "seed"),
        (exec, "x = 1"), (os.remove, "/nonexistent"), (pickle.loads, b"."),
    ]  # fmt: skip
    for fn, *args in gadgets:
        with pytest.raises(CorruptCheckpoint, match="which flor never loads"):
            unpickle.loads(pickle.dumps(_Gadget(fn, *args)), "ckpt/1.pt")
    module = b"\x80\x04\x8c\x05torch\x94\x8c\x02os\x94\x93\x94."  # torch.os: a module
    with pytest.raises(CorruptCheckpoint, match="which flor never loads"):
        unpickle.loads(module, "ckpt/1.pt")
