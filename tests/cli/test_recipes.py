#!/usr/bin/env python3
"""The recipes that run a user's training script, checked (issue #29 item 4;
docs/deploy.md "Your own training script" and "Container image").

- Metrics in every Kubernetes manifest (deploy/kubernetes/**/*.yaml): each
  probe reads /metrics on a named port whose containerPort is the port
  the container's --metrics-listen gives; the pod's prometheus.io/port
  annotation is that port, prometheus.io/scrape "true"; every container
  requests and limits cpu and memory.
- Kubernetes autoscaling (deploy/kubernetes/autoscale/, issue #30 part 3):
  the joining feeders' StatefulSet is sluice-feeders.yaml's but for the
  feeder's command, a shell line; the HPA scales it from the first feeders'
  count; the line run here for pods 0 to F + 2 with a stand-in feeder: the
  first F get sluice-feeders.yaml's arguments, pod J >= F those with
  --feeders J + 1, --join of the first feeders' stable names and
  --advertise its own, each an option of sluice-feeder.
- Kubernetes torchrun (deploy/kubernetes/torchrun/): the documents parse;
  the feeders are deploy/kubernetes/sluice-feeders.yaml's StatefulSet but
  for the shape (--workers = the workers' completions x --nproc_per_node,
  --replicas 1); the workers' Indexed Job runs torchrun, each torchrun
  option in `torchrun --help`, --nnodes its completions, --node_rank its
  completion index, --master_addr pod 0's name in the headless Service
  that selects the Job's pods, --master_port that Service's port; the
  script is the one the container recipe installs, each of its options in
  its argparse; SLUICE_FEEDER_ENDPOINTS names every feeder in index order
  at its --listen port, SLUICE_JOB_NAME the job ConfigMap's job, the key
  variables files of the mounted volumes; a GPU request is shown. Then the
  workers' command is run here: two torchrun nodes (node ranks 0 and 1 as
  the two pods), the feeders' arguments serving a tiny job (its endpoint
  and ports local): every element once per epoch. --metrics-listen is
  kept, and /metrics read while they train, when this sluice's client
  serves it, else dropped (said).
- systemd: both units under `systemd-analyze verify` (silent);
  sluice-feeder.service is Type=notify, Restart=on-failure, with
  --metrics-listen; sluice-torchrun@.service's ExecStart, expanded as
  systemd expands it (%i, %L, %t, ${VAR} one word, $VAR split) from an
  environment file made of the example in its comments, runs torchrun and
  trains against a local feeder; its torchrun options in `torchrun --help`.
- Container (deploy/container/Containerfile): every FROM is Debian 12 or
  an earlier stage; every package it installs is a Debian 12 package
  (apt-cache, skipped without package lists); the build stage installs
  every -dev package of scripts/deps.sh; the runtime stage installs the
  package of every library the built programs, libsluice and the Python
  extension link directly (dpkg -S), but for the C library and the
  compiler's run-time, which every Debian image has; the package lands on Debian's python3 path; the
  torch stage installs python3-torch and the script at the path the
  Kubernetes workers run.
Skipped parts say so (no systemd-analyze, no torchrun, no Python package
in the build: a sanitizer build has none).

Usage: test_recipes.py BUILD_DIR   (prints "N passed, 0 failed")
"""
import glob
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(sys.argv[1])
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
RECORD = os.path.join(BUILD, "tools", "sluice-record")
SCRIPT = os.path.join(ROOT, "examples", "torch_train.py")
K8S = os.path.join(ROOT, "deploy", "kubernetes")
TMP = tempfile.mkdtemp(prefix="sluice-recipes-")
TORCHRUN = shutil.which("torchrun")
# the torchrun runs need torch and this build's Python package (a sanitizer
# build has none)
HAVE_TORCH = TORCHRUN is not None and subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                                     capture_output=True).returncode == 0 and \
    bool(glob.glob(os.path.join(BUILD, "python", "sluice", "_sluice*.so")))
RECORDS = 160
passed = 0


def ok(what):
    global passed
    passed += 1
    print("ok %d - %s" % (passed, what))
    sys.stdout.flush()


def fail(what):
    print("FAIL: %s" % what, file=sys.stderr)
    print("%d passed, 1 failed (kept %s)" % (passed, TMP), file=sys.stderr)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def help_options(argv, env=None):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True, env=env)
    check(p.returncode == 0, "%s --help: exit %d: %s" % (argv, p.returncode, p.stderr[-300:]))
    names = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9_-]*)", p.stdout))
    check(len(names) > 5, "%s --help: only %d options" % (argv, len(names)))
    return names


OPTIONS = {"sluice-feeder": help_options([FEEDER]), "sluice-trainer": help_options([TRAINER])}
if TORCHRUN:
    OPTIONS["torchrun"] = help_options([TORCHRUN])
