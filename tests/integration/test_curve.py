#!/usr/bin/env python3
"""CURVE between sluice-feeder and sluice-trainer (issue #16, part 1), on
real processes over tcp on 127.0.0.1 and over ipc, with keys made by
`sluice-feeder keygen`:

- an allowed trainer gets exactly the stream a run without CURVE gets
  (its trace, piece by piece), over tcp and over ipc;
- a trainer whose key is not on the allow-list fails at once, naming the
  allow-list; the feeder logs the key's Z85 and the peer's address, and its
  --stats show no piece sent and no trainer;
- a wrong --curve-server-key, or no keys against a CURVE feeder, fail
  clearly and quickly;
- a feeder asked to listen on a public address (tcp://0.0.0.0, tcp://*)
  without keys refuses to start with exit 2 unless --insecure;
- secret keys open to others (0644), damaged, missing or of the wrong
  kind are refused naming the file, by the feeder and the trainer;
- SIGHUP re-reads the allow-list: a trainer refused before is served after
  (and a damaged file keeps the old list);
- takeover still works: of two feeders with their own keys, the survivor
  takes over the share of the one killed, the trainer using the survivor's
  key, and the trace stays exact.

Usage: test_curve.py BUILD_DIR
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

FAST = ["--heartbeat-ms", "200", "--timeout-ms", "3000"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def keygen(name):
    """NAME.key and NAME.pub under TMP/keys; returns the path without suffix."""
    path = os.path.join(bed.TMP, "keys", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = subprocess.run([bed.FEEDER, "keygen", path], capture_output=True, text=True)
    if r.returncode != 0:
        fail("keygen %s: exit %d: %s" % (name, r.returncode, r.stderr))
    return path


def pub(name_path):
    with open(name_path + ".pub") as f:
        return f.read().strip()


def allow_dir(tag, *names):
    d = os.path.join(bed.TMP, "allow-" + tag)
    os.makedirs(d)
    for n in names:
        shutil.copy(n + ".pub", os.path.join(d, os.path.basename(n) + ".pub"))
    return d


def feeder(tag, job_path, listen, key=None, allow=None, extra=(), who="feeder"):
    args = [bed.FEEDER, "--job", job_path, "--listen", listen, "--threads", "1"] + FAST
    if key is not None:
        args += ["--curve-key", key + ".key"]
    if allow is not None:
        args += ["--curve-allow", allow]
    return spawn(args + list(extra), log=bed.log_path(tag, who))


def trainer(tag, eps, job, key=None, server=None, extra=(), who="trainer"):
    trace = os.path.join(bed.TMP, "%s-%s.jsonl" % (tag, who))
    args = [bed.TRAINER, "--connect", ",".join(eps), "--job", job["name"], "--trace", trace,
            "--connect-timeout", "20"] + FAST
    if key is not None:
        args += ["--curve-key", key + ".key"]
    if server is not None:
        args += ["--curve-server-key", server]
    return spawn(args + list(extra), log=bed.log_path(tag, who)), trace


def pieces_of(path):
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or "summary" not in json.loads(lines[-1]):
        fail("%s: no summary line" % path)
    return lines[:-1]


def run_ok(tag, p, what, timeout=60):
    code = bed.wait(p, timeout, what)
    if code != 0:
        fail("%s: exit %d:\n%s" % (what, code, bed.read_log(tag, "trainer")[-2000:]))


def stop(p, what):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    return bed.wait(p, 20, what)


def must_fail_fast(tag, p, what, text, limit_s, who="trainer"):
    t0 = time.time()
    code = bed.wait(p, 30, what)
    took = time.time() - t0
    log = bed.read_log(tag, who)
    if code == 0 or text not in log:
        fail("%s: expected a failure saying %r, got exit %d:\n%s" % (what, text, code, log[-2000:]))
    if took > limit_s:
        fail("%s: took %.1f s to fail (at most %.1f s)" % (what, took, limit_s))
    return took


def allowed_stream(files, keys):
    """CURVE over tcp and ipc: the trace equals a run without CURVE."""
    harness.case()
    job_path, job = bed.write_job("cv", files, epochs=3, global_batch_size=8,
                                  shuffle={"buffer": 32, "seed": 5, "reshuffle_each_epoch": True})
    ep = "ipc://%s/plain.sock" % bed.TMP
    f = feeder("plain", job_path, ep)
    t, trace = trainer("plain", [ep], job)
    run_ok("plain", t, "plain trainer")
    stop(f, "plain feeder")
    ref = pieces_of(trace)
    if not ref:
        fail("plain: no piece")
    allow = allow_dir("stream", keys["trainer"])
    for kind, ep in (("tcp", "tcp://127.0.0.1:%d" % free_port()), ("ipc", "ipc://%s/curve.sock" % bed.TMP)):
        tag = "stream-" + kind
        f = feeder(tag, job_path, ep, key=keys["feeder0"], allow=allow)
        t, trace = trainer(tag, [ep], job, key=keys["trainer"], server=keys["feeder0"] + ".pub")
        run_ok(tag, t, tag + " trainer")
        if bed.wait(f, 20, tag + " feeder") != 0:
            fail("%s: the feeder failed" % tag)
        got = pieces_of(trace)
        if got != ref:
            fail("%s: the CURVE trace differs from the plain run's (%d pieces against %d)" % (tag, len(got), len(ref)))
        flog = bed.read_log(tag, "feeder")
        if "CURVE: 1 trainer connections accepted, 0 refused" not in flog or pub(keys["feeder0"]) not in flog:
            fail("%s: the feeder should log its key and one accepted connection:\n%s" % (tag, flog[-2000:]))
    ok("an allowed trainer over CURVE (tcp on 127.0.0.1 and ipc) gets the plain run's %d pieces exactly" % len(ref))


def refused(files, keys):
    """An unknown key, a wrong server key, no keys: nothing served."""
    harness.case()
    tag = "refused"
    job_path, job = bed.write_job("cv-ref", files, epochs=1)
    ep = "tcp://127.0.0.1:%d" % free_port()
    stats = os.path.join(bed.TMP, "refused-stats.json")
    allow = allow_dir(tag, keys["trainer"])
    f = feeder(tag, job_path, ep, key=keys["feeder0"], allow=allow, extra=["--stats", stats])
    bed.wait_for_log(tag, "feeder", "serving job", f, "refused: the feeder did not start")
    t, trace = trainer(tag, [ep], job, key=keys["rogue"], server=keys["feeder0"] + ".pub", who="rogue")
    took = must_fail_fast(tag, t, "a trainer with an unknown key",
                          "this trainer's public key is not on the feeder's allow-list", 5, who="rogue")
    bed.wait_for_log(tag, "feeder", "refused a CURVE client from 127.0.0.1: its public key %s is not on the "
                     "allow-list" % pub(keys["rogue"]), f, "refused: the feeder should log the key and address")
    if os.path.exists(trace) and pieces_of(trace):
        fail("refused: the rogue trainer got pieces")
    t, _ = trainer(tag, [ep], job, key=keys["trainer"], server=keys["feeder1"] + ".pub", who="wrong")
    took2 = must_fail_fast(tag, t, "a trainer with a wrong --curve-server-key",
                           "--curve-server-key is not this feeder's key", 5, who="wrong")
    t, _ = trainer(tag, [ep], job, who="nokeys")
    # the mechanism mismatch is seen by the feeder first (it closes: the
    # trainer counts closes during the handshake) or by the trainer first
    # (its monitor says so): either message tells the keys to give
    took3 = must_fail_fast(tag, t, "a trainer without keys", "give --curve-key and --curve-server-key", 5,
                           who="nokeys")
    if stop(f, "refused feeder") != 0:
        fail("refused: the feeder should stop cleanly on SIGTERM")
    with open(stats) as fh:
        st = json.load(fh)
    if st["pieces"] != 0 or st["trainers"] != 0 or st["bytes"] != 0:
        fail("refused: the feeder's counters should show nothing served: %s" % st)
    flog = bed.read_log(tag, "feeder")
    if "0 trainer connections accepted, 1 refused" not in flog:
        fail("refused: the feeder's CURVE summary should count one refusal:\n%s" % flog[-2000:])
    ok("unknown key refused in %.2f s (the feeder logs its Z85 and 127.0.0.1; 0 pieces, 0 trainers), a wrong "
       "server key fails in %.2f s, no keys in %.2f s" % (took, took2, took3))


def safe_default(files, keys):
    """A public address without keys: exit 2 unless --insecure."""
    harness.case()
    tag = "public"
    job_path, job = bed.write_job("cv-pub", files, epochs=1)
    for host in ("0.0.0.0", "*"):
        ep = "tcp://%s:%d" % (host, free_port())
        r = subprocess.run([bed.FEEDER, "--job", job_path, "--listen", ep], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 2 or "can be reached from other hosts" not in r.stderr or "--insecure" not in r.stderr \
                or "--curve-key" not in r.stderr:
            fail("public: %s without keys should exit 2 saying why: exit %d: %s" % (ep, r.returncode, r.stderr))
    ep = "tcp://0.0.0.0:%d" % free_port()
    f = feeder(tag, job_path, ep, extra=["--insecure"])
    bed.wait_for_log(tag, "feeder", "serving job", f, "public: --insecure should start")
    if "serving in the clear on %s (--insecure)" % ep not in bed.read_log(tag, "feeder"):
        fail("public: --insecure should warn")
    stop(f, "insecure feeder")
    # with keys, the public address is fine
    allow = allow_dir(tag, keys["trainer"])
    port = free_port()
    f = feeder(tag, job_path, "tcp://*:%d" % port, key=keys["feeder0"], allow=allow, who="feeder-keys")
    t, trace = trainer(tag, ["tcp://127.0.0.1:%d" % port], job, key=keys["trainer"],
                       server=keys["feeder0"] + ".pub")
    run_ok(tag, t, "public: a trainer of a CURVE feeder on tcp://*")
    bed.wait(f, 20, "public feeder with keys")
    # option pairs
    for args, text in ((["--curve-allow", allow], "--curve-allow needs --curve-key"),
                       (["--curve-key", keys["feeder0"] + ".key"], "--curve-key needs --curve-allow")):
        r = subprocess.run([bed.FEEDER, "--job", job_path, "--listen", "ipc://%s/x.sock" % bed.TMP] + args,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or text not in r.stderr:
            fail("public: %s: expected exit 2 with %r, got %d: %s" % (args, text, r.returncode, r.stderr))
    for args, text in ((["--curve-key", keys["trainer"] + ".key"], "go together"),
                       (["--curve-server-key", keys["feeder0"] + ".pub"], "go together")):
        r = subprocess.run([bed.TRAINER, "--connect", "ipc://%s/x.sock" % bed.TMP, "--job", "x"] + args,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or text not in r.stderr:
            fail("public: trainer %s: expected exit 2 with %r, got %d: %s" % (args, text, r.returncode, r.stderr))
    ok("tcp://0.0.0.0 and tcp://* without keys refused (exit 2, saying why and what to do); --insecure starts "
       "with a warning; keys make tcp://* fine; --curve-key and --curve-allow (--curve-server-key) go together")


def bad_keys(files, keys):
    """Damaged, open or missing keys: refused naming the file."""
    harness.case()
    job_path, job = bed.write_job("cv-bad", files, epochs=1)
    d = os.path.join(bed.TMP, "badkeys")
    os.makedirs(d)
    wide = os.path.join(d, "wide.key")
    shutil.copy(keys["trainer"] + ".key", wide)
    os.chmod(wide, 0o644)
    short = os.path.join(d, "short.key")
    with open(short, "w") as f:
        f.write("tooshort\n")
    os.chmod(short, 0o600)
    empty = os.path.join(d, "empty.key")
    open(empty, "w").close()
    os.chmod(empty, 0o600)
    bad_allow = os.path.join(d, "allow")
    os.makedirs(bad_allow)
    shutil.copy(keys["trainer"] + ".pub", bad_allow)
    with open(os.path.join(bad_allow, "broken.pub"), "w") as f:
        f.write("x" * 41 + "\n")
    os.chmod(os.path.join(bad_allow, "broken.pub"), 0o644)
    # whoever can write an allow-list key or its folder can join (issue #24 item 9)
    open_pub = os.path.join(d, "open-pub")
    os.makedirs(open_pub)
    shutil.copy(keys["trainer"] + ".pub", open_pub)
    os.chmod(os.path.join(open_pub, os.path.basename(keys["trainer"]) + ".pub"), 0o666)
    open_dir = os.path.join(d, "open-dir")
    os.makedirs(open_dir)
    shutil.copy(keys["trainer"] + ".pub", open_dir)
    os.chmod(open_dir, 0o1777)
    ep = "ipc://%s/bad.sock" % bed.TMP
    fcases = [
        (["--curve-key", wide, "--curve-allow", bad_allow], 2, wide + ": a secret key readable or writable by others "
         "(mode 0644)"),
        (["--curve-key", short, "--curve-allow", bad_allow], 2, short + ": not a CURVE key"),
        (["--curve-key", empty, "--curve-allow", bad_allow], 2, empty + ": not a CURVE key"),
        (["--curve-key", d, "--curve-allow", bad_allow], 2, d + ": not a regular file"),
        (["--curve-key", os.path.join(d, "absent.key"), "--curve-allow", bad_allow], 1, "absent.key): No such file"),
        (["--curve-key", keys["feeder0"] + ".key", "--curve-allow", bad_allow], 2, "broken.pub: not a CURVE key"),
        (["--curve-key", keys["feeder0"] + ".key", "--curve-allow", os.path.join(d, "none")], 1,
         "opendir(%s): No such file" % os.path.join(d, "none")),
        (["--curve-key", keys["feeder0"] + ".key", "--curve-allow", wide], 2, "not a directory"),
        (["--curve-key", keys["feeder0"] + ".key", "--curve-allow", open_pub], 2,
         "%s/%s.pub: an allow-list key writable by others (mode 0666): whoever can write it can join; make it "
         "writable by its owner alone: chmod go-w %s/%s.pub" % (open_pub, os.path.basename(keys["trainer"]), open_pub,
                                                                os.path.basename(keys["trainer"]))),
        (["--curve-key", keys["feeder0"] + ".key", "--curve-allow", open_dir], 2,
         "%s: an allow-list directory writable by others (mode 1777): whoever can write there can join; make it "
         "writable by its owner alone: chmod go-w %s" % (open_dir, open_dir)),
    ]
    for args, code, text in fcases:
        r = subprocess.run([bed.FEEDER, "--job", job_path, "--listen", ep] + args, capture_output=True, text=True,
                           timeout=30)
        if r.returncode != code or text not in r.stderr:
            fail("bad keys: feeder %s: expected exit %d with %r, got %d: %s" % (args, code, text, r.returncode,
                                                                               r.stderr))
    sdir = os.path.join(d, "servers")
    os.makedirs(sdir)
    shutil.copy(keys["feeder0"] + ".pub", os.path.join(sdir, "feeder-0.pub"))
    # a key file that is not there is exit 1, as for the feeder; one that is
    # refused is 2 (issue #24 item 13: one rule, docs/exit-codes.md)
    tcases = [
        (["--curve-key", wide, "--curve-server-key", keys["feeder0"] + ".pub"], 2, wide + ": a secret key readable"),
        (["--curve-key", keys["trainer"] + ".key", "--curve-server-key", short], 2, short + ": not a CURVE key"),
        (["--curve-key", keys["trainer"] + ".key", "--curve-server-key", os.path.join(d, "absent.pub")], 1,
         "sluice-trainer: --curve-server-key: stat(%s): No such file" % os.path.join(d, "absent.pub")),
        (["--curve-key", os.path.join(d, "absent.key"), "--curve-server-key", keys["feeder0"] + ".pub"], 1,
         "sluice-trainer: --curve-key: open(%s): No such file" % os.path.join(d, "absent.key")),
        # a directory: feeder-1.pub is missing for the second feeder
        (["--curve-key", keys["trainer"] + ".key", "--curve-server-key", sdir], 1,
         "open(%s): No such file" % os.path.join(sdir, "feeder-1.pub")),
    ]
    for args, code, text in tcases:
        r = subprocess.run([bed.TRAINER, "--connect", ep + "," + ep + "2", "--job", job["name"]] + args,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != code or text not in r.stderr:
            fail("bad keys: trainer %s: expected exit %d with %r, got %d: %s" % (args, code, text, r.returncode,
                                                                               r.stderr))
    # keygen itself
    r = subprocess.run([bed.FEEDER, "keygen", keys["trainer"]], capture_output=True, text=True)
    if r.returncode != 1 or "exists already" not in r.stderr:
        fail("keygen over an existing key should exit 1: %d %s" % (r.returncode, r.stderr))
    for args in ([], ["a", "b"], ["--bogus"], [""]):
        r = subprocess.run([bed.FEEDER, "keygen"] + args, capture_output=True, text=True)
        if r.returncode != 2:
            fail("keygen %s should be a usage error: %d %s" % (args, r.returncode, r.stderr))
    r = subprocess.run([bed.FEEDER, "keygen", "--help"], capture_output=True, text=True)
    if r.returncode != 0 or "NAME.key" not in r.stdout:
        fail("keygen --help: %d %s" % (r.returncode, r.stdout))
    if os.stat(keys["trainer"] + ".key").st_mode & 0o777 != 0o600:
        fail("keygen: the secret key should be 0600")
    ok("%d feeder and %d trainer key files refused naming the file (0644, damaged, empty, a directory, missing, "
       "a bad allow-list file, feeder-1.pub missing); keygen never overwrites, writes 0600"
       % (len(fcases), len(tcases)))


def sighup(files, keys):
    """SIGHUP: a key added to the allow-list is let in; a damaged file keeps the old list."""
    harness.case()
    tag = "hup"
    job_path, job = bed.write_job("cv-hup", files, epochs=1)
    ep = "tcp://127.0.0.1:%d" % free_port()
    allow = allow_dir(tag, keys["trainer"])
    f = feeder(tag, job_path, ep, key=keys["feeder0"], allow=allow)
    bed.wait_for_log(tag, "feeder", "serving job", f, "hup: the feeder did not start")
    t, _ = trainer(tag, [ep], job, key=keys["trainer2"], server=keys["feeder0"] + ".pub", who="before")
    must_fail_fast(tag, t, "hup: trainer2 before SIGHUP", "not on the feeder's allow-list", 5, who="before")
    # a damaged file: the reload fails, the old list stays
    with open(os.path.join(allow, "zz.pub"), "w") as fh:
        fh.write("nonsense\n")
    f.send_signal(signal.SIGHUP)
    bed.wait_for_log(tag, "feeder", "SIGHUP: the allow-list was not reloaded, the 1 keys read before still stand",
                     f, "hup: a damaged file should be reported")
    os.unlink(os.path.join(allow, "zz.pub"))
    shutil.copy(keys["trainer2"] + ".pub", allow)
    f.send_signal(signal.SIGHUP)
    bed.wait_for_log(tag, "feeder", "SIGHUP: allow-list reloaded: 2 trainer keys (1 before)", f,
                     "hup: the reload should be logged")
    t, trace = trainer(tag, [ep], job, key=keys["trainer2"], server=keys["feeder0"] + ".pub", who="after")
    code = bed.wait(t, 60, "hup: trainer2 after SIGHUP")
    if code != 0 or not pieces_of(trace):
        fail("hup: trainer2 should be served after SIGHUP: exit %d\n%s" % (code, bed.read_log(tag, "after")[-2000:]))
    if bed.wait(f, 20, "hup feeder") != 0:
        fail("hup: the feeder failed")
    ok("SIGHUP: a damaged allow-list keeps the old one (logged); a key added is served after (%d pieces)"
       % len(pieces_of(trace)))


def takeover(files, keys, epochs):
    """Two feeders with their own keys; feeder 1 killed: feeder 0 takes its
    share over (the trainer uses feeder 0's key for it); trace exact."""
    harness.case()
    tag = "takeover"
    job_path, job = bed.write_job("cv-tk", files, epochs=epochs, global_batch_size=8,
                                  shuffle={"buffer": 32, "seed": 7, "reshuffle_each_epoch": True})
    ep = "ipc://%s/tk-ref.sock" % bed.TMP
    f = feeder(tag, job_path, ep, who="ref-feeder")
    t, trace = trainer(tag, [ep], job, who="ref-trainer")
    if bed.wait(t, 400, "takeover: the reference trainer") != 0:
        fail("takeover: the reference run failed")
    stop(f, "ref feeder")
    ref = pieces_of(trace)
    allow = allow_dir(tag, keys["trainer"])
    sdir = os.path.join(bed.TMP, "servers-" + tag)
    os.makedirs(sdir)
    for j in (0, 1):
        shutil.copy(keys["feeder%d" % j] + ".pub", os.path.join(sdir, "feeder-%d.pub" % j))
    eps = ["tcp://127.0.0.1:%d" % free_port(), "tcp://127.0.0.1:%d" % free_port()]
    fs = [feeder(tag, job_path, eps[j], key=keys["feeder%d" % j], allow=allow,
                 extra=["--feeder-index", str(j), "--feeders", "2"], who="feeder%d" % j) for j in (0, 1)]
    # paced (--step-ms): the run lasts >= 2.5 s in any build, whatever the
    # machine's load, so the kill lands mid-stream
    t, trace = trainer(tag, eps, job, key=keys["trainer"], server=sdir,
                       extra=["--takeover-s", "0.5", "--step-ms", "0.5"])
    bed.wait_for_log(tag, "feeder1", "worker 0 connected", fs[1], "takeover: feeder 1 never served")
    time.sleep(0.3)
    if t.poll() is not None:
        fail("takeover: the trainer ended before the kill (the job is too short)")
    fs[1].kill()
    code = bed.wait(t, 400, "takeover trainer")
    log = bed.read_log(tag, "trainer")
    if code != 0:
        fail("takeover: the trainer failed:\n%s" % log[-3000:])
    if "feeder %s took over feeder %s's share" % (eps[0], eps[1]) not in log:
        fail("takeover: feeder 0 should have taken the share over:\n%s" % log[-3000:])
    got = pieces_of(trace)
    if got != ref:
        fail("takeover: the trace differs from the undisturbed run's (%d pieces against %d)" % (len(got), len(ref)))
    bed.wait(fs[0], 30, "takeover feeder 0")
    fs[1].wait()
    ok("takeover with CURVE: feeder 1 killed, feeder 0 (its own key) served the share; trace exact (%d pieces)"
       % len(ref))


def spec_keys(files, keys):
    """Key paths from the cluster spec (TF_CONFIG-style, --cluster): the
    feeder's 'curve.key' and 'curve.allow' let it bind every interface
    (tcp://*) without --insecure; the trainer's 'curve.key' and
    'curve.server_keys' get it served; a spec with a key but no allow-list
    is the same usage error as the options."""
    harness.case()
    tag = "spec"
    job_path, job = bed.write_job("cv-spec", files, epochs=1, global_batch_size=8)
    port = free_port()
    allow = allow_dir(tag, keys["trainer"])

    def spec(name, curve):
        path = os.path.join(bed.TMP, "%s-%s.json" % (tag, name))
        with open(path, "w") as fh:
            json.dump({"cluster": {"feeder": ["tcp://127.0.0.1:%d" % port],
                                   "worker": ["127.0.0.1:%d" % (port + 1)]},
                       "task": {"type": name, "index": 0}, "curve": curve}, fh)
        return path
    bad = spec("feeder", {"key": keys["feeder0"] + ".key"})
    p = spawn([bed.FEEDER, "--job", job_path, "--cluster", bad] + FAST, log=bed.log_path(tag, "bad"))
    if bed.wait(p, 20, "spec: a feeder key without an allow-list") != 2 or \
            "--curve-key needs --curve-allow" not in bed.read_log(tag, "bad"):
        fail("spec: a feeder spec with a key and no allow-list should be a usage error:\n%s"
             % bed.read_log(tag, "bad")[-1000:])
    fs = spec("feeder", {"key": keys["feeder0"] + ".key", "allow": allow})
    f = spawn([bed.FEEDER, "--job", job_path, "--cluster", fs, "--threads", "1"] + FAST,
              log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", f, "spec: the feeder did not start from its spec's keys")
    ts = spec("worker", {"key": keys["trainer"] + ".key", "server_keys": keys["feeder0"] + ".pub"})
    trace = os.path.join(bed.TMP, "%s-trace.jsonl" % tag)
    t = spawn([bed.TRAINER, "--cluster", ts, "--job", job["name"], "--trace", trace, "--connect-timeout", "20"]
              + FAST, log=bed.log_path(tag, "trainer"))
    run_ok(tag, t, "spec: the trainer")
    n = len(pieces_of(trace))
    if n != 400 // 8 or bed.wait(f, 20, "spec: the feeder") != 0:
        fail("spec: the trainer got %d pieces (want 50), or the feeder failed" % n)
    ok("key paths from the cluster spec: a feeder on tcp://* with 'curve.key' and 'curve.allow' serves a trainer "
       "whose spec has 'curve.key' and 'curve.server_keys' (%d pieces); a key without 'allow' is a usage error" % n)


def main():
    bed.setup(sys.argv[1], "curve")
    try:
        files = bed.gen("a", 400, 4)
        keys = {n: keygen(n) for n in ("feeder0", "feeder1", "trainer", "trainer2", "rogue")}
        allowed_stream(files, keys)
        refused(files, keys)
        safe_default(files, keys)
        bad_keys(files, keys)
        sighup(files, keys)
        spec_keys(files, keys)
        # 100 epochs of 50 steps, each paced to 0.5 ms (takeover): >= 2.5 s
        # in every build. It ran 3,000 epochs (300 under sanitizers) as fast
        # as they went: a TSan build beside two busy loops passed its 80 s
        # budget on this case alone.
        takeover(files, keys, 100)
        bed.finish()
    finally:
        harness.stop_all()
        bed.cleanup()


if __name__ == "__main__":
    main()
