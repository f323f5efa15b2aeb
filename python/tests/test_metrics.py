"""sluice.Client(metrics_listen=...): the client library's /metrics (issue
#29 item 4), scraped over HTTP from a client reading a real feeder's
stream: sluice-trainer's input families with exact counts, the job's
labels, the Grafana dashboard's job variable answered by a family the
client exports, hostile addresses refused in words, and
sluice.torch.IterableDataset(metrics_listen=...) served between passes.

Run by ctest python_client (with the rest of python/tests).
"""
import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import bed  # noqa: E402

import sluice  # noqa: E402

BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
ROWS, G = 200, 8  # 2 files of 100 rows, G = 8, 2 epochs: 25 steps an epoch


@pytest.fixture
def feeder(request):
    """A feeder serving one run of a job (over ipc), for one test."""
    tag = request.node.name[:40]
    bed.setup(BUILD, "pymetrics")
    files = bed.gen("d", ROWS, 2)
    path, job = bed.write_job("job-pymetrics", files)
    ep = "ipc://%s/%s.sock" % (bed.TMP, tag)
    log = open(os.path.join(bed.TMP, "%s-feeder.log" % tag), "w")
    p = subprocess.Popen([bed.FEEDER, "--job", path, "--listen", ep, "--threads", "1", "--heartbeat-ms", "200"],
                         stdout=log, stderr=subprocess.STDOUT)
    log.close()
    yield ep, job
    p.kill()
    p.wait()
    bed.cleanup()


def scrape(url):
    """{(name, frozenset(labels)): value} and {family: type} of /metrics."""
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    series, types = {}, {}
    for line in text.splitlines():
        m = re.fullmatch(r"# TYPE (\S+) (\S+)", line)
        if m:
            types[m.group(1)] = m.group(2)
            continue
        if line.startswith("#") or not line:
            continue
        m = re.fullmatch(r'([a-z_]+)(?:\{(.*)\})? (\S+)', line)
        assert m, "malformed line %r" % line
        labels = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        series[(m.group(1), labels)] = float(m.group(3))
    return series, types


def value(series, name, **want):
    hits = [v for (n, ls), v in series.items() if n == name and set(want.items()) <= ls]
    assert len(hits) == 1, "%s%r: %d series" % (name, want, len(hits))
    return hits[0]


def test_client_serves_the_trainers_input_families(feeder):
    ep, job = feeder
    with sluice.Client([ep], job["name"], metrics_listen="127.0.0.1:0") as c:
        url = c.metrics_url
        assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*/metrics", url), url
        s, types = scrape(url)
        labels = dict(sluice_job=job["name"], worker="0")
        assert value(s, "sluice_process_info", program="client", version=sluice.version, **labels) == 1
        assert types["sluice_process_info"] == "gauge"
        assert value(s, "sluice_trainer_steps_total", **labels) == 0
        # ten steps, then the figures are exact
        for _ in range(10):
            next(c)
        s, types = scrape(url)
        for name, v in (("sluice_trainer_steps_total", 10), ("sluice_trainer_samples_total", 10 * G),
                        ("sluice_trainer_pieces_total", 10), ("sluice_trainer_epochs_total", 1),
                        ("sluice_trainer_step_input_wait_seconds_count", 10),
                        ("sluice_trainer_step_seconds_count", 9), ("sluice_trainer_feeder_rejoins_total", 0),
                        ("sluice_trainer_feeder_takeovers_total", 0)):
            assert value(s, name, **labels) == v, name
            assert types[re.sub(r"_count$", "", name)] in ("counter", "histogram")
        wait = value(s, "sluice_trainer_input_wait_seconds_total")
        by_feeder = value(s, "sluice_trainer_input_wait_by_feeder_seconds_total", feeder="0", **labels)
        assert 0 < by_feeder <= wait
        assert value(s, "sluice_trainer_received_bytes_total") > 0
        # the first scrape asked for the input's bound, and the first step
        # (which waited for the feeder's first piece) set it: feeder 0
        bound = [dict(ls) for (n, ls) in s if n == "sluice_trainer_input_bound_info"]
        assert len(bound) == 1 and bound[0]["feeder"] == "0" and "stage" in bound[0], bound
        assert value(s, "sluice_trainer_shm_pieces_total") <= 2 * ROWS // G  # counted as received
        # every step to the end: 2 epochs
        rest = sum(1 for _ in c)
        assert rest == 2 * ROWS // G - 10
        s2, _ = scrape(url)
        assert value(s2, "sluice_trainer_steps_total") == 2 * ROWS // G
        assert value(s2, "sluice_trainer_samples_total") == 2 * ROWS
        assert value(s2, "sluice_trainer_epochs_total") == 2
        check_dashboard(set(types) | {n for (n, _) in s2}, s2, job["name"])
    assert c.metrics_url is None
    # closed: the port is no longer served
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)