# the script's argparse (its --help needs neither torch nor sluice)
OPTIONS["torch_train.py"] = help_options(["python3", SCRIPT])


def flags(args):
    return [a[2:].split("=", 1)[0] for a in args if a.startswith("--")]


def check_flags(where, prog, args):
    if prog not in OPTIONS:
        print("SKIP %s: no %s here to check its options" % (where, prog))
        return 0
    for f in flags(args):
        check(f in OPTIONS[prog], "%s: %s has no option --%s" % (where, prog, f))
    return len(flags(args))


def arg(args, name):
    for a in args:
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    fail("no --%s= in %s" % (name, args))


def load(path):
    try:
        return [d for d in yaml.safe_load_all(open(path)) if d is not None]
    except yaml.YAMLError as e:
        fail("%s: %s" % (path, e))


def pod_spec(d):
    return d.get("spec", {}).get("template", {}).get("spec", {})


def gen_job():
    out = os.path.join(TMP, "d")
    p = subprocess.run([RECORD, "gen", "--output-dir", out, "--records", str(RECORDS), "--shards", "2",
                        "--image-bytes", "32", "--classes", "4", "--prefix", "s"], capture_output=True, text=True)
    check(p.returncode == 0, "sluice-record gen: %s" % p.stderr)
    job = os.path.join(TMP, "job.json")
    with open(job, "w") as f:
        json.dump({"name": "recipe-tiny", "files": [os.path.join(out, "s-*.tfrecord")], "format": "tfrecord",
                   "features": {"image": {"dtype": "uint8", "shape": [32], "from": "bytes"},
                                "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
                   "global_batch_size": 16, "epochs": 2, "shuffle": {"buffer": 32, "seed": 5}}, f)
    return job


def client_serves_metrics():
    """Does this build's sluice client take metrics_listen= (issue #29)?"""
    code = ("import sluice\ntry:\n    sluice.Client([], 'x', metrics_listen='127.0.0.1:0')\n"
            "except TypeError as e:\n    print('no' if 'metrics_listen' in str(e) else 'yes')\n"
            "except Exception:\n    print('yes')\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python")))
    return p.stdout.strip() == "yes"


def summaries_once(where, files, world):
    sums = []
    for f in files:
        check(os.path.exists(f), "%s: no summary %s" % (where, f))
        sums.append(json.load(open(f)))
    check(sorted(s["rank"] for s in sums) == list(range(world)) and all(s["world"] == world for s in sums),
          "%s: ranks %s" % (where, [(s["rank"], s["world"]) for s in sums]))
    for e in range(2):
        ids = sorted(i for s in sums for i in s["ids"][e])
        check(ids == list(range(RECORDS)), "%s: epoch %d: %d ids seen, %d distinct, not 0..%d once each"
              % (where, e, len(ids), len(set(ids)), RECORDS - 1))


def start_feeder(argv, log):
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"))


def finish(procs, seconds, where):
    """Wait for procs; once one fails the others are stopped (the caller
    reports the statuses)."""
    deadline = time.monotonic() + seconds
    while any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
            for q in procs:
                if q.poll() is None:
                    q.kill()
                    q.wait()
            check(time.monotonic() <= deadline, "%s: still running after %d s" % (where, seconds))
            return
        time.sleep(0.1)


# ---- metrics, probes, annotations, resources in every manifest ----

def metrics_everywhere():
    n = 0
    for path in sorted(glob.glob(os.path.join(K8S, "*.yaml")) + glob.glob(os.path.join(K8S, "*", "*.yaml"))):
        rel = os.path.relpath(path, ROOT)
        for d in load(path):
            spec = pod_spec(d)
            for c in spec.get("containers", []):
                where = "%s %s container %s" % (rel, d["kind"], c["name"])
                ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
                listen = [a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--metrics-listen=")]
                check(len(listen) == 1, "%s: no --metrics-listen" % where)
                mport = int(listen[0].rsplit(":", 1)[1])
                check(ports.get("metrics") == mport, "%s: containerPort 'metrics' %s, --metrics-listen port %d"
                      % (where, ports.get("metrics"), mport))
                probes = [k for k in ("readinessProbe", "livenessProbe", "startupProbe") if k in c]
                check("livenessProbe" in probes, "%s: no livenessProbe" % where)
                for k in probes:
                    g = c[k].get("httpGet", {})
                    check(g.get("path") == "/metrics" and g.get("port") in ("metrics", mport),
                          "%s: %s does not GET /metrics on the metrics port: %s" % (where, k, c[k]))
                ann = d["spec"]["template"]["metadata"].get("annotations", {})
                check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(mport)
                      and ann.get("prometheus.io/path") == "/metrics",
                      "%s: the scrape annotations do not point at port %d: %s" % (where, mport, ann))
                res = c.get("resources", {})
                for k in ("requests", "limits"):
                    check({"cpu", "memory"} <= set(res.get(k, {})), "%s: resources.%s without cpu and memory: %s"
                          % (where, k, res))
                n += 1
    check(n >= 4, "only %d containers with metrics" % n)
    ok("deploy/kubernetes: the %d containers serve --metrics-listen on their 'metrics' port, probe GET /metrics "
       "there, and their pods' prometheus.io annotations name it; cpu and memory requested and limited" % n)


