"""sluice.torch against a real sluice-feeder: one iteration per epoch,
exact tensors, DataLoader(batch_size=None), and what is refused."""
import io
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
import sluice  # noqa: E402
import sluice.torch  # noqa: E402

from test_client import Feeders, data, want_ids  # noqa: E402,F401 - the fixture too


def test_epochs_per_iteration(data):  # noqa: F811
    files, ids = data
    # the feeder's --timeout-ms 1.5 s (3 s by default here): the pause
    # between epochs below outlasts it sooner
    f = Feeders("torch-epochs", files, 1, extra=("--timeout-ms", "1500"), epochs=3)
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
                # --timeout-ms is 1.5 s)
                time.sleep(2.0)
        # after the last epoch: nothing, and a warning that says why
        with pytest.warns(RuntimeWarning, match=r"ended after its last epoch \(3 epochs of \d+ steps\)"):
            assert list(loader) == []
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
    # (not list(), which asks len() first: that connects in this process)
    it = iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
    msg = ""
    try:
        next(it)
    except RuntimeError as e:
        msg = str(e)
    assert "num_workers" in msg
    # its workers stopped now, not by a later test's garbage collection
    # (which joins them for 10 s, in whatever thread it runs)
    it._shutdown_workers()


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


def test_len_is_the_plans_steps(data):  # noqa: F811
    """len(dataset) and len(DataLoader) are the plan's steps per epoch of the
    worker (sluice.plan's), and a pass yields that many items; len() before
    any iteration connects, and the client is kept alive until the pass."""
    files, _ = data
    f = Feeders("torch-len", files, 1, extra=("--timeout-ms", "1500"), epochs=2)
    try:
        steps = [w["steps"] for w in sluice.plan(f.job_path, workers=2)["workers"]]
        assert steps == [50, 50]
        dss = [sluice.torch.IterableDataset(f.eps, f.job["name"], worker=w, workers=2, heartbeat_ms=200)
               for w in range(2)]
        assert [len(ds) for ds in dss] == [50, 50]
        assert [len(torch.utils.data.DataLoader(ds, batch_size=None)) for ds in dss] == [50, 50]
        time.sleep(2.0)  # past the feeder's --timeout-ms (1.5 s): kept alive
        for epoch in range(2):
            assert [sum(1 for _ in ds) for ds in dss] == [50, 50]
        with pytest.warns(RuntimeWarning, match="ended after its last epoch"):
            assert [list(ds) for ds in dss] == [[], []]  # the end
        assert [len(ds) for ds in dss] == [50, 50]  # known after the end too
        assert f.wait() == [0]
    finally:
        f.stop()
    # truth never connects (no len() behind it)
    assert bool(sluice.torch.IterableDataset(["ipc:///nonexistent-dir/x.sock"], "j"))


def test_no_len_for_an_endless_job(data):  # noqa: F811
    files, _ = data
    f = Feeders("torch-forever", files, 1, epochs=0)
    try:
        ds = sluice.torch.IterableDataset(f.eps, f.job["name"], heartbeat_ms=200)
        msg = "sluice.torch.IterableDataset of job 'job-torch-forever' has no len(): the job is endless (epochs 0)"
        with pytest.raises(TypeError) as e:
            len(ds)
        assert str(e.value) == msg
        with pytest.raises(TypeError):
            len(torch.utils.data.DataLoader(ds, batch_size=None))
        assert ds.epochs == 0 and ds.steps_per_epoch == 38
        assert len(next(iter(ds))["id"]) == 8  # the client is still right
        ds.close()
    finally:
        f.stop()


def ids_of(batches):
    return [x for b in batches for x in b["id"].tolist()]