def check_dashboard(families, series, job):
    """The Grafana dashboard's job variable is answered by a family the
    client exports, with this job; its input panels name families it
    exports (the training ones are sluice-trainer's alone)."""
    with open(os.path.join(ROOT, "deploy", "grafana", "sluice-dashboard.json")) as f:
        dash = json.load(f)
    var = [v for v in dash["templating"]["list"] if v["name"] == "sluice_job"][0]
    m = re.fullmatch(r"label_values\((\w+), sluice_job\)", var["definition"])
    assert m and var["query"]["query"] == var["definition"], var
    assert m.group(1) in families, "the job variable's %s is not exported by the client" % m.group(1)
    assert any(n == m.group(1) and ("sluice_job", job) in ls for (n, ls) in series)
    trainer_only = {"sluice_trainer_loss", "sluice_trainer_accuracy", "sluice_trainer_weights_info",
                    "sluice_trainer_h2d_bytes_total"}
    used = set()
    for p in dash["panels"]:
        for t in p.get("targets", []):
            used |= set(re.findall(r"\bsluice_trainer_[a-z0-9_]+", t["expr"]))
    missing = used - trainer_only - families
    assert not missing, "dashboard families the client does not export: %s" % sorted(missing)


def test_metrics_listen_hostile(feeder):
    ep, job = feeder
    for bad, words in (("nonsense", "expected HOST:PORT"), (":9464", "names no host"),
                       ("127.0.0.1:70000", "expected HOST:PORT"), ("127.0.0.1:-1", "expected HOST:PORT"),
                       ("", "expected HOST:PORT"), ("example.com:9464", "expected HOST:PORT"),
                       ("127.0.0.1:" + "9" * 400, "expected HOST:PORT")):
        with pytest.raises(sluice.Error) as e:
            sluice.Client([ep], job["name"], metrics_listen=bad)
        assert e.value.code_name == "invalid" and str(e.value).startswith("metrics_listen: ") and \
            words in str(e.value), (bad, str(e.value))
    with pytest.raises(TypeError, match="metrics_listen: a str"):
        sluice.Client([ep], job["name"], metrics_listen=9464)
    with pytest.raises(TypeError, match="multiple values for keyword argument 'metrics_listen'"):
        sluice.Client([ep], job["name"], metrics_listen="127.0.0.1:0", **{"metrics_listen": "127.0.0.1:0"})
    # a port in use: the bind's reason, and no connection made
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(sluice.Error) as e:
            sluice.Client([ep], job["name"], metrics_listen="127.0.0.1:%d" % port)
        assert e.value.code_name == "io" and "127.0.0.1:%d: bind: Address already in use" % port in str(e.value), \
            str(e.value)
    # without metrics_listen: nothing served
    with sluice.Client([ep], job["name"]) as c:
        assert c.metrics_url is None


def test_torch_dataset_serves_metrics(feeder):
    pytest.importorskip("torch")
    import sluice.torch
    ep, job = feeder
    ds = sluice.torch.IterableDataset([ep], job["name"], metrics_listen="127.0.0.1:0")
    assert ds.metrics_url is None  # the client opens at the first pass
    url, n = None, 0
    for batch in ds:  # one pass: the first epoch
        url = url or ds.metrics_url
        assert batch["id"].shape[0] == G
        n += 1
    assert n == ROWS // G and re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*/metrics", url or ""), (n, url)
    s, _ = scrape(ds.metrics_url)  # open between passes: still served
    assert value(s, "sluice_trainer_steps_total", sluice_job=job["name"], worker="0") == n
    assert value(s, "sluice_trainer_samples_total") == n * G
    ds.close()
    assert ds.metrics_url is None
