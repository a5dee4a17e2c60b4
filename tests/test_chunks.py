"""Checkpoints that cost what changed: large values as chunks, unchanged ones not copied.

The end-to-end test mutates arrays and tensors in place in every way a script can
(``tests/scripts/mutations.py``) and checks that replay restores each value bit for bit,
without re-running a block. The unit tests count the bytes a checkpoint adds to the store.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import Flor

from flor.errors import CorruptCheckpoint
from flor.runs.layout import KINDS, blob_key
from flor.runtime.state.capture import Snapshot, capture
from flor.runtime.state.chunks import CHUNK_BYTES, Chunks, Pack
from flor.runtime.state.codec import VerifiedBlobs, decode, encode, finish, prepare
from flor.runtime.state.restore import restore
from flor.store.local import LocalStore


def test_replay_restores_every_in_place_mutation_bit_for_bit(flor_env: Flor) -> None:
    f = flor_env
    script = f.copy("mutations.py")
    f.python(script, "30", "--flor", "exp", FLOR_EPSILON="1e9")  # a checkpoint every step
    edited = f.copy("mutations.py", "outside", as_name="edited.py")
    truth, full = f.counting_backwards("full", (str(edited), "30"), hand=True)
    replay = (str(edited), "30", "--flor", "exp", "--replay_flor")
    replayed, backward = f.counting_backwards("replay", replay, hand=True)
    assert replayed.stdout == truth.stdout
    assert truth.stdout.count("\n") == 31
    assert full == 30 and backward == 0, "every step restored, none re-run"


class _Checkpoints:
    """Snapshots of the same values in a row, as one block's checkpoints are taken."""

    def __init__(self, root: object) -> None:
        self.store = LocalStore(str(root), KINDS)
        self.chunks = Chunks(self.store)
        self.copies: dict[object, torch.Tensor] = {}

    def take(self, value: object, into: object = None) -> tuple[int, int, object]:
        """The bytes copied and the bytes added to the store; what restoring it (into
        ``into``) gives. As the checkpointer does, the snapshot's large copies go first."""
        snap = Snapshot(self.copies, Pack())
        node = capture(value, snap)
        self.copies = snap.current
        enc = encode(node, self.store, self.chunks, snap.current.values(), snap.pack)
        return (
            snap.nbytes,
            enc.new_blob_bytes,
            restore(into, decode(enc.data, enc.sha256, "k", self.store)),
        )

    def files(self) -> int:
        return len(list(self.store.keys(".blobs")))


def test_an_unchanged_tensor_is_neither_copied_nor_stored_again(tmp_path: object) -> None:
    c = _Checkpoints(tmp_path)
    frozen = torch.randn(256, 1024)  # 1 MB
    copied, stored, _ = c.take(frozen)
    assert copied == stored == frozen.numel() * 4
    copied, stored, back = c.take(frozen)
    assert (copied, stored) == (0, 0)
    assert torch.equal(back, frozen)


@pytest.mark.parametrize("write", ["data", "numpy", "in-place"])
def test_a_write_the_version_counter_misses_is_stored(tmp_path: object, write: str) -> None:
    c = _Checkpoints(tmp_path)
    t = torch.zeros(512, 256)  # 512 KB: eight chunks
    c.take(t)
    if write == "data":
        t.data[300, 7] = 5.0
    elif write == "numpy":
        t.numpy()[300, 7] = 5.0
    else:
        t[300, 7] += 5.0
    copied, stored, back = c.take(t)
    assert copied == t.numel() * 4
    assert stored == CHUNK_BYTES, "only the chunk that changed"
    assert back[300, 7] == 5.0 and torch.equal(back, t)


def test_a_negative_zero_is_not_a_zero(tmp_path: object) -> None:
    c = _Checkpoints(tmp_path)
    t = torch.zeros(64 * 1024)
    c.take(t)
    t[9] = -0.0  # equal as a number, not as bits
    _, _, back = c.take(t)
    assert torch.signbit(back[9])


