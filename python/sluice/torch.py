"""sluice for PyTorch: a job's stream as a torch IterableDataset.

    import torch, sluice.torch
    ds = sluice.torch.IterableDataset(feeders=["tcp://feeder0:5555"], job="fmnist-train",
                                      worker=rank, workers=world_size)
    for batch in torch.utils.data.DataLoader(ds, batch_size=None):
        images, labels = batch["image"], batch["label"]   # torch.Tensor

Each item is one step: with replicas=1 a dict (feature name ->
torch.Tensor), else a list of such dicts, one per replica; each iteration
over the dataset is one epoch of the job. The tensors share the received
memory (no copy). Batching, sharding, shuffling and
prefetching happen in the feeders, so use batch_size=None and
num_workers=0 (the default): a DataLoader worker process would open a
second client for the same trainer worker, which the feeders refuse.
"""
import threading
import warnings

import torch
import torch.utils.data

from . import Client, _check_announced, _check_state, _state, _state_transition, is_bfloat16

__all__ = ["IterableDataset", "to_torch"]


def _other_shape(state, workers, replicas):
    """(workers, replicas) of a state saved with another shape than the
    reader's; None for the same shape, or a state that is not one (its
    checks then say what is wrong)."""
    try:
        w, r = state["workers"], state["replicas"]
    except (TypeError, KeyError):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (w, r)) or (w, r) == (workers, replicas):
        return None
    return w, r


def to_torch(arrays, pin_memory=False):
    """{name: numpy.ndarray} -> {name: torch.Tensor}, sharing memory (an
    array whose data is not aligned for its type is copied first). A
    float16 tensor is torch.float16; a bfloat16 one (numpy: uint16 bits of
    dtype sluice.bfloat16) is torch.bfloat16, the same memory viewed."""
    out = {}
    for name, a in arrays.items():
        if not a.flags.aligned:
            a = a.copy()
        if is_bfloat16(a):  # torch reads no uint16 array: its bits as int16, viewed as bfloat16
            t = torch.from_numpy(a.view("<i2")).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a)
        if pin_memory:
            t = t.pin_memory()
        out[name] = t
    return out


