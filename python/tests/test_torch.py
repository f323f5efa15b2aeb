"""sluice.torch against a real sluice-feeder: one iteration per epoch,
exact tensors, DataLoader(batch_size=None), and what is refused."""
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
import sluice.torch  # noqa: E402

from test_client import Feeders, data, want_ids  # noqa: E402,F401 - the fixture too


def test_epochs_per_iteration(data):  # noqa: F811
    files, ids = data
    f = Feeders("torch-epochs", files, 1, epochs=3)
    try:
        ds = sluice.torch.IterableDataset(f.eps, f.job["name"], heartbeat_ms=200)
        loader = torch.utils.data.DataLoader(ds, batch_size=None)
        got = []
        for epoch in range(3):
            n = 0
            for batch in loader:
                assert set(batch) == {"image", "label", "id"}
                assert batch["image"].dtype == torch.uint8 and batch["id"].dtype == torch.int64
                got.append((epoch, batch["id"].tolist()))
                n += 1
            assert n == ds.steps_per_epoch and ds.epoch == epoch
            if epoch == 0:
                # between epochs the client is kept alive (the feeder's
                # --timeout-ms is 3 s)
                time.sleep(3.5)
        assert list(loader) == []  # after the last epoch: nothing
        ds.close()
        assert f.wait() == [0]
    finally:
        f.stop()
    want = want_ids(f.job, ids, 1, 1)[0]
    assert got == [(e, x) for e, _, _, x in want]


def test_replicas_give_lists_and_resume(data):  # noqa: F811
    files, ids = data
    f = Feeders("torch-reps", files, 1, epochs=1)
    try:
        ds = sluice.torch.IterableDataset(f.eps, f.job["name"], replicas=2)
        it = iter(ds)
        head = [next(it) for _ in range(5)]
        it.close()  # a break: the client is closed, the position kept
        assert ds.position == 10
        tail = list(ds)  # a new client from the position
    finally:
        f.stop()
    got = [[r["id"].tolist() for r in step] for step in head + tail]
    want = want_ids(f.job, ids, 1, 2)[0]
    assert [x for step in got for x in step] == [x for _, _, _, x in want]


def test_dataloader_workers_refused(data):  # noqa: F811
    files, _ = data
    ds = sluice.torch.IterableDataset(["ipc:///nonexistent-dir/x.sock"], "j")
    with pytest.raises(RuntimeError, match="num_workers"):
        list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))


def test_pin_memory_without_cuda_warns(data):  # noqa: F811
    if torch.cuda.is_available():
        pytest.skip("CUDA is here: pinning works")
    files, _ = data
    f = Feeders("torch-pin", files, 1, epochs=1)
    try:
        ds = sluice.torch.IterableDataset(f.eps, f.job["name"], pin_memory=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            n = sum(1 for _ in ds)
        assert n == ds.steps_per_epoch
        assert any("pin_memory" in str(x.message) for x in w)
        ds.close()
    finally:
        f.stop()