def test_numpy_arrays_keep_dtype_shape_and_order(tmp_path: object) -> None:
    c = _Checkpoints(tmp_path)
    arrays = [
        np.arange(40000, dtype=">i4").reshape(200, 200),  # big-endian
        np.asfortranarray(np.random.default_rng(0).random((300, 100))),
        np.arange(12, dtype=np.complex64).reshape(3, 4)[:, ::2],  # a strided view
        np.zeros((0, 3), dtype=np.uint8),
        np.array(3.5),
    ]
    for a in arrays:
        _, _, back = c.take(a)
        assert type(back) is np.ndarray and back.dtype == a.dtype and back.shape == a.shape
        fortran = a.flags.f_contiguous and not a.flags.c_contiguous
        assert back.flags.f_contiguous if fortran else back.flags.c_contiguous
        assert np.array_equal(back, a) and back.flags.writeable


def test_a_replay_buffer_stores_the_rows_that_changed(tmp_path: object) -> None:
    c = _Checkpoints(tmp_path)
    buffer = np.zeros((20000, 8), dtype=np.float32)  # 640 KB: ten chunks
    c.take(buffer)
    buffer[5000:5100] = 1.0  # 3.2 KB, inside one chunk
    copied, stored, back = c.take(buffer)
    assert stored == CHUNK_BYTES
    assert np.array_equal(back, buffer)


def test_the_chunks_that_changed_are_one_file_per_checkpoint(tmp_path: object) -> None:
    """A replay buffer's arrays each gain rows: the chunks that changed, of every array, are
    that checkpoint's pack (one file and one store round trip, not one per chunk)."""
    c = _Checkpoints(tmp_path)
    arrays = [np.zeros((20000, 4), dtype=np.float32) for _ in range(3)]  # five chunks each
    c.take(arrays)
    files = c.files()
    for step in range(1, 4):
        for a in arrays:
            a[step * 5000 : step * 5000 + 200] = step  # rows in one chunk of each
        _, stored, back = c.take(arrays)
        assert stored == 3 * CHUNK_BYTES and c.files() == files + step
        assert all(np.array_equal(x, a) for x, a in zip(back, arrays, strict=True))  # type: ignore[call-overload]


def test_a_growing_history_of_losses_stores_its_new_tail(tmp_path: object) -> None:
    """A list of floats appended to every step (``losses.append(loss.item())``): a
    checkpoint stores the chunk its new items are in, not the whole list again."""
    c = _Checkpoints(tmp_path)
    losses = [0.1 * i for i in range(20000)]  # 180 KB pickled: three chunks
    _, first, _ = c.take(losses)
    losses.extend([1.0, 2.0])
    into: list[float] = []
    _, stored, back = c.take(losses, into=into)
    assert back is into and into == losses
    assert first > 2 * CHUNK_BYTES and 0 < stored <= CHUNK_BYTES


def test_a_large_pickled_value_shares_its_unchanged_prefix(tmp_path: object) -> None:
    c = _Checkpoints(tmp_path)
    history = {1.5 * i for i in range(30000)}  # a set: pickled whole
    _, first, _ = c.take(history)
    history.add(-1.0)
    _, second, back = c.take(history)
    assert back == history
    assert 0 < second < first


class _CountingStore(LocalStore):
    def __init__(self, root: str) -> None:
        super().__init__(root, KINDS)
        self.reads: list[str] = []

    def get(self, key: str) -> bytes:
        self.reads.append(key)
        return super().get(key)


def test_consecutive_restores_read_the_blobs_they_share_once(tmp_path: object) -> None:
    """A replay restores checkpoint after checkpoint: a frozen tensor they all hold is read
    and checked against its hash once, not once per restore; what changed is read each time.
    A cache too small for a blob keeps none, and each restore reads it again."""
    store = _CountingStore(str(tmp_path))
    chunks = Chunks(store)
    frozen, trained = torch.randn(256, 256), torch.zeros(256, 256)  # 256 KB each
    previous: dict[object, torch.Tensor] = {}
    encoded = []
    for _ in range(3):
        trained += 1.0
        snap = Snapshot(previous)
        node = capture([frozen, trained], snap)
        previous = snap.current
        encoded.append(encode(node, store, chunks, snap.current.values()))
    frozen_blobs = {blob_key(sha) for sha in encoded[0].blobs.keys() & encoded[2].blobs.keys()}
    assert frozen_blobs
    for verified, reads_of_each in ((VerifiedBlobs(), 1), (VerifiedBlobs(max_bytes=1024), 3)):
        store.reads = []
        for enc in encoded:
            back = decode(enc.data, enc.sha256, "k", store, verified)
            values = restore(None, back)
            assert torch.equal(values[0], frozen)
        assert {store.reads.count(key) for key in frozen_blobs} == {reads_of_each}
    assert torch.equal(values[1], trained)


