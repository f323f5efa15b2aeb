"""Resumable iteration (issue #29 item 3) against real sluice-feeder
processes: sluice.Client.state_dict() / load_state_dict() continue exactly
(ids against the plan's reference model), with several feeders and workers;
a hostile state is refused with its message and leaves the client as it
was; len() of a finite job's dataset (the plan's steps per epoch), none
for an endless one. The same for sluice.torch.IterableDataset (skipped
without torch). The torchrun test (a training process killed and resumed
from a checkpoint) is torchrun_resume.py (ctest python_torchrun_resume)."""
import json
import operator

import pytest

import sluice
import test_client
from test_client import Feeders, data, flat, want_ids  # noqa: F401 - the fixture too


def state(**over):
    """A valid state of job 'job-j', worker 0 of 1, 1 replica, with `over`."""
    s = {"version": 1, "job": "job-j", "worker": 0, "workers": 1, "replicas": 1, "steps_per_epoch": 38, "epochs": 2,
         "position": 4}
    s.update(over)
    return s


def test_client_state_resumes_exactly(data):  # noqa: F811
    """Each of 2 workers (2 replicas, 2 feeders, shuffled) saves its state
    mid-way in epoch 1; new clients, from the state through JSON (a new
    process sees no more than that), continue exactly."""
    files, ids = data
    keys = {"shuffle": {"buffer": 16, "seed": 9, "reshuffle_each_epoch": True}, "epochs": 2}
    f = Feeders("state-exact", files, 2, **keys)
    W, R, K = 2, 2, 53  # K steps before the checkpoint: past epoch 0's 50
    try:
        heads, saved = {}, {}
        for w in range(W):
            # (few credits: a feeder that has sent a worker's whole share
            # before its goodbye counts it served, and may exit)
            with sluice.Client(f.eps, f.job["name"], worker=w, workers=W, replicas=R, heartbeat_ms=200,
                               credits=4) as c:
                assert c.state_dict() == {"version": 1, "job": f.job["name"], "worker": w, "workers": W,
                                          "replicas": R, "steps_per_epoch": 50, "epochs": 2, "position": 0}
                heads[w] = [next(c) for _ in range(K)]
                saved[w] = json.dumps(c.state_dict())
                assert json.loads(saved[w])["position"] == K * R
        tails = {}
        for w in range(W):
            # a fresh client opens at 0, then moves to the state's position
            with sluice.Client(f.eps, f.job["name"], worker=w, workers=W, replicas=R, heartbeat_ms=200) as c:
                c.load_state_dict(json.loads(saved[w]))
                assert c.position == K * R
                tails[w] = list(c)
                assert c.state_dict()["position"] == 2 * 50 * R  # the end
        assert f.wait() == [0, 0]
    finally:
        f.stop()
    want = want_ids(f.job, ids, W, R)
    for w in range(W):
        assert flat(heads[w]) + flat(tails[w]) == want[w], "worker %d" % w