# ---- Kubernetes: feeders that join, for the autoscaler ----

def kubernetes_autoscale():
    """autoscale/sluice-feeders-joining.yaml is sluice-feeders.yaml's
    StatefulSet but for the feeder's command (a shell line that picks the
    form from the pod's index) and --feeders (the line's); the HPA scales
    it from its first feeders on; the line, run here as the pods would run
    it with a stand-in feeder, gives pods 0 and 1 the arguments of
    sluice-feeders.yaml, and pod J >= 2 those with --feeders J + 1, the
    join of the first feeders at their stable names and its own name."""
    rel = "deploy/kubernetes/autoscale/sluice-feeders-joining.yaml"
    base = next(d for d in load(os.path.join(K8S, "sluice-feeders.yaml")) if d["kind"] == "StatefulSet")
    docs = load(os.path.join(ROOT, rel))
    check(len(docs) == 1 and docs[0]["kind"] == "StatefulSet", "%s: one StatefulSet expected" % rel)
    sts = docs[0]
    hpa = next(d for d in load(os.path.join(K8S, "autoscale", "sluice-feeders-hpa.yaml"))
               if d["kind"] == "HorizontalPodAutoscaler")
    name, svc, F = sts["metadata"]["name"], sts["spec"]["serviceName"], base["spec"]["replicas"]
    check(name == base["metadata"]["name"] and hpa["spec"]["scaleTargetRef"] ==
          {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name},
          "the HPA does not scale the StatefulSet %s: %s" % (name, hpa["spec"]["scaleTargetRef"]))
    check(hpa["spec"]["minReplicas"] == F == sts["spec"]["replicas"] and hpa["spec"]["maxReplicas"] <= 64,
          "the HPA's minReplicas %s, the StatefulSets' replicas %s and %s differ (or maxReplicas over 64)"
          % (hpa["spec"]["minReplicas"], F, sts["spec"]["replicas"]))
    bc, c = (x["spec"]["template"]["spec"]["containers"][0] for x in (base, sts))
    a, b = json.loads(json.dumps(base)), json.loads(json.dumps(sts))
    for x in (a, b):
        del x["spec"]["template"]["spec"]["containers"][0]["command"]
        del x["spec"]["template"]["spec"]["containers"][0]["args"]
    check(a == b, "%s differs from sluice-feeders.yaml's StatefulSet beyond the feeder's command and --feeders" % rel)
    check(c["args"] == [x for x in bc["args"] if not x.startswith("--feeders=")],
          "%s: the feeder's args should be sluice-feeders.yaml's without --feeders" % rel)
    check(len(c["command"]) == 4 and c["command"][:2] == ["/bin/sh", "-c"] and c["command"][3] == "sluice-feeder",
          "%s: the command should be /bin/sh -c LINE sluice-feeder: %s" % (rel, c["command"]))
    line = c["command"][2]
    check("$(" not in line, "%s: '$(' in the shell line, which the kubelet expands as a variable" % rel)
    check(bc["command"] == ["/usr/local/bin/sluice-feeder"] and "/usr/local/bin/sluice-feeder" in line,
          "%s: the line does not exec %s" % (rel, bc["command"]))
    fport = int(arg(bc["args"], "listen").rsplit(":", 1)[1])
    stub = os.path.join(TMP, "stand-in-feeder")
    with open(stub, "w") as f:
        f.write("#!%s\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n" % sys.executable)
    os.chmod(stub, 0o755)
    line = line.replace("/usr/local/bin/sluice-feeder", stub)
    for i in range(F + 3):
        def at(args):
            return [x.replace("$(FEEDER_INDEX)", str(i)) for x in args]
        p = subprocess.run(["/bin/sh", "-c", line, "sluice-feeder"] + at(c["args"]), capture_output=True, text=True,
                           env=dict(os.environ, FEEDER_INDEX=str(i)), timeout=20)
        check(p.returncode == 0, "%s: the line for pod %d: exit %d: %s" % (rel, i, p.returncode, p.stderr))
        got = json.loads(p.stdout)
        want = at(bc["args"])
        if i >= F:
            want = [x for x in want if not x.startswith("--feeders=")] + [
                "--feeders=%d" % (i + 1), "--advertise=tcp://%s-%d.%s:%d" % (name, i, svc, fport),
                "--join=" + ",".join("tcp://%s-%d.%s:%d" % (name, j, svc, fport) for j in range(F))]
        check(sorted(got) == sorted(want), "%s: pod %d runs sluice-feeder %s, want %s" % (rel, i, got, want))
        check_flags("%s pod %d" % (rel, i), "sluice-feeder", got)
    ok("%s: sluice-feeders.yaml's StatefulSet but for the feeder's command; the HPA scales it from %d; pods 0-%d "
       "run as there, pods %d-%d join the first %d feeders as feeder J of J + 1 at their stable names"
       % (rel, F, F - 1, F, F + 2, F))


