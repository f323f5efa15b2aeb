#!/usr/bin/env python3
"""The deployment recipes, checked (issue #14 part 4; docs/deploy.md).

- Kubernetes (deploy/kubernetes/*.yaml): every document parses; every
  `--flag` a sluice container passes is an option of that binary's --help;
  the shapes agree (the feeders' StatefulSet and its headless Service, the
  --feeders count and the replicas, the trainers' Indexed Job, its
  subdomain and headless Service, the ports); TF_CONFIG, written for each
  completion index, is JSON naming every feeder and worker in order; the
  ConfigMap's job file passes `sluice-feeder plan`; and each container's
  arguments, run here (the feeder on an ipc endpoint and generated shards,
  trainer 1 with its TF_CONFIG), get past option checking (no usage error).
- Slurm (deploy/slurm/sluice.sbatch): `bash -n`, and the flags of both
  binaries' command lines and default extra arguments (test_deploy_slurm.sh
  runs the script).
- systemd (deploy/systemd/sluice-feeder.service): ExecStart's flags; the
  hardening options present; `systemd-analyze verify` silent and the offline
  security exposure at most 2.0 (skipped, saying so, without
  systemd-analyze); and the feeder run as ExecStart runs it, under strace:
  every system call it makes is allowed by the unit's SystemCallFilter,
  every socket's family by RestrictAddressFamilies, and no mapping is both
  writable and executable (MemoryDenyWriteExecute) (skipped without strace).
- docs: --cluster-from in both binaries' --help and in docs/feeder.md and
  docs/trainer.md; docs/deploy.md linked from README.md.

Usage: test_deploy.py BUILD_DIR   (prints "N passed, 0 failed")
"""
import glob
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(sys.argv[1])
BINS = {"sluice-feeder": os.path.join(BUILD, "feeder", "sluice-feeder"),
        "sluice-trainer": os.path.join(BUILD, "trainer", "sluice-trainer")}
RECORD = os.path.join(BUILD, "tools", "sluice-record")
TMP = tempfile.mkdtemp(prefix="sluice-deploy-")
passed = 0


def ok(what):
    global passed
    passed += 1
    print("ok %d - %s" % (passed, what))
    sys.stdout.flush()


def fail(what):
    print("FAIL: %s" % what, file=sys.stderr)
    print("%d passed, 1 failed" % passed, file=sys.stderr)
    shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def options(binary):
    """The long options --help lists."""
    p = subprocess.run([BINS[binary], "--help"], capture_output=True, text=True)
    check(p.returncode == 0, "%s --help: exit %d" % (binary, p.returncode))
    names = set(re.findall(r"^  (?:-\w, |    )--([a-z0-9][a-z0-9-]*)", p.stdout, re.M))
    check(len(names) > 10, "%s --help: only %d options found" % (binary, len(names)))
    return names


OPTIONS = {b: options(b) for b in BINS}


def check_flags(where, binary, args):
    """Every --flag in args is an option of binary; returns how many."""
    n = 0
    for a in args:
        if not a.startswith("--"):
            continue
        name = a[2:].split("=", 1)[0]
        check(name in OPTIONS[binary], "%s: %s has no option --%s (see %s --help)" % (where, binary, name, binary))
        n += 1
    check(n > 0, "%s: no --flag found for %s" % (where, binary))
    return n


def gen(name, image_bytes):
    out = os.path.join(TMP, name)
    p = subprocess.run([RECORD, "gen", "--output-dir", out, "--records", "600", "--shards", "2",
                        "--image-bytes", str(image_bytes), "--floats", "8", "--classes", "4", "--prefix", "s"],
                       capture_output=True, text=True)
    check(p.returncode == 0, "sluice-record gen: %s" % p.stderr)
    return os.path.join(out, "s-*.tfrecord")


def gets_past_options(where, argv, env=None, seconds=3):
    """Run argv for a few seconds: it must not stop with a usage error
    (exit 2 and a 'PROG: ...' line, which log lines never start with)."""
    p = subprocess.run(["timeout", "-k", "2", str(seconds)] + argv, capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL)
    prog = os.path.basename(argv[0])
    usage = [line for line in p.stderr.splitlines() if line.startswith(prog + ": ")]
    check(p.returncode != 2 and not usage, "%s: a usage error (exit %d): %s" % (where, p.returncode,
                                                                               "\n".join(usage) or p.stderr[-500:]))


# ---- Kubernetes ----

def containers(doc):
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return spec.get("containers", [])


def env_value(container, name):
    for i, e in enumerate(container.get("env", [])):
        if e["name"] == name:
            return i, e
    fail("container %s has no env %s" % (container["name"], name))