def test_dataset_state_resumes_exactly(data):  # noqa: F811
    """A dataset's state saved 7 steps into epoch 1 (through torch.save, as
    a checkpoint would be) and loaded into a new dataset: its next pass is
    the rest of epoch 1, then nothing; with 2 feeders."""
    files, ids = data
    f = Feeders("torch-state", files, 2, epochs=2, shuffle={"buffer": 16, "seed": 4, "reshuffle_each_epoch": True})
    try:
        ds = sluice.torch.IterableDataset(f.eps, f.job["name"], heartbeat_ms=200, credits=4)
        assert ds.state_dict() == {"version": 1, "job": f.job["name"], "worker": 0, "workers": 1, "replicas": 1,
                                   "steps_per_epoch": None, "epochs": None, "position": 0}
        loader = torch.utils.data.DataLoader(ds, batch_size=None)
        epoch0 = list(loader)
        assert ds.state_dict()["position"] == 38  # an epoch's end: the next one's start
        epoch1 = []
        for batch in loader:
            epoch1.append(batch)
            if len(epoch1) == 7:
                saved = io.BytesIO()
                torch.save({"data": ds.state_dict()}, saved)
                break
        ds.close()
        ds2 = sluice.torch.IterableDataset(f.eps, f.job["name"], heartbeat_ms=200)
        ds2.load_state_dict(torch.load(io.BytesIO(saved.getvalue()))["data"])
        assert ds2.state_dict() == {"version": 1, "job": f.job["name"], "worker": 0, "workers": 1, "replicas": 1,
                                    "steps_per_epoch": 38, "epochs": 2, "position": 45}
        rest = list(torch.utils.data.DataLoader(ds2, batch_size=None))
        assert len(rest) == 31 and ds2.epoch == 1
        with pytest.warns(RuntimeWarning, match="ended after its last epoch"):
            assert list(ds2) == [] and ds2.state_dict()["position"] == 76
        ds2.close()
        assert f.wait() == [0, 0]
    finally:
        f.stop()
    want = want_ids(f.job, ids, 1, 1)[0]
    assert ids_of(epoch0) == [x for e, _, _, xs in want if e == 0 for x in xs]
    assert ids_of(epoch1[:7] + rest) == [x for e, _, _, xs in want if e == 1 for x in xs]