# ---- Kubernetes: torchrun workers ----

def normalized_feeders(sts):
    """The StatefulSet without its shape arguments and comments."""
    s = json.loads(json.dumps(sts))
    c = s["spec"]["template"]["spec"]["containers"][0]
    c["args"] = [a for a in c["args"] if not a.startswith(("--workers=", "--replicas="))]
    return s


def kubernetes_torchrun():
    docs = []
    for path in sorted(glob.glob(os.path.join(K8S, "torchrun", "*.yaml"))):
        docs += [(os.path.basename(path), d) for d in load(path)]
    for f, d in docs:
        check("apiVersion" in d and "kind" in d and "name" in d.get("metadata", {}), "%s: a nameless document" % f)
    kinds = {}
    for f, d in docs:
        kinds.setdefault(d["kind"], []).append(d)
    check(len(kinds.get("StatefulSet", [])) == 1 and len(kinds.get("Job", [])) == 1,
          "torchrun/: one feeder StatefulSet and one worker Job expected")
    sts, job = kinds["StatefulSet"][0], kinds["Job"][0]
    services = {s["metadata"]["name"]: s for s in kinds["Service"]}
    base = [d for d in load(os.path.join(K8S, "sluice-feeders.yaml")) if d["kind"] == "StatefulSet"][0]
    check(normalized_feeders(base) == normalized_feeders(sts),
          "torchrun/sluice-feeders.yaml is no longer sluice-feeders.yaml's StatefulSet but for --workers/--replicas")
    jobdoc = load(os.path.join(K8S, "sluice-job.yaml"))[0]
    job_name = json.loads(jobdoc["data"]["job.json"])["name"]
    ok("deploy/kubernetes/torchrun: %d documents parse; its feeders are sluice-feeders.yaml's but for the shape"
       % len(docs))

    fc = sts["spec"]["template"]["spec"]["containers"][0]
    fargs = fc["args"]
    check_flags("torchrun/sluice-feeders.yaml", "sluice-feeder", fargs)
    spec, tpl = job["spec"], pod_spec(job)
    check(spec.get("completionMode") == "Indexed" and spec.get("parallelism") == spec["completions"],
          "the workers' Job is not Indexed with every pod at once")
    wc = tpl["containers"][0]
    check(wc["command"] == ["torchrun"], "the workers run %s, not torchrun" % wc["command"])
    args = wc["args"]
    i = next(k for k, a in enumerate(args) if not a.startswith("--"))
    targs, script, sargs = args[:i], args[i], args[i + 1:]
    n = check_flags("torchrun/sluice-workers.yaml torchrun", "torchrun", targs)
    n += check_flags("torchrun/sluice-workers.yaml script", "torch_train.py", sargs)
    nnodes, nproc = int(arg(targs, "nnodes")), int(arg(targs, "nproc_per_node"))
    check(nnodes == spec["completions"], "--nnodes %d, completions %d" % (nnodes, spec["completions"]))
    check(int(arg(fargs, "workers")) == nnodes * nproc and arg(fargs, "replicas") == "1",
          "the feeders serve --workers %s --replicas %s, the workers are %d x %d processes of one replica"
          % (arg(fargs, "workers"), arg(fargs, "replicas"), nnodes, nproc))
    check(arg(targs, "node_rank") == "$(WORKER_INDEX)", "--node_rank is not $(WORKER_INDEX)")
    env = {e["name"]: e for e in wc["env"]}
    check(env["WORKER_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"] ==
          "metadata.annotations['batch.kubernetes.io/job-completion-index']", "WORKER_INDEX is not the index")
    svc = services.get(tpl.get("subdomain"))
    check(svc is not None and svc["spec"].get("clusterIP") == "None" and
          svc["spec"]["selector"] == {"job-name": job["metadata"]["name"]},
          "the workers' subdomain is not a headless Service selecting the Job's pods")
    check(arg(targs, "master_addr") == "%s-0.%s" % (job["metadata"]["name"], tpl["subdomain"]),
          "--master_addr is not pod 0's name: %s" % arg(targs, "master_addr"))
    mport = int(arg(targs, "master_port"))
    check([p["port"] for p in svc["spec"]["ports"]] == [mport] and
          {p["name"]: p["containerPort"] for p in wc["ports"]}.get("rendezvous") == mport,
          "--master_port %d is not the Service's and the container's rendezvous port" % mport)
    F = sts["spec"]["replicas"]
    fport = int(arg(fargs, "listen").rsplit(":", 1)[1])
    want = ",".join("tcp://%s-%d.%s:%d" % (sts["metadata"]["name"], j, sts["spec"]["serviceName"], fport)
                    for j in range(F))
    check(env["SLUICE_FEEDER_ENDPOINTS"]["value"] == want, "SLUICE_FEEDER_ENDPOINTS %s, not %s"
          % (env["SLUICE_FEEDER_ENDPOINTS"]["value"], want))
    check(env["SLUICE_JOB_NAME"]["value"] == job_name, "SLUICE_JOB_NAME is not the job's name %s" % job_name)
    mounts = {m["mountPath"]: m["name"] for m in wc["volumeMounts"]}
    vols = {v["name"]: v for v in tpl["volumes"]}
    key, pub = env["SLUICE_CURVE_KEY"]["value"], env["SLUICE_CURVE_SERVER_KEY"]["value"]
    check(os.path.dirname(key) in mounts and "emptyDir" in vols[mounts[os.path.dirname(key)]],
          "SLUICE_CURVE_KEY is not in the init container's memory volume")
    check(vols[mounts[os.path.dirname(pub)]]["configMap"]["items"] == [{"key": "feeder.pub", "path": "feeder.pub"}],
          "SLUICE_CURVE_SERVER_KEY is not the feeders' public key")
    check("nvidia.com/gpu" in open(os.path.join(K8S, "torchrun", "sluice-workers.yaml")).read(),
          "no GPU request shown")
    container = open(os.path.join(ROOT, "deploy", "container", "Containerfile")).read()
    check(script in container, "the workers run %s, which the Containerfile does not install" % script)
    ok("torchrun workers: an Indexed Job of %d pods x %d processes = the feeders' --workers; %d torchrun and "
       "script options in their --help; --node_rank the index, --master_addr pod 0, --master_port the Service's; "
       "SLUICE_FEEDER_ENDPOINTS the %d feeders in order; the keys mounted; the script the image installs"
       % (nnodes, nproc, n, F))
    return fargs, targs, sargs, nnodes, nproc