def kubernetes():
    docs = []
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "kubernetes", "*.yaml"))):
        try:
            for d in yaml.safe_load_all(open(path)):
                if d is not None:
                    docs.append((os.path.basename(path), d))
        except yaml.YAMLError as e:
            fail("%s: %s" % (path, e))
    check(len(docs) >= 5, "deploy/kubernetes: %d documents" % len(docs))
    for f, d in docs:
        check("apiVersion" in d and "kind" in d and "name" in d.get("metadata", {}),
              "%s: a document without apiVersion, kind or metadata.name" % f)
    ok("deploy/kubernetes: %d documents parse, each with apiVersion, kind and a name" % len(docs))
    by_kind = {}
    for f, d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    sts = by_kind.get("StatefulSet", []) + by_kind.get("Deployment", [])
    jobs = by_kind.get("Job", [])
    check(len(sts) == 1 and len(jobs) == 1, "one feeder StatefulSet and one trainer Job expected")
    sts = sts[0]
    services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
    configmaps = {c["metadata"]["name"]: c for c in by_kind.get("ConfigMap", [])}

    # every sluice container's flags
    n = 0
    for f, d in docs:
        for c in containers(d):
            binary = os.path.basename((c.get("command") or [""])[0])
            check(binary in BINS, "%s: container %s runs %r, not a sluice binary" % (f, c["name"], binary))
            n += check_flags("%s container %s" % (f, c["name"]), binary, c.get("args", []))
    ok("deploy/kubernetes: the %d flags the containers pass are options of their binaries" % n)

    # the feeders: StatefulSet behind a headless Service, --feeders = replicas
    fc = containers(sts)[0]
    fargs = dict(a[2:].split("=", 1) for a in fc["args"] if "=" in a)
    svc = services.get(sts["spec"]["serviceName"])
    check(svc is not None, "the StatefulSet's serviceName names no Service")
    check(svc["spec"].get("clusterIP") == "None", "the feeders' Service is not headless")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "the feeders' Service selects no feeder")
    check(all(labels.get(k) == v for k, v in sts["spec"]["selector"]["matchLabels"].items()),
          "the StatefulSet's selector does not match its pods")
    F = sts["spec"]["replicas"]
    check(int(fargs["feeders"]) == F, "--feeders %s but %d replicas" % (fargs["feeders"], F))
    check(fargs["feeder-index"] == "$(FEEDER_INDEX)", "--feeder-index is not $(FEEDER_INDEX)")
    _, e = env_value(fc, "FEEDER_INDEX")
    check("pod-index" in e["valueFrom"]["fieldRef"]["fieldPath"], "FEEDER_INDEX is not the pod index")
    fport = int(fargs["listen"].rsplit(":", 1)[1])
    check(fargs["listen"] == "tcp://*:%d" % fport, "--listen is not tcp://*:PORT")
    check([p["containerPort"] for p in fc["ports"]] == [fport], "the feeder's containerPort is not its --listen port")
    check([p["port"] for p in svc["spec"]["ports"]] == [fport], "the feeders' Service port is not --listen's")
    ok("feeders: a StatefulSet of %d behind the headless Service %s, --feeders %d, feeder j = pod index, port %d"
       % (F, svc["metadata"]["name"], F, fport))

    # the job file in the ConfigMap the feeders mount passes `plan`
    vols = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in fc["volumeMounts"]}
    jobdir = os.path.dirname(fargs["job"])
    cm = configmaps[vols[mounts[jobdir]]["configMap"]["name"]]
    jobtext = cm["data"][os.path.basename(fargs["job"])]
    job = json.loads(jobtext)
    jobfile = os.path.join(TMP, "job.json")
    open(jobfile, "w").write(jobtext)
    shards = gen("d784", 784)
    p = subprocess.run([BINS["sluice-feeder"], "plan", "--job", jobfile, "--files=" + shards,
                        "--workers", fargs["workers"], "--replicas", fargs["replicas"]], capture_output=True, text=True)
    check(p.returncode == 0, "the ConfigMap's job file: sluice-feeder plan: %s" % p.stderr)
    ok("the ConfigMap's job file '%s' passes sluice-feeder plan (%s workers x %s replicas)"
       % (job["name"], fargs["workers"], fargs["replicas"]))

    return sts, jobs[0], services, fargs, F, fport, job["name"], jobfile, shards


