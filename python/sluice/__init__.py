"""sluice for Python: receive a job's stream from sluice feeders.

    import sluice
    with sluice.Client(feeders=["tcp://feeder0:5555"], job="fmnist-train",
                       worker=0, workers=2) as client:
        for step in client:
            images = step.replicas[0]["image"]   # numpy.ndarray, (rows, 784) uint8
            labels = step.replicas[0]["label"]   # numpy.ndarray, (rows,) int64

Each step's arrays are views over the received bytes (no copy) and stay
valid for as long as any of them lives; the feeders' flow control does not
wait for them. sluice.torch has an IterableDataset for PyTorch.
docs/python.md in the repository has the whole API.
"""
import json
import os
import shutil
import subprocess
from collections.abc import Mapping

from ._sluice import Error, Step, bfloat16, version  # noqa: F401
from ._sluice import Client as _CClient
from ._sluice import LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR, log_setup as _log_setup
from ._sluice import tf_config as _tf_config

__all__ = ["Client", "Error", "Step", "bfloat16", "bfloat16_to_float32", "is_bfloat16", "plan", "set_log_level",
           "version"]
__version__ = version

_LEVELS = {"debug": LOG_DEBUG, "info": LOG_INFO, "warning": LOG_WARNING, "error": LOG_ERROR}


def set_log_level(level, fd=2):
    """Where the library's log lines go (a feeder lost, taken over, back):
    level "debug", "info", "warning" (the default from Python) or "error",
    or None for none; fd 2 (stderr) by default."""
    if level is None:
        _log_setup("sluice", -1, LOG_ERROR)
        return
    if level not in _LEVELS:
        raise ValueError("log level %r: one of %s, or None" % (level, ", ".join(_LEVELS)))
    _log_setup("sluice", int(fd), _LEVELS[level])


set_log_level(os.environ.get("SLUICE_LOG_LEVEL", "warning"))