def kubernetes_torchrun_run(fargs, targs, sargs, nnodes, nproc, job):
    """The workers' command, run here as the pods would run it."""
    if not HAVE_TORCH:
        print("SKIP the torchrun workers run: no torchrun or torch here, or no Python package in this build")
        return
    port = random.randint(20000, 45000)
    fargv = [FEEDER]
    for a in fargs:
        name = a[2:].split("=", 1)[0]
        if name in ("curve-key", "curve-allow"):
            continue  # plaintext here: the keys are cli_deploy's
        a = {"job": "--job=" + job, "listen": "--listen=tcp://127.0.0.1:%d" % port, "feeders": "--feeders=1",
             "feeder-index": "--feeder-index=0", "metrics-listen": "--metrics-listen=127.0.0.1:0",
             "threads": "--threads=1", "piece-memory": "--piece-memory=64M"}.get(name, a)
        fargv.append(a)
    flog = os.path.join(TMP, "k8s-feeder.log")
    feeder = start_feeder(fargv, flog)
    metrics = client_serves_metrics()
    mbase = random.randint(45001, 60000)
    args = []
    for a in sargs:
        if a.startswith("--metrics-listen="):
            if not metrics:
                continue
            a = "--metrics-listen=127.0.0.1:%d" % mbase
        args.append(a)
    rdzv = port + 1
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), SLUICE_FEEDER_ENDPOINTS="tcp://127.0.0.1:%d"
               % port, SLUICE_JOB_NAME="recipe-tiny", CUDA_VISIBLE_DEVICES="")
    nodes = []
    for node in range(nnodes):
        argv = [TORCHRUN]
        for a in targs:
            name = a[2:].split("=", 1)[0]
            a = {"node_rank": "--node_rank=%d" % node, "master_addr": "--master_addr=127.0.0.1",
                 "master_port": "--master_port=%d" % rdzv,
                 "log_dir": "--log_dir=%s/torchrun-%d" % (TMP, node)}.get(name, a)
            argv.append(a)
        # each pod has its own network namespace; here the nodes share
        # one host: node k's processes take the ports after node k-1's
        argv += [SCRIPT, "--classes=4", "--summary=%s/k8s-{rank}.json" % TMP] + \
            [("--metrics-listen=127.0.0.1:%d" % (mbase + node * nproc)) if a.startswith("--metrics-listen=") else a
             for a in args if not a.startswith("--classes=")]
        nodes.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(TMP, "k8s-node-%d.log" % node), "w")))
    scraped = None
    if metrics:
        deadline = time.monotonic() + 60
        while scraped is None and time.monotonic() < deadline and any(p.poll() is None for p in nodes):
            try:
                scraped = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mbase, timeout=2).read().decode()
            except OSError:
                time.sleep(0.1)
    finish(nodes + [feeder], 120, "the torchrun workers as the manifest runs them")
    for k, p in enumerate(nodes):
        check(p.returncode == 0, "torchrun node %d: exit %d: %s" % (k, p.returncode,
                                                                   open(os.path.join(TMP, "k8s-node-%d.log" % k))
                                                                   .read()[-2000:]))
    check(feeder.returncode == 0, "the feeder: exit %d: %s" % (feeder.returncode, open(flog).read()[-1000:]))
    summaries_once("the manifest's workers", glob.glob(os.path.join(TMP, "k8s-*.json")), nnodes * nproc)
    if metrics:
        check(scraped is not None, "the workers' /metrics was never read")
        # the client library's: the dashboard's job variable and input families
        for want in ('sluice_process_info{sluice_job="recipe-tiny",worker="0",program="client",',
                     'sluice_trainer_steps_total{sluice_job="recipe-tiny",worker="0"} ',
                     'sluice_trainer_input_wait_seconds_total{sluice_job="recipe-tiny",worker="0"} '):
            check(want in scraped, "the workers' /metrics lacks %s: %s" % (want, scraped[:600]))
    ok("the workers' torchrun command (%d nodes, node ranks as the pods' indexes) trained against the feeders' "
       "arguments: every element once per epoch; %s" % (nnodes, "/metrics read on rank 0's port" if metrics else
                                                        "--metrics-listen dropped: this sluice's client serves "
                                                        "no /metrics yet"))