def kubernetes_trainers(jobk, services, fargs, F, fport, job_name):
    """The trainers: an Indexed Job, its pods in a headless Service's subdomain."""
    spec = jobk["spec"]
    tpl = spec["template"]["spec"]
    check(spec.get("completionMode") == "Indexed", "the trainers' Job is not Indexed")
    W = spec["completions"]
    check(spec.get("parallelism") == W, "parallelism %s, completions %d: the workers must run together"
          % (spec.get("parallelism"), W))
    check(tpl.get("restartPolicy") == "Never", "the trainers' restartPolicy is not Never")
    svc = services.get(tpl.get("subdomain"))
    check(svc is not None, "the trainers' subdomain names no Service")
    check(svc["spec"].get("clusterIP") == "None", "the trainers' Service is not headless")
    check(svc["spec"]["selector"] == {"job-name": jobk["metadata"]["name"]},
          "the trainers' Service does not select the Job's pods (job-name)")
    check(int(fargs["workers"]) == W, "the feeders settle --workers %s, the Job has %d" % (fargs["workers"], W))
    tc = containers(jobk)[0]
    targs = tc["args"]
    check("--cluster-from=tf_config" in targs, "the trainers do not read TF_CONFIG (--cluster-from=tf_config)")
    check("--job=" + job_name in targs, "the trainers' --job is not the job file's name '%s'" % job_name)
    i_idx, e = env_value(tc, "WORKER_INDEX")
    check(e["valueFrom"]["fieldRef"]["fieldPath"] ==
          "metadata.annotations['batch.kubernetes.io/job-completion-index']", "WORKER_INDEX is not the completion index")
    i_tf, e = env_value(tc, "TF_CONFIG")
    check(i_tf > i_idx, "TF_CONFIG is defined before WORKER_INDEX, which it uses")
    rport = [p["containerPort"] for p in tc["ports"]]
    check([p["port"] for p in svc["spec"]["ports"]] == rport, "the trainers' Service port is not the ring's")
    name, sub = jobk["metadata"]["name"], tpl["subdomain"]
    for w in range(W):
        text = e["value"].replace("$(WORKER_INDEX)", str(w))
        try:
            tf = json.loads(text)
        except ValueError as ex:
            fail("TF_CONFIG of worker %d: %s: %s" % (w, ex, text))
        check(tf["task"] == {"type": "worker", "index": w}, "TF_CONFIG of worker %d: task %s" % (w, tf["task"]))
        check(tf["cluster"]["worker"] == ["%s-%d.%s:%d" % (name, k, sub, rport[0]) for k in range(W)],
              "TF_CONFIG of worker %d: workers %s" % (w, tf["cluster"]["worker"]))
        check(tf["cluster"]["feeder"] == ["tcp://sluice-feeder-%d.sluice-feeder:%d" % (j, fport) for j in range(F)],
              "TF_CONFIG of worker %d: feeders %s" % (w, tf["cluster"]["feeder"]))
    ok("trainers: an Indexed Job of %d in the headless Service %s; TF_CONFIG of each worker lists the %d workers and "
       "%d feeders in order" % (W, sub, W, F))
    return tc, e["value"]


def kubernetes_run(fc, fargs, tc, tf_template, jobfile, shards):
    # the feeder's arguments as the pod runs them (index 1), on an ipc endpoint
    sock = "ipc://" + os.path.join(TMP, "k8s-feeder.sock")
    argv = [BINS["sluice-feeder"]]
    for a in fc["args"]:
        a = a.replace("$(FEEDER_INDEX)", "1")
        if a.startswith("--listen="):
            a = "--listen=" + sock
        if a.startswith("--job="):
            a = "--job=" + jobfile
        argv.append(a)
    gets_past_options("the feeder pod's arguments", argv + ["--files=" + shards], seconds=2)
    # trainer 1's: its TF_CONFIG read through --cluster-from tf_config
    env = dict(os.environ, TF_CONFIG=tf_template.replace("$(WORKER_INDEX)", "1"))
    gets_past_options("the trainer pod's arguments", [BINS["sluice-trainer"]] + tc["args"], env=env, seconds=3)
    ok("the feeder's and trainer 1's arguments (with TF_CONFIG) get past option checking")


# ---- Slurm ----