def test_a_changed_chunk_is_refused(tmp_path: object) -> None:
    store = LocalStore(str(tmp_path), KINDS)
    enc = encode({"t": torch.ones(100000)}, store)
    sha = next(iter(enc.blobs))
    path = tmp_path / blob_key(sha)  # type: ignore[operator]
    raw = bytearray(path.read_bytes())
    raw[10] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpoint, match="fails its checksum"):
        decode(enc.data, enc.sha256, "k", store)


def test_a_chunk_thinning_deleted_is_stored_again(tmp_path: object) -> None:
    c = _Checkpoints(tmp_path)
    t = torch.ones(100000)
    c.take(t)
    for key in c.store.keys(".blobs"):
        c.store.delete(key)
    c.chunks.forget(list(c.chunks.held))
    _, stored, back = c.take(t)
    assert stored > 0 and torch.equal(back, t)


def test_a_tensor_written_in_place_is_copied_without_a_compare(tmp_path: object) -> None:
    """Autograd's counter moved: the tensor was written to, and is copied without reading
    its previous copy. Written back to the same bits, its chunks are still not stored again."""
    c = _Checkpoints(tmp_path)
    t = torch.ones(512, 256)
    c.take(t)
    t.mul_(1.0)  # a write, to the same bits
    copied, stored, back = c.take(t)
    assert copied == t.numel() * 4 and stored == 0
    assert torch.equal(back, t)


def test_a_tensor_that_changes_whole_is_one_blob_and_then_only_what_changed(
    tmp_path: object,
) -> None:
    """A parameter changes whole at every step: each later copy is one blob (one file, not
    eight chunk files). Once a step changes only part of it, only the chunk that changed is
    stored (in that checkpoint's pack: one file still); the others point into the blob
    that held the whole copy."""
    c = _Checkpoints(tmp_path)
    t = torch.arange(512 * 256, dtype=torch.float32).reshape(512, 256)  # no two chunks alike
    c.take(t)
    files = len(list(c.store.keys(".blobs")))
    assert files == 8  # a first copy is chunked: another run may hold its chunks
    for step in range(1, 6):
        t.add_(1.0)
        _, stored, back = c.take(t)
        assert stored == t.numel() * 4 and torch.equal(back, t), step
        assert len(list(c.store.keys(".blobs"))) == files + step, "one blob per copy"
    for row in (300, 100):
        t[row, 7] = -1.0
        _, stored, back = c.take(t)
        assert stored == CHUNK_BYTES and torch.equal(back, t), row
    assert len(list(c.store.keys(".blobs"))) == files + 7


def test_the_copies_that_changed_whole_are_one_file_a_later_checkpoint_points_into(
    tmp_path: object,
) -> None:
    """An optimizer step changes every parameter whole: a checkpoint's copies that changed
    whole are written together, one pack (one file, not one per tensor). A tensor that then
    stops changing is not stored again: its copy points into the pack it was written to."""
    c = _Checkpoints(tmp_path)
    a = torch.arange(256 * 256, dtype=torch.float32).reshape(256, 256)  # 256 KB: four chunks
    b = -a
    c.take([a, b])
    assert c.files() == 8  # first copies are chunked: another run may hold their chunks
    a.add_(1.0)
    b.add_(1.0)
    _, stored, back = c.take([a, b])
    assert stored == 2 * a.numel() * 4 and c.files() == 9
    assert torch.equal(back[0], a) and torch.equal(back[1], b)  # type: ignore[index]
    a.add_(1.0)
    _, stored, back = c.take([a, b])
    assert stored == a.numel() * 4 and c.files() == 10
    assert torch.equal(back[0], a) and torch.equal(back[1], b)  # type: ignore[index]


@pytest.mark.parametrize("then", ["unchanged", "rewritten", "changed in part"])
def test_a_copy_whose_pack_thinning_deleted_is_stored_again(tmp_path: object, then: str) -> None:
    """Reused as it is, written to its same bits (a fresh copy that compares equal to the one
    in the pack), or changed in one chunk: its bytes are stored again, not pointed at where
    they were."""
    c = _Checkpoints(tmp_path)
    a = torch.arange(256 * 256, dtype=torch.float32)
    c.take(a)
    a.add_(1.0)
    c.take(a)  # into a pack
    for key in c.store.keys(".blobs"):
        c.store.delete(key)
    c.chunks.forget(list(c.chunks.held))
    if then == "rewritten":
        a.mul_(1.0)
    elif then == "changed in part":
        a[7] = -1.0
    _, stored, back = c.take(a)
    assert stored == a.numel() * 4 and torch.equal(back, a)  # type: ignore[arg-type]