# ---- systemd ----

def unit_service(path):
    """[Service] entries: name -> [values], continuation lines joined."""
    out, section, cur = {}, None, ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if cur:
            line = cur + " " + line.strip()
            cur = ""
        if line.endswith("\\"):
            cur = line[:-1].rstrip()
            continue
        s = line.strip()
        if not s or s.startswith(("#", ";")):
            continue
        if s.startswith("["):
            section = s.strip("[]")
            continue
        k, v = s.split("=", 1)
        out.setdefault((section, k.strip()), []).append(v.strip())
    return out


def verify(path, replace):
    copy_dir = os.path.join(TMP, "units")
    os.makedirs(copy_dir, exist_ok=True)
    text = open(path).read()
    for a, b in replace.items():
        text = text.replace(a, b)
    copy = os.path.join(copy_dir, os.path.basename(path))
    with open(copy, "w") as f:
        f.write(text)
    name = os.path.basename(path).replace("@.", "@0.")
    p = subprocess.run(["systemd-analyze", "verify", os.path.join(copy_dir, name)], capture_output=True, text=True)
    stem = os.path.basename(path).split("@")[0].split(".")[0]
    ours = [line for line in (p.stdout + p.stderr).splitlines() if stem in line]
    check(p.returncode == 0 and not ours, "systemd-analyze verify %s: exit %d: %s" % (name, p.returncode,
                                                                                    "\n".join(ours)))


