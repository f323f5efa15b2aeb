"""sluice.Feeder and sluice.Job: a feeder process started, watched and
stopped from Python, and a job checked as the feeder checks it.

    import sluice
    job = sluice.Job(name="t", files="data/part-*", format="tfrecord",
                     features={"id": {"dtype": "int64"}}, global_batch_size=8)
    with sluice.Feeder(job, serve_runs=True) as feeder:
        with feeder.client() as client:
            for step in client:
                ...

Both run the sluice-feeder program (not the library): the same checks, the
same messages. docs/python.md, "Feeders from Python", has the whole story.
"""
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref

from . import Client

__all__ = ["Feeder", "FeederError", "Job", "find_feeder"]

# a log line: "2026-12-01T15:59:07.220Z sluice-feeder: info: MSG" (or,
# for a usage error, "sluice-feeder: MSG" with no time and no level), or
# with --log-format json {"time":...,"level":"info","msg":"MSG"}
_LINE = re.compile(r"^(?:\d{4}-\d\d-\d\dT\S+ )?sluice-feeder: (?:(debug|info|warning|error): )?(.*)$")
_METRICS_PORT = re.compile(r"^metrics: serving /metrics on .* \(port (\d+)\)$")


def _lines(text):
    """(level, message) of each line of a feeder's log (level None: a
    usage error's line; other lines are left out)."""
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("msg"), str):
                yield d.get("level"), d["msg"]
            continue
        m = _LINE.match(line)
        if m is not None and not m.group(2).startswith("Try 'sluice-feeder"):
            yield m.group(1), m.group(2)


class FeederError(RuntimeError):
    """A feeder that could not start (or stopped with an error): str(e) is
    the feeder's own message (its last error line), .returncode its exit
    status (None: still running when given up on), .log its whole log."""

    def __init__(self, message, returncode=None, log=""):
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.log = log


def _last_error(text):
    """The message of the last error line of a feeder's log (a usage error
    has no level), or None."""
    found = None
    for level, msg in _lines(text):
        if level in (None, "error"):
            found = msg
    return found


def find_feeder(binary=None):
    """The sluice-feeder program Feeder and Job run: `binary` if given;
    else the package's own (sluice/bin/sluice-feeder, which pip's build
    and the wheel hold); else SLUICE_BUILD's (a build tree, as the tests set it); else the one
    installed with this package (CMake's install: PREFIX/bin beside
    PREFIX/lib/.../sluice; a build tree's: BUILD/feeder beside
    BUILD/python/sluice; a venv's bin); else the first on PATH.
    FileNotFoundError names every place looked at."""
    if binary is not None:
        binary = os.fspath(binary)
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise FileNotFoundError("sluice-feeder: %r is not an executable file" % binary)
        return binary
    name = "sluice-feeder"
    here = os.path.dirname(os.path.abspath(__file__))
    # pip's build and the wheel: sluice/bin (python/setup.py)
    cands = [os.path.join(here, "bin", name)]
    build = os.environ.get("SLUICE_BUILD")
    if build:
        cands.append(os.path.join(build, "feeder", name))
    # the build tree: BUILD/python/sluice -> BUILD/feeder
    cands.append(os.path.normpath(os.path.join(here, "..", "..", "feeder", name)))
    # cmake --install: PREFIX/LIBDIR/python3.X/dist-packages/sluice, LIBDIR
    # lib or lib/<multiarch> -> PREFIX/bin
    up = here
    for _ in range(5):
        up = os.path.dirname(up)
        if os.path.basename(up) == "lib":
            cands.append(os.path.join(os.path.dirname(up), "bin", name))
            break
    # a virtual environment's (or an interpreter's own) bin
    cands.append(os.path.join(sys.prefix, "bin", name))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError("sluice-feeder: not found in %s nor on PATH (binary= names it)" % ", ".join(cands))
    return found


def _check_int(what, v):
    """An int option (not a bool), or None; its bounds are the feeder's
    to check, with its own message."""
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise TypeError("%s: an int, not %r" % (what, v))