def slurm():
    path = os.path.join(ROOT, "deploy", "slurm", "sluice.sbatch")
    p = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(p.returncode == 0, "sluice.sbatch: bash -n: %s" % p.stderr)
    text = open(path).read()
    n = 0
    for var, binary in (("SLUICE_FEEDER", "sluice-feeder"), ("SLUICE_TRAINER", "sluice-trainer")):
        m = re.search(r'exec "\$%s" ((?:.*\\\n)*.*)' % var, text)
        check(m is not None, "sluice.sbatch: no exec \"$%s\" line" % var)
        n += check_flags("sluice.sbatch %s line" % var, binary, shlex.split(m.group(1).replace("\\\n", " ")))
        m = re.search(r':\s*"\$\{%s_ARGS:=([^}]*)\}"' % var, text)
        check(m is not None, "sluice.sbatch: no default %s_ARGS" % var)
        n += check_flags("sluice.sbatch %s_ARGS" % var, binary, shlex.split(m.group(1)))
    ok("deploy/slurm/sluice.sbatch: bash -n, and its %d flags are options of the binaries" % n)


# ---- systemd ----

def unit_entries(path):
    entries, section = [], None
    lines = open(path).read().replace("\\\n", " ").splitlines()
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        entries.append((section, k.strip(), v.strip()))
    return entries


def expand_group(group, seen=None):
    seen = set() if seen is None else seen
    p = subprocess.run(["systemd-analyze", "syscall-filter", group], capture_output=True, text=True)
    check(p.returncode == 0, "systemd-analyze syscall-filter %s: %s" % (group, p.stderr))
    names = set()
    for line in p.stdout.splitlines()[1:]:
        w = line.strip()
        if not w or w.startswith("#"):
            continue
        if w.startswith("@"):
            if w not in seen:
                seen.add(w)
                names |= expand_group(w, seen)
        else:
            names.add(w)
    return names