def systemd(job):
    fpath = os.path.join(ROOT, "deploy", "systemd", "sluice-feeder.service")
    tpath = os.path.join(ROOT, "deploy", "systemd", "sluice-torchrun@.service")
    fu, tu = unit_service(fpath), unit_service(tpath)
    check(fu[("Service", "Type")] == ["notify"] and fu[("Service", "Restart")] == ["on-failure"],
          "sluice-feeder.service: Type %s, Restart %s" % (fu[("Service", "Type")], fu[("Service", "Restart")]))
    fargv = shlex.split(fu[("Service", "ExecStart")][0])
    check("--metrics-listen" in fargv, "sluice-feeder.service: no --metrics-listen")
    check(tu[("Service", "Restart")] == ["on-failure"], "sluice-torchrun@.service: Restart is not on-failure")
    texec = tu[("Service", "ExecStart")]
    check(len(texec) == 1, "sluice-torchrun@.service: %d ExecStart lines" % len(texec))
    targv = shlex.split(texec[0])
    check(os.path.basename(targv[0]) == "torchrun", "sluice-torchrun@.service runs %s" % targv[0])
    i = next(k for k, a in enumerate(targv) if k > 0 and not a.startswith("-") and not targv[k - 1] in
             ("--redirects", "--tee", "--log_dir"))
    n = check_flags("sluice-torchrun@.service", "torchrun", targv[1:i])
    ok("sluice-feeder.service: Type=notify, Restart=on-failure, --metrics-listen; sluice-torchrun@.service: "
       "torchrun's %d options in its --help, Restart=on-failure" % n)
    if shutil.which("systemd-analyze") is None:
        print("SKIP systemd-analyze verify: no systemd-analyze here (Debian's systemd)")
    else:
        verify(fpath, {fargv[0]: FEEDER})
        verify(tpath, {targv[0]: TORCHRUN or "/bin/true"})
        ok("systemd-analyze verify: both units, no complaint")
    if not HAVE_TORCH:
        print("SKIP sluice-torchrun@.service's command: no torchrun or torch here, or no Python package in this build")
        return
    # the environment file, from the example in the unit's comments
    text = open(tpath).read()
    example = re.search(r"Settings: /etc/sluice/torchrun.env[^\n]*\n((?:#     [A-Z_]+=.*\n)+)", text)
    check(example is not None, "sluice-torchrun@.service: no example of /etc/sluice/torchrun.env in its comments")
    env_file = {}
    for line in example.group(1).splitlines():
        k, v = line[len("#     "):].split("=", 1)
        env_file[k] = re.sub(r"\s+#.*$", "", v).strip()
    for k in ("SLUICE_FEEDER_ENDPOINTS", "SLUICE_JOB_NAME", "SLUICE_NNODES", "SLUICE_NPROC_PER_NODE",
              "SLUICE_MASTER_ADDR", "SLUICE_MASTER_PORT", "SLUICE_SCRIPT", "SLUICE_SCRIPT_ARGS"):
        check(k in env_file, "the unit's example environment lacks %s" % k)
    check(set(re.findall(r"\$\{?([A-Z_]+)\}?", texec[0])) <= set(env_file),
          "ExecStart uses variables the example does not set: %s" % texec[0])
    port = random.randint(20000, 45000)
    env_file.update({"SLUICE_FEEDER_ENDPOINTS": "tcp://127.0.0.1:%d" % port, "SLUICE_JOB_NAME": "recipe-tiny",
                     "SLUICE_NNODES": "1", "SLUICE_NPROC_PER_NODE": "2", "SLUICE_MASTER_ADDR": "127.0.0.1",
                     "SLUICE_MASTER_PORT": str(port + 1), "SLUICE_SCRIPT": SCRIPT,
                     "SLUICE_SCRIPT_ARGS": "--classes 4 --summary %s/unit-{rank}.json" % TMP})
    # systemd's expansion: specifiers, ${VAR} as one word, $VAR split
    spec = {"%i": "0", "%L": os.path.join(TMP, "log"), "%t": os.path.join(TMP, "run"), "%S": TMP}
    argv = []
    for w in shlex.split(texec[0]):
        for k, v in spec.items():
            w = w.replace(k, v)
        m = re.fullmatch(r"\$([A-Z_]+)", w)
        if m:
            argv += env_file[m.group(1)].split()
            continue
        argv.append(re.sub(r"\$\{([A-Z_]+)\}", lambda m: env_file[m.group(1)], w))
    argv[0] = TORCHRUN
    feeder = start_feeder([FEEDER, "--job", job, "--listen", "tcp://127.0.0.1:%d" % port, "--workers", "2",
                           "--replicas", "1", "--threads", "1", "--report-s", "0"], os.path.join(TMP, "unit-f.log"))
    log = os.path.join(TMP, "unit-torchrun.log")
    # the service's environment: EnvironmentFile=, then Environment= (but
    # for the keys: this run is in plaintext, the keys are cli_deploy's)
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), CUDA_VISIBLE_DEVICES="")
    env.update(env_file)
    for line in tu[("Service", "Environment")]:
        for w in shlex.split(line):
            k, v = w.split("=", 1)
            if not k.startswith("SLUICE_CURVE_"):
                for a, b in spec.items():
                    v = v.replace(a, b)
                env[k] = v
    node = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                            env=env)
    finish([node, feeder], 120, "sluice-torchrun@0's ExecStart")
    check(node.returncode == 0 and feeder.returncode == 0, "sluice-torchrun@0's ExecStart: exit %d (feeder %d): %s"
          % (node.returncode, feeder.returncode, open(log).read()[-2000:]))
    summaries_once("sluice-torchrun@0", glob.glob(os.path.join(TMP, "unit-*.json")), 2)
    check(glob.glob(os.path.join(TMP, "log", "sluice-torchrun-0", "*")), "no torchrun logs under %L")
    ok("sluice-torchrun@0.service's ExecStart, expanded from the example environment file (2 processes), trained "
       "against a feeder: every element once per epoch; torchrun's logs under the unit's LogsDirectory")


# ---- container ----