def test_dataset_hostile_state(data):  # noqa: F811
    """What a state shows at once is refused at once (no feeder needed);
    the plan it was saved under is checked when the client opens; the
    dataset is usable after either."""
    files, ids = data
    f = Feeders("torch-hostile", files, 1, epochs=1)
    try:
        ds = sluice.torch.IterableDataset(f.eps, f.job["name"], heartbeat_ms=200, worker=0, workers=2)
        good = {"version": 1, "job": f.job["name"], "worker": 0, "workers": 2, "replicas": 1, "steps_per_epoch": 50,
                "epochs": 1, "position": 48}
        who = "sluice.torch.IterableDataset.load_state_dict: "
        for bad, exc, msg in (
                (dict(good, worker=1), ValueError, "the state is another reader's: worker 1 (this reader's: 0)"),
                # another workers count mid-epoch: not twice within the epoch of the state's own change
                (dict(good, workers=3, position=5, transition=[2, 1, 0, 40, 50]), ValueError,
                 "the state was saved with 3 workers x 1 replicas at step 45 of 50 of epoch 0, the epoch in which "
                 "the job's shape already changed (at step 40, from 2 x 1): a second change within epoch 0 is "
                 "refused: change again at epoch 1's start (a state saved at epoch 0's end)"),
                (dict(good, workers=3, position=5, transition=[2, 1, 0, 40, None]), ValueError,
                 "the state's stream changed shape at step 40 of epoch 0 without saying that epoch's steps: where "
                 "its epochs end is not known"),
                # a transition's fields (issue #30 part 2)
                (dict(good, transition=[2, 1, 0, 40]), ValueError, "state['transition']: 4 values; it is "
                 "[from_workers, from_replicas, from_epoch, from_step, from_steps_per_epoch]"),
                (dict(good, transition=(2, 1, 0, 40, 50, 1)), ValueError, "state['transition']: 6 values; it is "
                 "[from_workers, from_replicas, from_epoch, from_step, from_steps_per_epoch]"),
                (dict(good, transition="21"), TypeError, "state['transition']: a list, not str"),
                (dict(good, transition=[0, 1, 0, 40, 50]), ValueError,
                 "state['transition'][0] (from_workers): 0 is out of range (1 to 65536)"),
                (dict(good, transition=[2, 1025, 0, 40, 50]), ValueError,
                 "state['transition'][1] (from_replicas): 1025 is out of range (1 to 1024)"),
                (dict(good, transition=[2, 1, -1, 40, 50]), ValueError,
                 "state['transition'][2] (from_epoch): -1 is out of range (0 to 281474976710656)"),
                (dict(good, transition=[2, 1, 0, 0, 50]), ValueError,
                 "state['transition'][3] (from_step): 0 is out of range (1 to 281474976710656)"),
                (dict(good, transition=[2, 1, 0, 40, 1]), ValueError,
                 "state['transition'][4] (from_steps_per_epoch): 1 is out of range (2 to 281474976710656)"),
                (dict(good, transition=[2, 1, 0, 50, 50]), ValueError,
                 "state['transition']: step 50 is not within an epoch of 50 steps"),
                (dict(good, transition=[2, True, 0, 40, 50]), TypeError,
                 "state['transition'][1] (from_replicas): an int, not bool"),
                (dict(good, transition=[2, 1, 0, 40, "50"]), TypeError,
                 "state['transition'][4] (from_steps_per_epoch): an int or None, not str"),
                (dict(good, workers=3, steps_per_epoch=None), ValueError, "the state of 3 workers x 1 replicas does "
                 "not say its steps per epoch (saved before any iteration): where its epochs end is not known"),
                (dict(good, workers=3, worker=3), ValueError, "the state's worker 3 is not one of its 3 workers"),
                (dict(good, job="other", workers=3, position=50), ValueError,
                 "the state is another reader's: job 'other' (this reader's: '%s')" % f.job["name"]),
                (dict(good, version=0), ValueError, "state version 0: this sluice (%s) reads version 1"
                 % sluice.version),
                (dict(good, position=-1), ValueError, "state['position']: -1 is out of range (0 to 281474976710656)"),
                ("state", TypeError, "a state is a dict (from state_dict()), not str")):
            with pytest.raises(exc) as e:
                ds.load_state_dict(bad)
            assert str(e.value) == who + msg
        assert ds.position == 0
        ds.load_state_dict(dict(good, workers=3, position=50))  # epoch 1's start: taken, by epoch
        assert ds.position == 0 and "transition" not in ds.state_dict()
        # mid-epoch (step 48 of 50 of epoch 0): taken, the change made there
        # at the next open (issue #30 part 2, semantics.md 5.2)
        ds.load_state_dict(dict(good, workers=3))
        assert ds.state_dict() == dict(good, steps_per_epoch=None, position=0, transition=[3, 1, 0, 48, 50])
        # a state after such a change, at the transition epoch's end (steps
        # 48, 49 of epoch 0 taken): by epoch 1 without a transition
        ds.load_state_dict(dict(good, workers=3, position=2, transition=[2, 1, 0, 48, 50]))
        assert ds.position == 0 and "transition" not in ds.state_dict()
        # one epoch later (step 3 of epoch 1 of 50): a change there, from the plain plan of 3 x 1
        ds.load_state_dict(dict(good, workers=3, position=2 + 3, transition=[2, 1, 0, 48, 50]))
        assert ds.state_dict()["transition"] == [3, 1, 1, 3, 50]
        # its own shape's state with a transition: carried as it is
        ds.load_state_dict(dict(good, position=7, transition=[3, 1, 0, 48, 50]))
        assert ds.state_dict() == dict(good, position=7, transition=[3, 1, 0, 48, 50])
        ds.load_state_dict(dict(good, steps_per_epoch=999))
        with pytest.raises(ValueError) as e:
            list(ds)
        assert str(e.value) == (who + "the state was saved under another plan of the job: steps_per_epoch 999 "
                                "(the feeders announce 50)")
        ds.load_state_dict(good)
        last = list(ds)
        assert [b["id"].tolist() for b in last] == [x for _, s, _, x in want_ids(f.job, ids, 2, 1)[0] if s >= 48]
        ds.close()
    finally:
        f.stop()