def test_a_gradient_backward_allocates_anew_is_compared_with_its_previous_copy(
    tmp_path: object,
) -> None:
    """``zero_grad`` frees a gradient and backward allocates the next one elsewhere: its
    previous copy is found by its parameter, and an equal gradient is not stored again."""
    c = _Checkpoints(tmp_path)
    layer = torch.nn.Linear(256, 256, bias=False)  # a 256 KB weight and gradient
    x = torch.ones(1, 256)
    layer(x).sum().backward()
    c.take(layer, into=torch.nn.Linear(256, 256, bias=False))
    old = layer.weight.grad
    layer.weight.grad = None
    layer(x).sum().backward()  # the same gradient, in a new tensor
    assert old is not None and layer.weight.grad is not None
    assert layer.weight.grad.data_ptr() != old.data_ptr()
    restored = torch.nn.Linear(256, 256, bias=False)
    copied, stored, _ = c.take(layer, into=restored)
    assert (copied, stored) == (0, 0)
    assert restored.weight.grad is not None
    assert torch.equal(restored.weight.grad, layer.weight.grad)


def test_small_tensors_are_copied_into_the_checkpoints_pack_bit_for_bit(tmp_path: object) -> None:
    """Tensors under a chunk's size are copied as bytes into the pack the writer hashes, not
    pickled into the manifest; those whose memory is not their values densely (a view with
    gaps, conjugate or negative bits) are copied as tensors. Each comes back exactly."""
    c = _Checkpoints(tmp_path)
    base = torch.randn(64, 64)
    values = {
        "float": base,
        "bfloat16": base.to(torch.bfloat16),
        "bool": base > 0,
        "int8": base.to(torch.int8),
        "scalar": torch.tensor(-0.0),
        "empty": torch.empty(0, 3),
        "strided": base.t(),
        "conj": torch.randn(8, 8, dtype=torch.complex64).conj(),
        "neg": torch._neg_view(base),
        "param": torch.nn.Parameter(base.clone()),
    }
    copied, stored, back = c.take(values)
    for name, value in values.items():
        got = back[name]
        assert got.dtype == value.dtype and got.shape == value.shape, name
        assert torch.equal(got.resolve_conj().resolve_neg(), value.resolve_conj().resolve_neg())
    assert torch.signbit(back["scalar"]) and back["param"].requires_grad
    assert copied == sum(v.numel() * v.element_size() for v in values.values())
    snap = Snapshot({}, Pack())
    node = capture([torch.randn(1024) for _ in range(100)], snap)  # 400 KB in 4 KB tensors
    enc = encode(node, c.store, c.chunks, (), snap.pack)
    assert len(enc.data) < 40_000 < enc.logical, "the bytes are in the pack, not the manifest"


def test_the_writer_hashes_and_stores_first_copies_not_the_training_thread(
    tmp_path: object,
) -> None:
    """A fresh tensor in scope at each checkpoint (a batch, the logits) has no previous copy:
    its chunks are named by their hashes. ``prepare`` (the training thread's part) leaves
    them to ``finish`` (the writer's): it neither hashes nor stores a byte of them."""
    c = _Checkpoints(tmp_path)
    history = [float(i) for i in range(20000)]  # pickled: 180 KB of chunks
    for _ in range(2):
        batch = torch.randn(64, 1024)  # 256 KB, new every time
        snap = Snapshot(c.copies, Pack())
        node = capture({"batch": batch, "history": history, "again": batch}, snap)
        c.copies = snap.current
        files = c.files()
        prepared = prepare(node, c.store, c.chunks, snap.current.values(), snap.pack)
        assert c.files() == files, "nothing stored before the writer's part"
        enc = finish(prepared)
        assert c.files() > files
        back = restore(None, decode(enc.data, enc.sha256, "k", c.store))
        assert torch.equal(back["batch"], batch) and back["again"] is back["batch"]
        assert back["history"] == history
        history.append(0.5)