def transition_ids(job, ids, old, new, w, e, t):
    """New worker w's stream after the change at step t of epoch e from
    old = (W, R) to new = (W2, R2), as flat() gives it: [(epoch, step,
    replica, [ids])...] from ref_plan's transition_pieces."""
    ref_plan = test_client.bed.ref_plan
    shuffle = job.get("shuffle") or {}

    def cfg(W, R):
        return ref_plan.normalize({"counts": [len(x) for x in ids], "G": job["global_batch_size"],
                                   "shuffle_buffer": shuffle.get("buffer", 0), "seed": shuffle.get("seed", 0),
                                   "reshuffle": int(shuffle.get("reshuffle_each_epoch", True)),
                                   "epochs": job["epochs"], "W": W, "R": R})
    c_old, c_new = cfg(*old), cfg(*new)
    T, T2, R2 = ref_plan.epoch_steps(c_old), ref_plan.epoch_steps(c_new), new[1]
    head = (T - t) * R2
    out = []
    for k, p in enumerate(ref_plan.transition_pieces(c_old, c_new, w, e, t, job["epochs"])):
        epoch, step = (e, t + k // R2) if k < head else (e + 1 + (k - head) // (T2 * R2), (k - head) % (T2 * R2) // R2)
        out.append((epoch, step, k % R2, [ids[fi][r] for fi, r in p]))
    return out


def test_client_transition_state(data):  # noqa: F811
    """transition=(3, 1, 0, 5) with reshape on fresh feeders (2 of them):
    each of 2 workers x 2 replicas gets the rest of epoch 0 as the old 3 x 1
    plans' steps cut 4 ways, then the 2 x 2 plan; its state records the
    transition and counts from the change, and a new client continues there
    exactly (a client without the transition is refused by the feeders)."""
    files, ids = data
    keys = {"shuffle": {"buffer": 16, "seed": 3, "reshuffle_each_epoch": True}, "epochs": 2}
    f = Feeders("state-transition", files, 2, **keys)
    W, R, K, X = 2, 2, 9, (3, 1, 0, 5)
    T = len([x for x in test_client.bed.reference(f.job, [len(x) for x in ids], 3, 1)[0] if x["epoch"] == 0])
    try:
        heads, saved = {}, {}
        for w in range(W):
            with sluice.Client(f.eps, f.job["name"], worker=w, workers=W, replicas=R, heartbeat_ms=200, credits=4,
                               transition=X, reshape=True) as c:
                heads[w] = [next(c) for _ in range(K)]
                saved[w] = json.dumps(c.state_dict())
                assert operator.length_hint(c, -1) == -1  # the old shape's steps per epoch not known here
        assert json.loads(saved[0]) == {"version": 1, "job": f.job["name"], "worker": 0, "workers": W,
                                        "replicas": R, "steps_per_epoch": 50, "epochs": 2, "position": K * R,
                                        "transition": [3, 1, 0, 5, None]}
        with pytest.raises(sluice.Error) as e:
            sluice.Client(f.eps, f.job["name"], worker=0, workers=W, replicas=R, heartbeat_ms=200)
        assert "the job's shape changed at step 5 of epoch 0 from 3 x 1; this trainer does not know of the change" \
            in str(e.value)
        tails = {}
        for w in range(W):
            with sluice.Client(f.eps, f.job["name"], worker=w, workers=W, replicas=R, heartbeat_ms=200,
                               transition=X) as c:
                state = json.loads(saved[w])
                state["transition"][4] = T  # the old shape's steps per epoch, known to this state
                c.load_state_dict(state)
                assert c.position == K * R
                # the T - 5 steps of epoch 0 after the change and epoch 1's 50, less the K taken
                assert operator.length_hint(c) == T - 5 + 50 - K
                tails[w] = list(c)
                assert len(tails[w]) == T - 5 + 50 - K
                assert c.state_dict()["transition"] == [3, 1, 0, 5, T]
        assert f.wait() == [0, 0]
    finally:
        f.stop()
    for w in range(W):
        assert flat(heads[w]) + flat(tails[w]) == transition_ids(f.job, ids, (3, 1), (W, R), w, 0, 5), "worker %d" % w


def test_client_load_after_the_end_streams_again(data):  # noqa: F811
    """A client whose stream ended goes back to an earlier state and gets
    the stream from there again (the end was the old connection's). Worker
    1 stays connected meanwhile, so the feeder, which stops once every
    worker has had its end, is still there."""
    files, ids = data
    f = Feeders("state-again", files, 1, epochs=1)
    try:
        other = sluice.Client(f.eps, f.job["name"], worker=1, workers=2, heartbeat_ms=200, credits=2)
        with sluice.Client(f.eps, f.job["name"], worker=0, workers=2, heartbeat_ms=200) as c:
            head = [next(c) for _ in range(5)]
            mid = c.state_dict()
            tail = list(c)
            assert list(c) == [] and operator.length_hint(c) == 0
            c.load_state_dict(mid)
            assert operator.length_hint(c) == len(tail)
            again = list(c)
            assert len(again) == len(tail)
        other_steps = list(other)
        other.close()
        assert f.wait() == [0]
    finally:
        f.stop()
    assert mid["position"] == 5
    assert flat(again) == flat(tail)
    want = want_ids(f.job, ids, 2, 1)
    assert flat(head) + flat(tail) == want[0] and flat(other_steps) == want[1]


def test_client_length_hint(data):  # noqa: F811
    """The steps left in a finite stream; none for an endless one (a Client
    is an iterator over the rest of the stream: no len())."""
    files, _ = data
    f = Feeders("state-hint", files, 1, epochs=2)
    g = Feeders("state-hint-forever", files, 1, epochs=0)
    try:
        with sluice.Client(f.eps, f.job["name"], replicas=2, heartbeat_ms=200) as c:
            assert c.steps_per_epoch == 38 and operator.length_hint(c) == 76
            for _ in range(7):
                next(c)
            assert operator.length_hint(c) == 69
            assert sum(1 for _ in c) == 69 and operator.length_hint(c) == 0
            with pytest.raises(TypeError):
                len(c)
        assert operator.length_hint(c, -1) == -1  # closed
        with sluice.Client(g.eps, g.job["name"], heartbeat_ms=200) as c:
            assert c.epochs == 0 and operator.length_hint(c, -1) == -1
            next(c)
    finally:
        f.stop()
        g.stop()


# (the state, the exception, its message after "sluice.Client.load_state_dict: ")
HOSTILE = [
    ([1, 2], TypeError, "a state is a dict (from state_dict()), not list"),
    (None, TypeError, "a state is a dict (from state_dict()), not NoneType"),
    ({}, ValueError, "not a sluice state: no 'version' key (keys: none)"),
    ({"position": 4}, ValueError, "not a sluice state: no 'version' key (keys: 'position')"),
    ({"k%02d" % i: 0 for i in range(20)}, ValueError,
     "not a sluice state: no 'version' key (keys: 'k00', 'k01', 'k02', 'k03', 'k04', 'k05', 'k06', 'k07', ...)"),
    (state(version=2), ValueError, "state version 2: this sluice (%s) reads version 1" % sluice.version),
    (state(version="1"), ValueError, "state version '1': this sluice (%s) reads version 1" % sluice.version),
    (state(version=True), ValueError, "state version True: this sluice (%s) reads version 1" % sluice.version),
    (state(version="x" * 10 ** 6), ValueError,
     "state version '%s...: this sluice (%s) reads version 1" % ("x" * 56, sluice.version)),
    ({"version": 1}, ValueError,
     "the state lacks 'job', 'worker', 'workers', 'replicas', 'steps_per_epoch', 'epochs', 'position'"),
    ({k: v for k, v in state().items() if k != "position"}, ValueError, "the state lacks 'position'"),
    (state(extra=1, other=2), ValueError, "unknown keys in the state: 'extra', 'other'"),
    (state(job=b"j"), TypeError, "state['job']: a str, not bytes"),
    (state(worker=True), TypeError, "state['worker']: an int, not bool"),
    (state(workers=1.0), TypeError, "state['workers']: an int, not float"),
    (state(replicas="1"), TypeError, "state['replicas']: an int, not str"),
    (state(position=None), TypeError, "state['position']: an int, not NoneType"),
    (state(position=4.0), TypeError, "state['position']: an int, not float"),
    (state(steps_per_epoch="38"), TypeError, "state['steps_per_epoch']: an int or None, not str"),
    (state(epochs=[2]), TypeError, "state['epochs']: an int or None, not list"),
    (state(position=-2), ValueError, "state['position']: -2 is out of range (0 to 281474976710656)"),
    (state(position=2 ** 48 + 2), ValueError,
     "state['position']: 281474976710658 is out of range (0 to 281474976710656)"),
    (state(position=10 ** 30), ValueError,
     "state['position']: 1000000000000000000000000000000 is out of range (0 to 281474976710656)"),
    (state(worker=-1), ValueError, "state['worker']: -1 is out of range (0 to 4294967294)"),
    (state(workers=0), ValueError, "state['workers']: 0 is out of range (1 to 4294967295)"),
    (state(replicas=65537), ValueError, "state['replicas']: 65537 is out of range (1 to 65536)"),
    (state(epochs=-1), ValueError, "state['epochs']: -1 is out of range (0 to 18446744073709551615)"),
    (state(steps_per_epoch=2 ** 64), ValueError,
     "state['steps_per_epoch']: 18446744073709551616 is out of range (0 to 18446744073709551615)"),
    (state(job="other"), ValueError, "the state is another reader's: job 'other' (this reader's: 'job-j')"),
    (state(job="o" * 100), ValueError,
     "the state is another reader's: job '%s... (this reader's: 'job-j')" % ("o" * 56)),
    (state(worker=1, workers=2), ValueError,
     "the state is another reader's: worker 1 (this reader's: 0), workers 2 (this reader's: 1)"),
    (state(workers=3), ValueError, "the state is another reader's: workers 3 (this reader's: 1)"),
    (state(replicas=2), ValueError, "the state is another reader's: replicas 2 (this reader's: 1)"),
    (state(position=77), ValueError, "state['position']: 77 is past the end of the job (2 epochs of 38 steps of 1 "
                                     "replicas: 76 pieces)"),
    (state(steps_per_epoch=40), ValueError,
     "the state was saved under another plan of the job: steps_per_epoch 40 (the feeders announce 38)"),
    (state(steps_per_epoch=40, epochs=3), ValueError,
     "the state was saved under another plan of the job: steps_per_epoch 40 (the feeders announce 38), "
     "epochs 3 (the feeders announce 2)"),
]


def test_hostile_states_refused(data):  # noqa: F811
    """Each hostile state is refused with its message, and the client goes
    on where it was; then a good state still works."""
    files, ids = data
    f = Feeders("j", files, 1)
    try:
        with sluice.Client(f.eps, "job-j", heartbeat_ms=200) as c:
            assert (c.steps_per_epoch, c.epochs) == (38, 2)
            head = [next(c) for _ in range(3)]
            for bad, exc, msg in HOSTILE:
                with pytest.raises(exc) as e:
                    c.load_state_dict(bad)
                assert str(e.value) == "sluice.Client.load_state_dict: " + msg, bad
                assert not c.closed and c.position == 3
            head.append(next(c))
            # the state's job plan unknown (None: a dataset that never
            # opened) is not checked against the feeders'
            c.load_state_dict(state(steps_per_epoch=None, epochs=None, position=2))
            tail = list(c)
    finally:
        f.stop()
    want = want_ids(f.job, ids, 1, 1)[0]
    assert flat(head) == want[:4] and flat(tail) == want[2:]


def test_client_closed_state(data):  # noqa: F811
    files, _ = data
    f = Feeders("j", files, 1, epochs=1)
    try:
        c = sluice.Client(f.eps, "job-j", heartbeat_ms=200)
        c.close()
        with pytest.raises(ValueError, match="^state_dict: the client is closed$"):
            c.state_dict()
        # a closed client opens again at the state's position
        c.load_state_dict(state(epochs=1, position=36))
        assert [s.step for s in c] == [36, 37]
        c.close()
    finally:
        f.stop()