class Client(_CClient):
    """The stream of one trainer worker: worker `worker` of `workers`, with
    `replicas` pieces per step, from every feeder of `job` (`feeders`:
    their endpoints, feeder j at index j, e.g. "tcp://host:5555" or
    "ipc:///run/sluice/f0.sock").

    Iterating gives sluice.Step objects until the end of the stream:
    .step, .epoch, .seq, .last_step, .replicas (one dict per replica,
    feature name -> numpy.ndarray, rows first) and .rows. Errors raise
    sluice.Error with the C library's message (the feeder, and for damaged
    data the file and byte offset). Options as in the C library
    (docs/client.md): credits, heartbeat_ms, timeout_ms,
    connect_timeout_ms, reconnect_ms, takeover_ms, no_shm, resume_seq
    (a Client.position saved earlier), curve_key and curve_server_keys
    (CURVE key files). Opening connects and waits for every feeder.

    Each step's arrays are the process's own and writable: a step in a
    feeder's shared memory is copied out once. With lend=True it is not:
    the arrays are read-only views of the feeder's memory, lent until the
    step's last array goes (a loop that lets each step go within a few
    steps); steps kept longer are copied out where they lie, and later
    ones copied (docs/python.md, "Lent steps").

    resume_epoch=E starts at the first piece of epoch E (the feeders say
    where it is for this client's shape; resume_seq stays 0), and
    reshape=True asks the feeders to serve this client's workers x
    replicas instead of the shape the job ran with, at an epoch's start
    once no trainer of the old shape is heard from (docs/semantics.md,
    5.2).

    transition=(W, R, e, t) says the job's shape changed mid-epoch: W x R
    trainers took steps 0..t-1 of epoch e (t >= 1) and this client's shape
    takes the rest (docs/semantics.md 5.2). Every HELLO says so, and
    resume_seq counts this worker's pieces from the change (0: its first
    piece); with reshape=True this client makes the change. Not with
    resume_epoch. state_dict() records it, and load_state_dict() of that
    state continues with it.

    metrics_listen="HOST:PORT" serves /metrics there while the client is
    open (port 0: any free one; metrics_url says where), with
    sluice-trainer's input families, so the job shows on the Grafana
    dashboard (docs/operations.md).
    """

    def __init__(self, feeders, job, *, worker=0, workers=1, replicas=1, credits=None, heartbeat_ms=None,
                 timeout_ms=None, connect_timeout_ms=None, reconnect_ms=None, takeover_ms=None, no_shm=False,
                 resume_seq=0, curve_key=None, curve_server_keys=None, lend=False, metrics_listen=None,
                 resume_epoch=0, reshape=False, transition=None):
        # (None: the C library's default, docs/client.md)
        if isinstance(feeders, str):
            feeders = [feeders]
        self._job, self._worker, self._workers = job, worker, workers  # for repr
        # what load_state_dict checks a state against and reopens with
        self._feeders = list(feeders)
        self._ids = (job, 0 if worker is None else worker, 1 if workers is None else workers,
                     1 if replicas is None else replicas)
        self._options = dict(worker=worker, workers=workers, replicas=replicas, credits=credits,
                             heartbeat_ms=heartbeat_ms, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms,
                             reconnect_ms=reconnect_ms, takeover_ms=takeover_ms, no_shm=no_shm,
                             curve_key=curve_key, curve_server_keys=curve_server_keys, lend=lend)
        super().__init__(list(feeders), job, worker=worker, workers=workers, replicas=replicas, credits=credits,
                         heartbeat_ms=heartbeat_ms, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms,
                         reconnect_ms=reconnect_ms, takeover_ms=takeover_ms, no_shm=no_shm, resume_seq=resume_seq,
                         curve_key=curve_key, curve_server_keys=curve_server_keys, lend=lend,
                         metrics_listen=metrics_listen, resume_epoch=resume_epoch, reshape=reshape,
                         transition=transition)
        # checked by the library: four ints in range (the old steps per epoch unknown here: None)
        self._transition = None if transition is None else [int(x) for x in transition] + [None]

    @classmethod
    def from_tf_config(cls, job, tf_config=None, *, replicas=1, credits=None, heartbeat_ms=None, timeout_ms=None,
                       connect_timeout_ms=None, reconnect_ms=None, takeover_ms=None, no_shm=False, resume_seq=0,
                       curve_key=None, curve_server_keys=None, lend=False, metrics_listen=None):
        """A client for this task of TF_CONFIG (the environment variable, or
        `tf_config`: its JSON text or a dict), read by the C library as
        sluice's binaries read it: cluster["feeder"] lists the feeders (a
        bare host:port becomes tcp://host:port), the chief (if any) is
        worker 0 and worker[i] worker i + 1 (without a chief, worker i), and
        task {"type", "index"} says which one this is. ValueError says what
        is wrong and where."""
        if isinstance(tf_config, dict):
            tf_config = json.dumps(tf_config)
        feeders, worker, workers = _tf_config(tf_config)
        return cls(feeders, job, worker=worker, workers=workers, replicas=replicas, credits=credits,
                   heartbeat_ms=heartbeat_ms, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms,
                   reconnect_ms=reconnect_ms, takeover_ms=takeover_ms, no_shm=no_shm, resume_seq=resume_seq,
                   curve_key=curve_key, curve_server_keys=curve_server_keys, lend=lend,
                   metrics_listen=metrics_listen)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def state_dict(self):
        """Where the stream stands, to save with a checkpoint: a small dict
        of ints (and the job's name), {"version": 1, "job", "worker",
        "workers", "replicas", "steps_per_epoch", "epochs", "position"},
        position being the seq of the first piece not handed out yet
        (replica r of the next step is piece position + r). Valid in
        another process and with any number of feeders;
        load_state_dict() continues exactly there."""
        if self.closed:
            raise ValueError("state_dict: the client is closed")
        return _state(*self._ids, self.position, self.steps_per_epoch, self.epochs, self._transition)

    def load_state_dict(self, state):
        """Continue at a state_dict()'s position: the state is checked
        (its version, keys and types, and that it is this job's, worker's,
        workers' and replicas', and of the plan the feeders announce:
        ValueError or TypeError saying what differs), then the client
        reconnects there (an open client says goodbye first)."""
        who = "sluice.Client.load_state_dict"
        position, steps, epochs = _check_state(state, who, *self._ids)
        transition = _state_transition(state)
        if not self.closed:
            _check_announced(who, steps, epochs, self.steps_per_epoch, self.epochs)
            self.close()
        super().__init__(self._feeders, self._job, resume_seq=position,
                         transition=None if transition is None else tuple(transition[:4]), **self._options)
        self._transition = transition
        try:
            _check_announced(who, steps, epochs, self.steps_per_epoch, self.epochs)
        except ValueError:
            self.close()
            raise

    def __length_hint__(self):
        """The steps left to hand out in a finite stream (NotImplemented
        for an endless one, or a closed client): an iterator over the rest
        of the stream has no len(); sluice.torch.IterableDataset, an epoch
        per pass, has."""
        if self.closed or self.epochs == 0 or self.steps_per_epoch == 0:
            return NotImplemented
        x = self._transition
        if x is not None:  # position counts from the change: the transition epoch's steps left, then whole epochs
            if x[4] is None:
                return NotImplemented  # that epoch's steps are not known here
            return max(0, (x[4] - x[3]) + (self.epochs - x[2] - 1) * self.steps_per_epoch -
                       self.position // self.replicas_per_step)
        return max(0, self.epochs * self.steps_per_epoch - self.position // self.replicas_per_step)

    def __repr__(self):
        """<sluice.Client job='J' worker=W/N replicas=R position=P epochs=E
        steps_per_epoch=S>, or <sluice.Client job='J' worker=W/N closed>."""
        head = "<sluice.Client job=%r worker=%s/%s" % (self._job, self._worker, self._workers)
        if self.closed:
            return head + " closed>"
        return "%s replicas=%d position=%d epochs=%d steps_per_epoch=%d>" % (
            head, self.replicas_per_step, self.position, self.epochs, self.steps_per_epoch)


# ---- state_dict: where a stream stands (docs/python.md, "Checkpoints") ----

_STATE_VERSION = 1
_STATE_KEYS = ("version", "job", "worker", "workers", "replicas", "steps_per_epoch", "epochs", "position")
_MAX_POSITION = 1 << 48  # the most a feeder resumes at (docs/protocol.md, "Resume")


def _state(job, worker, workers, replicas, position, steps_per_epoch, epochs, transition=None):
    """A state_dict: steps_per_epoch and epochs as the feeders announced
    them (None: not known yet, no client opened); with a transition (a
    mid-epoch change of shape) its key too, [from_workers, from_replicas,
    from_epoch, from_step, from_steps_per_epoch or None], and position then
    counts from the change. A state without one has no such key (any
    reader of version 1 reads it)."""
    out = {"version": _STATE_VERSION, "job": job, "worker": worker, "workers": workers, "replicas": replicas,
           "steps_per_epoch": steps_per_epoch, "epochs": epochs, "position": position}
    if transition is not None:
        out["transition"] = list(transition)
    return out


def _state_transition(state):
    """A checked state's transition (a list of five), or None."""
    x = state.get("transition")
    return None if x is None else list(x)


def _check_transition(state, who):
    """state['transition'], when there: None, or [from_workers (1..65536),
    from_replicas (1..1024), from_epoch (<= 2^48), from_step (1..2^48, below
    from_steps_per_epoch), from_steps_per_epoch (2..2^48, or None: not
    known)]."""
    x = state.get("transition")
    if x is None:
        return
    if not isinstance(x, (list, tuple)):
        raise TypeError("%s: state['transition']: a list, not %s" % (who, type(x).__name__))
    if len(x) != 5:
        raise ValueError("%s: state['transition']: %d values; it is [from_workers, from_replicas, from_epoch, "
                         "from_step, from_steps_per_epoch]" % (who, len(x)))
    names = ("from_workers", "from_replicas", "from_epoch", "from_step", "from_steps_per_epoch")
    ranges = ((1, 65536), (1, 1024), (0, _MAX_POSITION), (1, _MAX_POSITION), (2, _MAX_POSITION))
    for i, (name, (lo, hi)) in enumerate(zip(names, ranges)):
        v = x[i]
        if v is None and i == 4:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("%s: state['transition'][%d] (%s): an int%s, not %s"
                            % (who, i, name, " or None" if i == 4 else "", type(v).__name__))
        if v < lo or v > hi:
            raise ValueError("%s: state['transition'][%d] (%s): %d is out of range (%d to %d)"
                             % (who, i, name, v, lo, hi))
    if x[4] is not None and x[3] >= x[4]:
        raise ValueError("%s: state['transition']: step %d is not within an epoch of %d steps"
                         % (who, x[3], x[4]))


def _short(v):
    """repr(v), cut to 60 characters (a hostile state's values go into messages)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _state_int(state, key, who, lo, hi, none_ok=False):
    v = state[key]
    if v is None and none_ok:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s: state[%r]: an int%s, not %s" % (who, key, " or None" if none_ok else "",
                                                              type(v).__name__))
    if v < lo or v > hi:
        raise ValueError("%s: state[%r]: %d is out of range (%d to %d)" % (who, key, v, lo, hi))
    return v


def _check_state(state, who, job, worker, workers, replicas):
    """A state_dict() checked for a reader of (job, worker, workers,
    replicas): (position, steps_per_epoch, epochs), or TypeError /
    ValueError naming the key and what is wrong or differs."""
    if not isinstance(state, Mapping):
        raise TypeError("%s: a state is a dict (from state_dict()), not %s" % (who, type(state).__name__))
    if "version" not in state:
        keys = sorted(_short(k) for k in state)
        raise ValueError("%s: not a sluice state: no 'version' key (keys: %s)"
                         % (who, ", ".join(keys[:8] + (["..."] if len(keys) > 8 else [])) or "none"))
    v = state["version"]
    if isinstance(v, bool) or not isinstance(v, int) or v != _STATE_VERSION:
        raise ValueError("%s: state version %s: this sluice (%s) reads version %d" % (who, _short(v), version,
                                                                                      _STATE_VERSION))
    missing = [k for k in _STATE_KEYS if k not in state]
    if missing:
        raise ValueError("%s: the state lacks %s" % (who, ", ".join(repr(k) for k in missing)))
    unknown = sorted(_short(k) for k in state if k not in _STATE_KEYS and k != "transition")
    if unknown:
        raise ValueError("%s: unknown keys in the state: %s" % (who, ", ".join(unknown[:8] + (
            ["... (%d in all)" % len(unknown)] if len(unknown) > 8 else []))))
    if not isinstance(state["job"], str):
        raise TypeError("%s: state['job']: a str, not %s" % (who, type(state["job"]).__name__))
    s_worker = _state_int(state, "worker", who, 0, (1 << 32) - 2)
    s_workers = _state_int(state, "workers", who, 1, (1 << 32) - 1)
    s_replicas = _state_int(state, "replicas", who, 1, 65536)
    steps = _state_int(state, "steps_per_epoch", who, 0, (1 << 64) - 1, none_ok=True)
    epochs = _state_int(state, "epochs", who, 0, (1 << 64) - 1, none_ok=True)
    position = _state_int(state, "position", who, 0, _MAX_POSITION)
    _check_transition(state, who)
    diffs = ["%s %s (this reader's: %s)" % (k, _short(s), _short(mine))
             for k, s, mine in (("job", state["job"], job), ("worker", s_worker, worker),
                                ("workers", s_workers, workers), ("replicas", s_replicas, replicas)) if s != mine]
    if diffs:
        raise ValueError("%s: the state is another reader's: %s" % (who, ", ".join(diffs)))
    if position % s_replicas != 0:
        raise ValueError("%s: state['position']: %d is not a step's first piece (a multiple of replicas %d)"
                         % (who, position, s_replicas))
    if steps and epochs and position > steps * epochs * s_replicas:
        raise ValueError("%s: state['position']: %d is past the end of the job (%d epochs of %d steps of %d "
                         "replicas: %d pieces)" % (who, position, epochs, steps, s_replicas,
                                                   steps * epochs * s_replicas))
    return position, steps, epochs


def _check_announced(who, steps, epochs, now_steps, now_epochs):
    """The plan a state was saved under (steps per epoch, epochs; None:
    not known) against the one the feeders announce now."""
    diffs = ["%s %d (the feeders announce %d)" % (k, s, now)
             for k, s, now in (("steps_per_epoch", steps, now_steps), ("epochs", epochs, now_epochs))
             if s is not None and s != now]
    if diffs:
        raise ValueError("%s: the state was saved under another plan of the job: %s" % (who, ", ".join(diffs)))


def is_bfloat16(a):
    """True for an array a step hands out for a bfloat16 tensor: numpy has
    no bfloat16, so it comes as uint16 (the values' bits) of the dtype
    sluice.bfloat16, whose metadata says {"sluice_dtype": "bfloat16"} (the
    metadata goes with views, slices and copies, not with a single element
    taken out as a numpy scalar). Never compute on the bits: integer
    arithmetic keeps the metadata, but not bfloat16 values."""
    md = getattr(getattr(a, "dtype", None), "metadata", None)
    return bool(md) and md.get("sluice_dtype") == "bfloat16"


def bfloat16_to_float32(a):
    """The float32 values of bfloat16 bits (a uint16 array, e.g. a
    bfloat16 tensor of a step): exact, a new array."""
    import numpy
    a = numpy.asarray(a)
    if a.dtype.kind != "u" or a.dtype.itemsize != 2:
        raise TypeError("bfloat16_to_float32: a uint16 array of bfloat16 bits, not %s" % a.dtype)
    return (a.astype("<u4") << 16).view("<f4")


def _tool(name, build=None):
    """The path of a sluice binary: in `build`, in this package's bin
    (pip's build and the wheel hold sluice-feeder there), beside this
    package's prefix, or on PATH."""
    cands = []
    if build is not None:
        cands.append(os.path.join(build, "feeder" if name == "sluice-feeder" else "tools", name))
    cands.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name))
    env = os.environ.get("SLUICE_BUILD")
    if env:
        cands.append(os.path.join(env, "feeder", name))
    here = os.path.dirname(os.path.abspath(__file__))
    # installed: PREFIX/lib/python3.X/dist-packages/sluice -> PREFIX/bin
    cands.append(os.path.normpath(os.path.join(here, "..", "..", "..", "..", "bin", name)))
    # the build tree: BUILD/python/sluice -> BUILD/feeder
    cands.append(os.path.normpath(os.path.join(here, "..", "..", "feeder", name)))
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError("%s: not found in %s nor on PATH" % (name, ", ".join(cands)))
    return found


def plan(job, workers=1, replicas=1, files=None, sets=(), feeder=None):
    """What the feeders would serve: `sluice-feeder plan --json` for the
    job file `job` (with `files`, a glob, instead of its own list; `sets`:
    KEY=VALUE overrides), as a dict: {"job": name, "workers": [{"worker",
    "steps", "elements", "pieces", "files", "replica_elements"}, ...]}
    (per epoch). `feeder`: the sluice-feeder binary (default: found beside
    this package, or on PATH). Raises sluice.Error with the feeder's
    message when the job cannot be planned."""
    for what, v in (("workers", workers), ("replicas", replicas)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v > 65536:
            raise ValueError("%s: an int from 1 to 65536, not %r" % (what, v))
    cmd = [feeder or _tool("sluice-feeder"), "plan", "--job", os.fspath(job), "--workers", str(workers),
           "--replicas", str(replicas), "--json", "--quiet"]
    if files is not None:
        cmd.append("--files=" + files)
    for kv in sets:
        cmd += ["--set", kv]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        err = Error("plan %s: %s" % (job, r.stderr.strip() or "exit %d" % r.returncode))
        err.code, err.code_name = -3, "invalid"
        raise err
    return json.loads(r.stdout)


from .feeder import Feeder, FeederError, Job  # noqa: E402,F401 (issue #29 item 2: docs/python.md, "Feeders from Python")