class Job:
    """A job (docs/job.md) as a dict, checked by the feeder itself:
    sluice.Job(name=..., files=..., global_batch_size=..., ...) or
    sluice.Job({...}), sluice.Job.from_file(path). Checking runs
    `sluice-feeder plan` on it (the job's keys, its files found and
    scanned), for the job's own workers/replicas or else 1 x 1; a job the
    feeder refuses raises ValueError with the feeder's message (for a dict,
    without the name of the temporary file it was written to). `binary`:
    the sluice-feeder to run (find_feeder). .plan is what the plan said
    (sluice.plan's dict)."""

    def __init__(self, keys=None, /, *, binary=None, **more):
        if keys is None:
            keys = {}
        if not isinstance(keys, dict):
            raise TypeError("Job: a dict of job keys, not %r" % type(keys).__name__)
        d = copy.deepcopy(keys)
        d.update(copy.deepcopy(more))
        try:
            text = json.dumps(d)
        except (TypeError, ValueError) as e:
            raise ValueError("job: not JSON: %s" % e) from None
        self._keys = json.loads(text)
        self._path = None
        self.plan = self._check(binary, None)

    @classmethod
    def from_file(cls, path, *, binary=None):
        """The job in a JSON file, checked (its error messages name the
        file, as the feeder's do)."""
        path = os.fspath(path)
        job = cls.__new__(cls)
        job._path = path
        job.plan = job._check(binary, path)
        with open(path, encoding="utf-8") as f:
            job._keys = json.load(f)
        return job

    def _check(self, binary, path):
        exe = find_feeder(binary)
        tmp = None
        try:
            if path is None:
                tmp = tempfile.mkdtemp(prefix="sluice-job-")
                path = os.path.join(tmp, "job.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(self._keys, f)
            cmd = [exe, "plan", "--job", path, "--json", "--quiet"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 2 and "plan needs --workers and --replicas" in r.stderr:
                # a job without its own shape: planned for 1 x 1
                r = subprocess.run(cmd + ["--workers", "1", "--replicas", "1"], capture_output=True, text=True)
            if r.returncode != 0:
                msg = _last_error(r.stderr) or "sluice-feeder plan: exit status %d" % r.returncode
                if tmp is not None and msg.startswith(path + ": "):
                    msg = msg[len(path) + 2:]
                raise ValueError(msg)
            return json.loads(r.stdout)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    @property
    def name(self):
        """The job's name (what trainers ask for)."""
        return self._keys.get("name")

    def to_dict(self):
        """The job's keys (a copy)."""
        return copy.deepcopy(self._keys)

    def save(self, path):
        """Write the job as a JSON file a feeder reads (--job PATH)."""
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            json.dump(self._keys, f, indent=2)
            f.write("\n")

    def __repr__(self):
        files = self._keys.get("files")
        nfiles = len(files) if isinstance(files, list) else 1 if files is not None else 0
        return "<sluice.Job %r %s files=%d global_batch_size=%s epochs=%s>" % (
            self.name, self._keys.get("format", "tfrecord"), nfiles, self._keys.get("global_batch_size"),
            self._keys.get("epochs", 1))


def _stop(proc, tmpdir, timeout):
    """Stop a feeder (SIGTERM, then SIGKILL after `timeout` s) and remove
    its temporary folder: close(), and weakref.finalize at exit."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


class _FeederClient(Client):
    """Feeder.client()'s sluice.Client: iterating it again after its
    stream ended warns (RuntimeWarning) instead of yielding nothing."""

    _ended = False
    _what = ""

    def __iter__(self):
        if self._ended:
            warnings.warn("sluice: %s: this client's stream ended after the job's last epoch (%d epochs of %d "
                          "steps): iterating it again yields nothing; open a new client (a Feeder with "
                          "serve_runs=True serves a new run) or raise the job's 'epochs'"
                          % (self._what, self.epochs, self.steps_per_epoch), RuntimeWarning, stacklevel=2)
        return self._steps()

    def _steps(self):
        while True:
            try:
                step = Client.__next__(self)
            except StopIteration:
                self._ended = True
                return
            yield step


def _join_endpoints(join):
    """--join's value from a Feeder, an endpoint, or a sequence of them;
    None for None."""
    if join is None:
        return None
    items = [join] if isinstance(join, (str, Feeder)) else join
    try:
        items = list(items)
    except TypeError:
        raise TypeError("join: a Feeder, an endpoint or a sequence of them, not %r" % type(join).__name__) from None
    out = []
    for x in items:
        if isinstance(x, Feeder):
            out.append(x.address)
        elif isinstance(x, str):
            out.append(x)
        else:
            raise TypeError("join: a Feeder or an endpoint (str), not %r" % type(x).__name__)
    if not out or any(not x or "," in x for x in out):
        raise ValueError("join: one or more endpoints, each non-empty and without a comma: %r" % (join,))
    return ",".join(out)


class Feeder:
    """A sluice-feeder process serving `job` (a sluice.Job, a dict of job
    keys, or a job file's path), started at once; returns when it serves.

    listen: its endpoint (default: ipc:// in a fresh temporary folder);
    feeder_index/feeders: this feeder among F; threads; workers/replicas
    (the cluster shape it serves); metrics_listen ("HOST:PORT", port 0 for
    a free one); serve_runs: after each run's end serve a new run to the
    next trainers (--serve-runs: a notebook reading the job again);
    idle_exit, heartbeat_ms, timeout_ms: the feeder's options; sets:
    KEY=VALUE job overrides; join: a running job's feeder (a Feeder, its
    address, or several) this one joins as feeder_index of feeders
    (--join: the trainers learn of it from that feeder and switch, their
    streams unchanged), with advertise: the address trainers reach it at
    when listen is a wildcard; extra_args: more sluice-feeder arguments;
    binary: the sluice-feeder to run (find_feeder); start_timeout: the
    seconds to wait for it to serve (its scan included); stop_timeout: the
    seconds between SIGTERM and SIGKILL on close.

    .address (for clients), .metrics_url, .log (its log so far),
    .returncode (None while it runs), .pid. A feeder that fails to start
    raises FeederError with its own error message. close(), the end of a
    with block and the interpreter's exit stop it."""

    def __init__(self, job, *, listen=None, feeder_index=None, feeders=None, threads=None, workers=None,
                 replicas=None, metrics_listen=None, serve_runs=False, idle_exit=None, heartbeat_ms=None,
                 timeout_ms=None, sets=(), join=None, advertise=None, extra_args=(), binary=None, start_timeout=300.0,
                 stop_timeout=10.0):
        for what, v in (("feeder_index", feeder_index), ("feeders", feeders), ("threads", threads),
                        ("workers", workers), ("replicas", replicas), ("idle_exit", idle_exit),
                        ("heartbeat_ms", heartbeat_ms), ("timeout_ms", timeout_ms)):
            _check_int(what, v)
        if isinstance(sets, str) or isinstance(extra_args, str):
            raise TypeError("sets and extra_args: sequences of strings, not one string")
        extra = [str(x) for x in extra_args]
        joined = _join_endpoints(join)
        if advertise is not None and not isinstance(advertise, str):
            raise TypeError("advertise: an endpoint (str), not %r" % type(advertise).__name__)
        for i, x in enumerate(extra):
            if x in ("-q", "--quiet", "--log-level=warning", "--log-level=error") or (
                    x == "--log-level" and extra[i + 1:i + 2] in (["warning"], ["error"])):
                raise ValueError("extra_args: %s: Feeder waits for the feeder's info line 'serving job' (no --quiet, "
                                 "no --log-level above info)" % x)
        for what, t in (("start_timeout", start_timeout), ("stop_timeout", stop_timeout)):
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0:
                raise ValueError("%s: seconds above 0, not %r" % (what, t))
        exe = find_feeder(binary)
        self._proc = None
        self._finalizer = None
        self._log_text = None
        self._tmp = tempfile.mkdtemp(prefix="sluice-feeder-")
        try:
            if isinstance(job, Job):
                job = job.to_dict()
            self._temp_job = isinstance(job, dict)
            if self._temp_job:
                self.job_path = os.path.join(self._tmp, "job.json")
                with open(self.job_path, "w", encoding="utf-8") as f:
                    json.dump(job, f)
                self.job = job.get("name")
            else:
                self.job_path = os.fspath(job)
                self.job = None
                try:
                    with open(self.job_path, encoding="utf-8") as f:
                        self.job = json.load(f).get("name")
                except (OSError, ValueError, AttributeError):
                    pass  # the feeder says what is wrong with it
            for kv in sets:
                if kv.startswith("name="):
                    self.job = kv[5:]
            self.listen = listen if listen is not None else "ipc://" + os.path.join(self._tmp, "feeder.sock")
            self.address = re.sub(r"^tcp://(\*|0\.0\.0\.0):", "tcp://127.0.0.1:", self.listen)
            self.address = re.sub(r"^tcp://\[::\]:", "tcp://[::1]:", self.address)
            self._log_path = os.path.join(self._tmp, "feeder.log")
            cmd = [exe, "--job", self.job_path, "--listen", self.listen]
            for opt, v in (("--feeder-index", feeder_index), ("--feeders", feeders), ("--threads", threads),
                           ("--workers", workers), ("--replicas", replicas),
                           ("--idle-exit", idle_exit), ("--heartbeat-ms", heartbeat_ms),
                           ("--timeout-ms", timeout_ms), ("--metrics-listen", metrics_listen)):
                if v is not None:
                    cmd += [opt, str(v)]
            if serve_runs:
                cmd.append("--serve-runs")
            if joined is not None:
                cmd += ["--join", joined]
            if advertise is not None:
                cmd += ["--advertise", advertise]
            for kv in sets:
                cmd += ["--set", kv]
            cmd += extra
            self.args = cmd
            with open(self._log_path, "wb") as log:
                self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            self._finalizer = weakref.finalize(self, _stop, self._proc, self._tmp, stop_timeout)
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        self._stop_timeout = stop_timeout
        self.metrics_url = None
        try:
            self._wait_serving(start_timeout)
        except BaseException:
            self.close()
            raise
        if metrics_listen is not None:
            host, _, port = str(metrics_listen).rpartition(":")
            for level, msg in _lines(self.log):
                m = _METRICS_PORT.match(msg)
                if level == "info" and m is not None:
                    port = m.group(1)
            host = {"": "127.0.0.1", "*": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::]": "[::1]"}.get(host, host)
            self.metrics_url = "http://%s:%s/metrics" % (host, port)

    def _wait_serving(self, timeout):
        deadline = time.monotonic() + timeout
        pause = 0.005
        while True:
            text = self.log
            for level, msg in _lines(text):
                if level == "info" and msg.startswith("serving job "):
                    return
                if level == "error":
                    # a failure at start: the feeder exits at once, or (a
                    # failed scan) waits --timeout-ms to tell trainers,
                    # whom nobody here needs telling: stopped (exit 1)
                    try:
                        self._proc.wait(1.0)
                    except subprocess.TimeoutExpired:
                        _stop(self._proc, None, self._stop_timeout)
                    text = self.log
                    raise FeederError(self._message(_last_error(text)), self._proc.returncode, text)
            rc = self._proc.poll()
            if rc is not None:
                text = self.log
                msg = self._message(_last_error(text)) or "sluice-feeder exited with status %d before serving" % rc
                raise FeederError(msg, rc, text)
            if time.monotonic() > deadline:
                raise FeederError("sluice-feeder did not serve within %g s (its log: %s)" % (timeout, self._log_path),
                                  None, text)
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _message(self, msg):
        """The feeder's message, less the name of the temporary file a
        dict job was written to (as Job's)."""
        if msg is not None and self._temp_job and msg.startswith(self.job_path + ": "):
            return msg[len(self.job_path) + 2:]
        return msg

    @property
    def log(self):
        """The feeder's log so far (all of it once closed)."""
        if self._log_text is not None:
            return self._log_text
        try:
            with open(self._log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @property
    def pid(self):
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self):
        """The feeder's exit status, None while it runs."""
        return self._proc.poll() if self._proc is not None else None

    @property
    def closed(self):
        return self._finalizer is None or not self._finalizer.alive

    def client(self, *, worker=0, workers=1, replicas=1, credits=None, heartbeat_ms=None, timeout_ms=None,
               connect_timeout_ms=None, reconnect_ms=None, takeover_ms=None, no_shm=False, resume_seq=0,
               curve_key=None, curve_server_keys=None, lend=False):
        """A sluice.Client of this feeder's job at .address (the options
        are sluice.Client's); iterating it again after its stream ended
        warns (RuntimeWarning) rather than silently yielding nothing."""
        if self.closed:
            raise ValueError("Feeder.client: the feeder is closed")
        c = _FeederClient(self.address, self.job, worker=worker, workers=workers, replicas=replicas, credits=credits,
                          heartbeat_ms=heartbeat_ms, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms,
                          reconnect_ms=reconnect_ms, takeover_ms=takeover_ms, no_shm=no_shm, resume_seq=resume_seq,
                          curve_key=curve_key, curve_server_keys=curve_server_keys, lend=lend)
        c._what = "job %r worker %d/%d" % (self.job, worker, workers)
        return c

    def close(self):
        """Stop the feeder (SIGTERM; SIGKILL after stop_timeout s) and wait
        for it; .log keeps its log. Again: nothing."""
        if self._finalizer is None or not self._finalizer.alive:
            return
        log = None
        if self._proc is not None and self._proc.poll() is None:
            _stop(self._proc, None, self._stop_timeout)
        log = self.log
        self._finalizer()
        self._log_text = log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "running" if self.returncode is None else "exited %d" % self.returncode
        if self.closed:
            state = "closed" if self.returncode is None else "closed, exit status %d" % self.returncode
        return "<sluice.Feeder job=%r address=%r pid=%s %s>" % (self.job, self.address, self.pid, state)