def systemd():
    path = os.path.join(ROOT, "deploy", "systemd", "sluice-feeder.service")
    entries = unit_entries(path)
    service = {}
    for sec, k, v in entries:
        if sec == "Service":
            service.setdefault(k, []).append(v)
    execs = service.get("ExecStart", [])
    check(len(execs) == 1, "the unit has %d ExecStart lines" % len(execs))
    argv = shlex.split(execs[0])
    check(os.path.basename(argv[0]) == "sluice-feeder", "ExecStart runs %s" % argv[0])
    n = check_flags("sluice-feeder.service ExecStart", "sluice-feeder", argv[1:])
    ok("deploy/systemd/sluice-feeder.service: ExecStart's %d flags are options of sluice-feeder" % n)
    want = {"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "NoNewPrivileges": "yes",
            "PrivateDevices": "yes", "DynamicUser": "yes", "MemoryDenyWriteExecute": "yes"}
    for k, v in want.items():
        check(service.get(k) == [v], "the unit lacks %s=%s" % (k, v))
    for k in ("ReadOnlyPaths", "RestrictAddressFamilies", "SystemCallFilter", "CapabilityBoundingSet"):
        check(k in service, "the unit lacks %s" % k)
    ok("the unit's hardening: %s, ReadOnlyPaths, RestrictAddressFamilies, SystemCallFilter"
       % ", ".join("%s=%s" % kv for kv in want.items()))

    if shutil.which("systemd-analyze") is None:
        print("SKIP systemd-analyze verify and the system call check: no systemd-analyze here")
        return
    # verify wants ExecStart's program to exist: the built one stands in
    copy = os.path.join(TMP, "sluice-feeder.service")
    open(copy, "w").write(open(path).read().replace(argv[0], BINS["sluice-feeder"]))
    p = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True, text=True)
    # complaints about this unit (the machine's own units may have theirs)
    ours = [line for line in (p.stdout + p.stderr).splitlines() if "sluice-feeder" in line]
    check(p.returncode == 0 and not ours, "systemd-analyze verify: exit %d: %s" % (p.returncode, "\n".join(ours)))
    ok("systemd-analyze verify: no complaint")
    p = subprocess.run(["systemd-analyze", "security", "--offline=true", copy], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout)
    if p.returncode != 0 or m is None:
        print("SKIP systemd-analyze security --offline: not supported here (%s)" % p.stderr.strip()[:200])
    else:
        check(float(m.group(1)) <= 2.0, "systemd-analyze security: exposure %s, more than 2.0" % m.group(1))
        ok("systemd-analyze security --offline: exposure %s" % m.group(1))

    if shutil.which("strace") is None:
        print("SKIP the system call check: no strace here")
        return
    p = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True)
    if p.returncode != 0:
        print("SKIP the system call check: strace cannot trace here (%s)" % p.stderr.strip()[:200])
        return
    allowed, denied = set(), set()
    for f in service["SystemCallFilter"]:
        neg = f.startswith("~")
        for w in f.lstrip("~").split():
            names = expand_group(w) if w.startswith("@") else {w}
            (denied if neg else allowed).update(names)
    allowed -= denied
    families = set(service["RestrictAddressFamilies"][0].split())
    # ExecStart's command line, with the job, data, port and stats of this test
    shards = gen("d16", 16)
    job = os.path.join(TMP, "unit-job.json")
    json.dump({"name": "unit", "files": [shards], "format": "tfrecord",
               "features": {"dense": {"dtype": "float32", "shape": [8]}, "label": {"dtype": "int64", "shape": []}},
               "global_batch_size": 64, "epochs": 1, "prefetch": 4}, open(job, "w"))
    port = random.randint(20000, 40000)
    cmd, skip = [BINS["sluice-feeder"]], None
    for a in argv[1:]:
        if skip:
            cmd.append(skip)
            skip = None
            continue
        cmd.append(a)
        if a == "--job":
            skip = job
        elif a == "--listen":
            skip = "tcp://*:%d" % port
        elif a == "--stats":
            skip = os.path.join(TMP, "stats.json")
    trace = os.path.join(TMP, "strace.txt")
    flog = open(os.path.join(TMP, "feeder.log"), "w")
    feeder = subprocess.Popen(["strace", "-f", "-qq", "-o", trace] + cmd, stdout=flog, stderr=subprocess.STDOUT)
    W = int(cmd[cmd.index("--workers") + 1])
    R = cmd[cmd.index("--replicas") + 1]
    trainers = [subprocess.Popen([BINS["sluice-trainer"], "--connect", "tcp://127.0.0.1:%d" % port, "--job", "unit",
                                  "--worker", str(w), "--workers", str(W), "--replicas", R, "--no-shm", "--quiet"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for w in range(W)]
    deadline = time.time() + 60
    for p in trainers + [feeder]:
        try:
            p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in trainers + [feeder]:
                q.kill()
            fail("the feeder under strace did not finish its run in 60 s: %s" % open(flog.name).read()[-1000:])
    check(feeder.returncode == 0 and all(p.returncode == 0 for p in trainers),
          "the feeder under strace: exit %s, trainers %s: %s" % (feeder.returncode, [p.returncode for p in trainers],
                                                                 open(flog.name).read()[-1000:]))
    used, fams, wx = set(), set(), []
    for line in open(trace):
        m = re.match(r"\d+\s+([a-z_0-9]+)\(", line)
        if m is None:
            continue
        used.add(m.group(1))
        if m.group(1) == "socket":
            fams.add(re.match(r"\d+\s+socket\((\w+)", line).group(1))
        if m.group(1) in ("mmap", "mprotect", "pkey_mprotect") and "PROT_WRITE" in line and "PROT_EXEC" in line:
            wx.append(line.strip())
    # execve is the start itself (systemd's, not the feeder's choice)
    outside = sorted(used - allowed - {"execve"})
    check(not outside, "system calls outside the unit's SystemCallFilter: %s" % ", ".join(outside))
    check(fams <= families, "socket families outside RestrictAddressFamilies: %s" % ", ".join(sorted(fams - families)))
    check(not wx, "writable and executable mappings: %s" % wx[:3])
    ok("the feeder as ExecStart runs it (one run, %d workers x %s replicas): its %d system calls within "
       "SystemCallFilter, sockets %s within RestrictAddressFamilies, no W+X mapping"
       % (W, R, len(used), ", ".join(sorted(fams))))


# ---- docs ----

def docs():
    for binary, doc in (("sluice-feeder", "feeder.md"), ("sluice-trainer", "trainer.md")):
        check("cluster-from" in OPTIONS[binary], "%s --help lacks --cluster-from" % binary)
        check("--cluster-from" in open(os.path.join(ROOT, "docs", doc)).read(), "docs/%s lacks --cluster-from" % doc)
    deploy = open(os.path.join(ROOT, "docs", "deploy.md")).read()
    for word in ("--cluster-from", "NCCL_SOCKET_IFNAME", "sluice.sbatch", "sluice-feeder.service", "Indexed"):
        check(word in deploy, "docs/deploy.md does not mention %s" % word)
    check("docs/deploy.md" in open(os.path.join(ROOT, "README.md")).read(), "README.md has no link to docs/deploy.md")
    ok("--cluster-from in both --help texts and docs; docs/deploy.md covers the recipes and is linked from README.md")


def main():
    try:
        sts, jobk, services, fargs, F, fport, job_name, jobfile, shards = kubernetes()
        tc, tf_template = kubernetes_trainers(jobk, services, fargs, F, fport, job_name)
        kubernetes_run(containers(sts)[0], fargs, tc, tf_template, jobfile, shards)
        slurm()
        systemd()
        docs()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, 0 failed" % passed)


if __name__ == "__main__":
    main()
