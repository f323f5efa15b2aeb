"""What every integration test shares: the processes it started, stopped on
every path, and the logs of a case that failed or timed out.

A test starts each process with spawn(); fail() (and any exit: a Python
error, SIGTERM from ctest's timeout, SIGINT) kills every process still
running, waits for it, prints the tail of each log written since the
current case began (case()), then the "N passed, 1 failed" line.
"""
import atexit
import os
import signal
import subprocess
import sys

_procs = []      # (Popen, log path or None)
_case_start = 0  # index in _procs where the current case began
_passed = [0]
TAIL_BYTES = 3000


def spawn(args, log=None, **kw):
    """Popen(args), remembered. log: a path taking stdout and stderr (unless
    kw says otherwise); its tail is shown if the case fails."""
    f = None
    if log is not None:
        f = open(log, "w")
        if "stdout" in kw:  # stdout elsewhere: the log takes stderr
            kw.setdefault("stderr", f)
        else:
            kw["stdout"] = f
            kw.setdefault("stderr", subprocess.STDOUT)
    try:
        p = subprocess.Popen(args, **kw)
    finally:
        if f is not None:
            f.close()  # the child has its own descriptor
    _procs.append((p, log))
    return p


def case():
    """A new case begins: a failure from here on shows only its logs."""
    global _case_start
    _case_start = len(_procs)


def stop_all():
    """Kill every process still running and reap it (on every path)."""
    for p, _ in _procs:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    for p, _ in _procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def running():
    """Processes started and still running."""
    return [p for p, _ in _procs if p.poll() is None]


def tails():
    out = []
    seen = set()
    for p, log in _procs[_case_start:]:
        if log is None or log in seen or not os.path.exists(log):
            continue
        seen.add(log)
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            n = f.tell()
            f.seek(max(0, n - TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
        out.append("---- %s (pid %d, %s) ----\n%s" % (os.path.basename(log), p.pid,
                                                      "exit %s" % p.returncode if p.returncode is not None
                                                      else "was running", text))
    return "\n".join(out)


def ok(name):
    _passed[0] += 1
    print("ok %d - %s" % (_passed[0], name))
    sys.stdout.flush()


def passed():
    return _passed[0]


def fail(msg):
    # kill first, so the logs are complete, then show them
    stop_all()
    print("FAIL: " + msg, file=sys.stderr)
    t = tails()
    if t:
        print("logs of the failed case:\n" + t, file=sys.stderr)
    print("%d passed, 1 failed" % _passed[0])
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(1)


def _on_signal(sig, _frame):
    fail("stopped by signal %d (a timeout?)" % sig)


atexit.register(stop_all)
signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)