def stages(text):
    """[(name, base, [apt packages], text)] of the Containerfile."""
    text = text.replace("\\\n", " ")
    out = []
    for m in re.finditer(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$(.*?)(?=^FROM|\Z)", text, re.M | re.S):
        base, name, body = m.group(1), m.group(2), m.group(3)
        pkgs = []
        for inst in re.findall(r"apt-get install ([^&\n]*)", body):
            pkgs += [w for w in inst.split() if not w.startswith("-")]
        out.append((name, base, pkgs, body))
    return out


def container():
    path = os.path.join(ROOT, "deploy", "container", "Containerfile")
    text = open(path).read()
    st = stages(text)
    names = [s[0] for s in st]
    check(names == ["build", "runtime", "torch"], "Containerfile stages: %s" % names)
    for k, (name, base, pkgs, body) in enumerate(st):
        check(base in ("debian:12", "debian:12-slim") or base in names[:k],
              "stage %s: FROM %s is neither Debian 12 nor an earlier stage" % (name, base))
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    check(not re.search(r"\b(pip3?|conda|curl|wget)\s", code),
          "the Containerfile fetches from outside Debian (pip, conda, curl, wget)")
    every = sorted({p for s in st for p in s[2]})
    p = subprocess.run(["apt-cache", "show", "--no-all-versions"] + every, capture_output=True, text=True)
    if shutil.which("apt-cache") is None or "Package:" not in p.stdout:
        print("SKIP the Debian package names: no apt package lists here")
    else:
        known = set(re.findall(r"^Package: (\S+)", p.stdout, re.M))
        check(set(every) <= known, "not Debian packages here: %s" % sorted(set(every) - known))
        ok("Containerfile: FROM debian:12 / debian:12-slim only; its %d packages are Debian's; nothing from pip "
           "or the network" % len(every))
    deps = open(os.path.join(ROOT, "scripts", "deps.sh")).read()
    pkglist = re.search(r"pkgs=\(([^)]*)\)", deps).group(1).split()
    dev = {p for p in pkglist if p.endswith("-dev")} | {"build-essential", "cmake", "pkg-config"}
    check(dev <= set(st[0][2]), "the build stage lacks scripts/deps.sh's %s" % sorted(dev - set(st[0][2])))
    # the run-time libraries: what the built files link directly
    files = [FEEDER, TRAINER, RECORD, os.path.join(BUILD, "tools", "sluice-bench")] + \
        glob.glob(os.path.join(BUILD, "client", "libsluice.so")) + \
        glob.glob(os.path.join(BUILD, "python", "sluice", "*.so"))
    need = {}
    for f in files:
        ldd = subprocess.run(["ldd", f], capture_output=True, text=True).stdout
        where = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
        needed = re.findall(r"\(NEEDED\).*\[(.*)\]", subprocess.run(["readelf", "-d", f], capture_output=True,
                                                                   text=True).stdout)
        for lib in needed:
            if lib not in where or where[lib].startswith(BUILD) or lib.startswith(("libasan", "libubsan",
                                                                                "libtsan", "liblsan")):
                continue  # ours (libsluice), or a sanitizer build's (the image builds without)
            real = where[lib]
            for cand in (real, os.path.realpath(real), "/usr" + real, real.replace("/usr/lib/", "/lib/", 1)):
                q = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
                if q.returncode == 0:
                    need[q.stdout.split(":", 1)[0]] = lib
                    break
            else:
                fail("dpkg -S: no package holds %s (%s)" % (real, lib))
    # in every Debian image, debian:12-slim's included: the C library and
    # the compiler's run-time (the essential packages depend on them)
    required = {"libc6", "libgcc-s1"} & set(need)
    missing = sorted(set(need) - required - set(st[1][2]))
    check(not missing, "the runtime stage lacks %s" % ", ".join("%s (%s)" % (p, need[p]) for p in missing))
    ok("the build stage installs every -dev package of scripts/deps.sh; the runtime stage the packages of the %d "
       "libraries the programs, libsluice and the extension link (%s in every Debian)"
       % (len(need), ", ".join(sorted(required)) or "none"))
    m = re.search(r"-DSLUICE_PYTHON_DIR=(\S+)", text)
    m2 = re.search(r"-DCMAKE_INSTALL_PREFIX=(\S+)", text)
    check(m is not None and m2 is not None, "the build stage sets no SLUICE_PYTHON_DIR or prefix")
    pydir = os.path.join(m2.group(1), m.group(1))
    p = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"], capture_output=True,
                       text=True)
    check(pydir in p.stdout.split(), "the package goes to %s, not on Debian's python3 path" % pydir)
    check("python3-torch" in st[2][2], "the torch stage does not install python3-torch")
    ok("the package lands in %s, on Debian's python3 path; the torch stage adds python3-torch" % pydir)


def main():
    job = gen_job()
    metrics_everywhere()
    kubernetes_autoscale()
    fargs, targs, sargs, nnodes, nproc = kubernetes_torchrun()
    kubernetes_torchrun_run(fargs, targs, sargs, nnodes, nproc, job)
    systemd(job)
    container()
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, 0 failed" % passed)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    main()