class IterableDataset(torch.utils.data.IterableDataset):
    """One trainer worker's stream, an epoch per iteration (see
    sluice.Client for the options: feeders, job, worker, workers,
    replicas, ...).

    The first iteration opens the client; each iteration yields the steps
    of one epoch (up to its last step) and the client stays open for the
    next, so `for epoch in range(E): for batch in loader:` follows the
    job's epochs. Between iterations (evaluation, checkpoints) a
    background thread keeps the connections alive, so the feeders do not
    drop this trainer for silence. After the stream's last epoch an
    iteration yields nothing. close() (or the end of the stream) closes
    the client. `position` is the client's position (save it; pass it as
    resume_seq to continue there). pin_memory=True pins each tensor in
    page-locked memory (needs CUDA: without it a warning is given once and
    tensors are not pinned), as DataLoader(pin_memory=True) would.

    state_dict() / load_state_dict() save and restore where the stream
    stands (as sluice.Client's: a few ints, valid in another process),
    for a checkpoint of the model and the data together. len() is the
    steps of one epoch (one full pass) of a finite job, as the feeders
    announce it (it connects if no iteration has yet); an endless job
    (epochs 0) has no len(): TypeError."""

    def __init__(self, feeders, job, pin_memory=False, *, worker=0, workers=1, replicas=1, credits=None,
                 heartbeat_ms=None, timeout_ms=None, connect_timeout_ms=None, reconnect_ms=None, takeover_ms=None,
                 no_shm=False, resume_seq=0, curve_key=None, curve_server_keys=None, lend=False,
                 metrics_listen=None):
        super().__init__()
        self.feeders = [feeders] if isinstance(feeders, str) else list(feeders)
        self.job = job
        # sluice.Client's options (resume_seq: self.position, at each open)
        self.options = dict(worker=worker, workers=workers, replicas=replicas, credits=credits,
                            heartbeat_ms=heartbeat_ms, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms,
                            reconnect_ms=reconnect_ms, takeover_ms=takeover_ms, no_shm=no_shm,
                            curve_key=curve_key, curve_server_keys=curve_server_keys, lend=lend,
                            metrics_listen=metrics_listen)
        self.replicas = int(replicas)
        self.pin_memory = bool(pin_memory)
        self.position = int(resume_seq)
        self.steps_per_epoch = None  # known once the first iteration opened the client
        self.epochs = None  # the job's epochs (0: forever), known then too
        self.epoch = None  # the epoch of the last step yielded
        self._client = None
        self._ended = False
        self._warned = False
        self._idle = None  # (thread, stop event) keeping the client alive between iterations
        self._idle_error = None  # what the keep-alive thread met, raised at the next iteration
        self._expect = (None, None)  # a loaded state's (steps_per_epoch, epochs): checked at the next open
        self._epoch_start = None  # a loaded state of another shape: the epoch to start at, with reshape
        # the stream's mid-epoch change of shape: [from_workers, from_replicas, from_epoch, from_step,
        # from_steps_per_epoch] (a loaded state's, or one made by loading another shape's state mid-epoch)
        self._transition = None
        self._changing = False  # the next open makes that change (reshape)

    def _pin(self):
        if not self.pin_memory:
            return False
        if torch.cuda.is_available():
            return True
        if not self._warned:
            warnings.warn("sluice.torch: pin_memory=True but CUDA is not available: tensors are not pinned")
            self._warned = True
        return False

    def _keep_alive(self, stop):
        try:
            # the only user of the client meanwhile: close() and __iter__
            # stop and join this thread before they touch it
            while not stop.is_set():
                self._client.keepalive(100)
        except Exception as e:  # noqa: BLE001 - reported at the next iteration
            self._idle_error = e

    def _join_idle(self):
        if self._idle is not None:
            thread, stop = self._idle
            stop.set()
            thread.join()
            self._idle = None

    def _stop_idle(self):
        self._join_idle()
        err, self._idle_error = self._idle_error, None
        if err is not None:
            self.close()
            raise err

    @property
    def metrics_url(self):
        """Where metrics_listen serves /metrics while the client is open
        (from the first iteration to the stream's end or close()); None
        otherwise."""
        return self._client.metrics_url if self._client is not None else None

    def _ids(self):
        """(job, worker, workers, replicas), as a state names them."""
        o = self.options
        return (self.job, 0 if o["worker"] is None else o["worker"], 1 if o["workers"] is None else o["workers"],
                self.replicas)

    def _open(self):
        """Open the client at self.position (a loaded state's plan checked
        against the feeders' announcement)."""
        if self._epoch_start is not None:  # another shape's state: this shape's plan from that epoch on
            client = Client(self.feeders, self.job, resume_epoch=self._epoch_start, reshape=True, **self.options)
        else:  # with a transition, position counts from the change (0: this open makes it)
            client = Client(self.feeders, self.job, resume_seq=self.position, reshape=self._changing,
                            transition=None if self._transition is None else tuple(self._transition[:4]),
                            **self.options)
        try:
            _check_announced("sluice.torch.IterableDataset.load_state_dict", *self._expect, client.steps_per_epoch,
                             client.epochs)
        except ValueError:
            client.close()
            raise
        self._expect = (None, None)
        self._epoch_start = None
        self._changing = False
        self._client = client
        self.position = client.position
        self.steps_per_epoch = client.steps_per_epoch
        self.epochs = client.epochs

    def _start_idle(self):
        stop = threading.Event()
        thread = threading.Thread(target=self._keep_alive, args=(stop,), daemon=True,
                                  name="sluice-keepalive")
        self._idle = (thread, stop)
        thread.start()

    def state_dict(self):
        """Where the stream stands, to save with a checkpoint (the model's
        state beside it): {"version": 1, "job", "worker", "workers",
        "replicas", "steps_per_epoch", "epochs", "position"} (ints and the
        job's name), position being the first piece not yet yielded. Taken
        in the loop's body, after the step's batch is trained on, it
        resumes at the step after that one. steps_per_epoch and epochs are
        None before any iteration (no client opened yet). After a
        mid-epoch change of shape (load_state_dict of another shape's
        state) it has "transition" too, [from_workers, from_replicas,
        from_epoch, from_step, from_steps_per_epoch], and position counts
        from that change."""
        steps, epochs = self._expect
        if self.steps_per_epoch is not None:
            steps, epochs = self.steps_per_epoch, self.epochs
        return _state(*self._ids(), self.position, steps, epochs, self._transition)

    def load_state_dict(self, state):
        """Continue at a state_dict()'s position, in this process or another:
        the next iteration opens the client there and yields the rest of
        that epoch (or, at an epoch's end, the next epoch). The state is
        checked at once (version, keys, types, and that it is this job's,
        worker's, workers' and replicas': ValueError or TypeError saying
        what differs), and against the plan the feeders announce when the
        client opens. An open client is closed (call it between
        iterations).

        A state of another workers or replicas count (the job restarted
        with another shape) is taken at an epoch's start (the next
        iteration asks the feeders for this shape's plan from that epoch
        on: resume_epoch with reshape, docs/semantics.md 5.2) or in the
        middle of an epoch, at step t of epoch e: the next iteration makes
        the change there (transition=(W, R, e, t) with reshape): the rest
        of epoch e cut into this shape's pieces, then its plan. Refused
        (ValueError saying where it stands): a second change within the
        epoch of the state's own change, and a state whose epochs' ends are
        not known."""
        who = "sluice.torch.IterableDataset.load_state_dict"
        job, worker, workers, replicas = self._ids()
        other = _other_shape(state, workers, replicas)
        if other is not None:
            self._load_other_shape(state, who, other)
            return
        position, steps, epochs = _check_state(state, who, job, worker, workers, replicas)
        if self.steps_per_epoch is not None:  # this dataset has met the feeders: check now
            _check_announced("sluice.torch.IterableDataset.load_state_dict", steps, epochs, self.steps_per_epoch,
                             self.epochs)
        self.close()
        self._idle_error = None
        self.position = position
        self._expect = (steps, epochs)
        self._epoch_start = None
        self._transition = _state_transition(state)
        self._changing = False
        self._ended = False
        self.epoch = None

    def _load_other_shape(self, state, who, shape):
        """load_state_dict of a state saved with another (workers, replicas)."""
        s_workers, s_replicas = shape
        # every check of a state, for the reader it was saved by (its own worker)
        position, steps, epochs = _check_state(state, who, self.job, state["worker"], s_workers, s_replicas)
        if state["worker"] >= s_workers:
            raise ValueError("%s: the state's worker %d is not one of its %d workers" % (who, state["worker"],
                                                                                        s_workers))
        if not steps:
            raise ValueError("%s: the state of %d workers x %d replicas does not say its steps per epoch (saved "
                             "before any iteration): where its epochs end is not known" % (who, s_workers, s_replicas))
        x = _state_transition(state)
        k = position // s_replicas  # steps taken in the state's stream (from its change, with one)
        if x is None:
            epoch, step, T = k // steps, k % steps, steps
        elif x[4] is None:
            raise ValueError("%s: the state's stream changed shape at step %d of epoch %d without saying that "
                             "epoch's steps: where its epochs end is not known" % (who, x[3], x[2]))
        elif k < x[4] - x[3]:
            epoch, step, T = x[2], x[3] + k, x[4]
        else:
            epoch, step, T = x[2] + 1 + (k - (x[4] - x[3])) // steps, (k - (x[4] - x[3])) % steps, steps
        if epochs and epoch > epochs:
            raise ValueError("%s: state['position']: epoch %d is past the end of the job (%d epochs)"
                             % (who, epoch, epochs))
        if step != 0 and x is not None and epoch == x[2]:
            raise ValueError("%s: the state was saved with %d workers x %d replicas at step %d of %d of epoch %d, "
                             "the epoch in which the job's shape already changed (at step %d, from %d x %d): a "
                             "second change within epoch %d is refused: change again at epoch %d's start (a "
                             "state saved at epoch %d's end)" % (who, s_workers, s_replicas, step, T, epoch, x[3],
                                                                 x[0], x[1], epoch, epoch + 1, epoch))
        self.close()
        self._idle_error = None
        self.position = 0
        self._expect = (None, epochs)  # this shape's steps per epoch are the feeders' to say
        self._ended = False
        self.epoch = None
        if step == 0:  # an epoch's start: this shape's plan from there
            self._epoch_start = epoch
            self._transition = None
            self._changing = False
        else:  # mid-epoch: the rest of the epoch cut for this shape (the old plan there is plain)
            self._epoch_start = None
            self._transition = [s_workers, s_replicas, epoch, step, steps]
            self._changing = True

    def __len__(self):
        """The steps (items) of one epoch, one full pass: what the feeders
        announce for this worker (the plan's steps; sluice.plan's
        "steps"). Connects to learn it when no client has been open yet.
        TypeError for an endless job (epochs 0), as for any unsized
        iterable."""
        if self.steps_per_epoch is None:
            self._stop_idle()
            self._open()
            self._start_idle()
        if self.epochs == 0:
            raise TypeError("sluice.torch.IterableDataset of job %r has no len(): the job is endless (epochs 0)"
                            % self.job)
        if self.steps_per_epoch == 0:
            raise TypeError("sluice.torch.IterableDataset of job %r has no len(): its feeders do not know the "
                            "steps per epoch in advance" % self.job)
        return self.steps_per_epoch

    def __bool__(self):
        return True  # not len(): truth must not connect

    def close(self):
        """Close the client (the feeders are told goodbye)."""
        self._join_idle()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _warn_ended(self):
        """A pass past the job's last epoch: say so rather than yield
        nothing without a word."""
        warnings.warn("sluice.torch.IterableDataset: the stream of job %r ended after its last epoch (%s epochs of "
                      "%s steps): this pass yields nothing; raise the job's 'epochs', load_state_dict() to go "
                      "back, or serve a new run (sluice.Feeder(serve_runs=True))"
                      % (self.job, self.epochs, self.steps_per_epoch), RuntimeWarning, stacklevel=3)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError("sluice.torch.IterableDataset: use num_workers=0 or 1 in the DataLoader: "
                               "each DataLoader worker would connect as the same trainer worker, which "
                               "the feeders refuse (the feeders already read, decode and batch in parallel)")
        self._stop_idle()
        if self._ended:
            self._warn_ended()
            return
        pin = self._pin()
        if self._client is None:
            self._open()
        client = self._client
        yielded = False
        try:
            while True:
                try:
                    step = next(client)
                except StopIteration:
                    self._ended = True
                    self.close()
                    if not yielded:
                        self._warn_ended()
                    return
                yielded = True
                self.position = client.position
                self.epoch = step.epoch
                if self.replicas == 1:
                    yield to_torch(step.replicas[0], pin)
                else:
                    yield [to_torch(r, pin) for r in step.replicas]
                if step.last_step:
                    break
        except BaseException:
            self.close()
            raise
        self._start_idle()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
