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
- Kubernetes keys (issue #16): deploy/kubernetes/sluice-keys.sh, run with a
  stand-in kubectl that keeps what it is given, creates the two Secrets and
  the ConfigMap the manifests mount, holding keys; the feeders pass
  --curve-key and --curve-allow, the trainers --curve-key and
  --curve-server-key, nobody --insecure; each pod's volumes are laid out
  here as the kubelet lays them out (a Secret's files 0440 under fsGroup, a
  ConfigMap's as links into ..data), its init container's command run: the
  copied key is 0600 and accepted, where the Secret's own file is refused;
  the feeder pod then serves with the feeder key and trainer 1 gets past
  option checking with its keys (its ring binds every interface, which
  without keys is refused).
- Slurm (deploy/slurm/sluice.sbatch): `bash -n`, and the flags of both
  binaries' command lines and default extra arguments (test_deploy_slurm.sh
  runs the script).
- systemd (deploy/systemd/sluice-feeder.service): ExecStart's flags; the
  keys (ExecStart's --curve-key a copy made by ExecStartPre from the
  LoadCredential= credential, --curve-allow a folder the unit can read,
  ExecReload sending SIGHUP, no --insecure); ExecStartPre run here on a
  credential laid out as systemd 254 lays it out for a DynamicUser (0400
  and an ACL granting the user, so its mode reads 0440), which the feeder
  refuses, and the copy (0600) accepted; the hardening options present; `systemd-analyze verify` silent and the offline
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
import socket
import struct
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
    (exit 2 and a 'PROG: ...' line, which log lines never start with).
    Returns its stderr."""
    p = subprocess.run(["timeout", "-k", "2", str(seconds)] + argv, capture_output=True, text=True,
                       env=env, stdin=subprocess.DEVNULL)
    prog = os.path.basename(argv[0])
    usage = [line for line in p.stderr.splitlines() if line.startswith(prog + ": ")]
    check(p.returncode != 2 and not usage, "%s: a usage error (exit %d): %s" % (where, p.returncode,
                                                                               "\n".join(usage) or p.stderr[-500:]))
    return p.stderr


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
    check([p["containerPort"] for p in fc["ports"] if p["name"] == "zmq"] == [fport],
          "the feeder's zmq containerPort is not its --listen port")
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
    rport = [p["containerPort"] for p in tc["ports"] if p["name"] == "ring"]
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


FAKE_KUBECTL = r"""#!/usr/bin/env python3
# a stand-in kubectl: 'create secret generic NAME --from-file=KEY=PATH ...' and
# 'create configmap NAME --from-file=KEY=PATH ...' keep each file as
# STORE/KIND/NAME/KEY; anything else fails
import os, shutil, sys
store = os.environ["FAKE_KUBECTL_STORE"]
a = sys.argv[1:]
with open(os.path.join(store, "calls"), "a") as f:
    f.write(" ".join(a) + "\n")
while a and a[0] in ("-n", "--namespace"):  # kubectl's own options, before the verb
    a = a[2:]
if a[:3] == ["create", "secret", "generic"]:
    kind, name, rest = "secret", a[3], a[4:]
elif a[:2] == ["create", "configmap"]:
    kind, name, rest = "configmap", a[2], a[3:]
else:
    sys.exit("fake kubectl: unexpected %s" % a)
d = os.path.join(store, kind, name)
if os.path.exists(d):
    sys.exit('fake kubectl: %s "%s" already exists' % (kind, name))
os.makedirs(d)
for r in rest:
    assert r.startswith("--from-file="), r
    key, src = r[len("--from-file="):].split("=", 1)
    shutil.copyfile(src, os.path.join(d, key))
"""


def kubernetes_keys():
    """deploy/kubernetes/sluice-keys.sh with the stand-in kubectl: returns
    the store of what it created."""
    store = os.path.join(TMP, "k8s-store")
    os.makedirs(store)
    kubectl = os.path.join(TMP, "fake-kubectl")
    with open(kubectl, "w") as f:
        f.write(FAKE_KUBECTL)
    os.chmod(kubectl, 0o755)
    script = os.path.join(ROOT, "deploy", "kubernetes", "sluice-keys.sh")
    env = dict(os.environ, FAKE_KUBECTL_STORE=store, KUBECTL=kubectl, SLUICE_FEEDER=BINS["sluice-feeder"],
               TMPDIR=TMP)
    p = subprocess.run(["bash", script], capture_output=True, text=True, env=env)
    check(p.returncode == 0, "sluice-keys.sh: exit %d: %s" % (p.returncode, p.stderr))
    want = {("secret", "sluice-feeder-key"): ["feeder.key"], ("secret", "sluice-trainer-key"): ["trainer.key"],
            ("configmap", "sluice-public-keys"): ["feeder.pub", "trainer.pub"]}
    for (kind, name), files in want.items():
        d = os.path.join(store, kind, name)
        check(os.path.isdir(d) and sorted(os.listdir(d)) == files,
              "sluice-keys.sh: %s %s holds %s, not %s" % (kind, name, os.listdir(d) if os.path.isdir(d) else None,
                                                         files))
        for f in files:
            text = open(os.path.join(d, f)).read()
            check(re.fullmatch(r"[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}\n", text) is not None,
                  "sluice-keys.sh: %s %s: %s is not a Z85 key: %r" % (kind, name, f, text))
    left = [x for x in os.listdir(TMP) if x.startswith("tmp")]
    check(not left, "sluice-keys.sh left its temporary folder behind: %s" % left)
    # a second run fails at the first existing object, creating nothing more
    calls = open(os.path.join(store, "calls")).read().count("\n")
    p = subprocess.run(["bash", script, "-n", "ns"], capture_output=True, text=True, env=env)
    check(p.returncode != 0 and "already exists" in p.stderr, "sluice-keys.sh run again: exit %d" % p.returncode)
    lines = open(os.path.join(store, "calls")).read().splitlines()
    check(len(lines) == calls + 1 and lines[-1].startswith("-n ns create secret generic sluice-feeder-key"),
          "sluice-keys.sh run again: kubectl calls %s" % lines[calls:])
    ok("sluice-keys.sh: the Secrets sluice-feeder-key (feeder.key) and sluice-trainer-key (trainer.key) and the "
       "ConfigMap sluice-public-keys (feeder.pub, trainer.pub), Z85 keys, no temporary left; run again it stops at "
       "the first existing one, passing its kubectl options on")
    return store


def lay_out_pod(tag, pod, store):
    """The pod's volumes laid out under TMP/tag as the kubelet lays them out:
    a Secret's files with defaultMode, plus the group's read (0440) under
    fsGroup; a ConfigMap's items as links into ..data; an emptyDir empty.
    Returns {volume name: host folder}."""
    root = os.path.join(TMP, tag)
    fs_group = pod.get("securityContext", {}).get("fsGroup")
    vols = {}
    for v in pod.get("volumes", []):
        d = os.path.join(root, v["name"])
        os.makedirs(d)
        vols[v["name"]] = d
        if "secret" in v or "configMap" in v:
            src = v.get("secret") or v["configMap"]
            name = src.get("secretName") or src.get("name")
            sdir = os.path.join(store, "secret" if "secret" in v else "configmap", name)
            if not os.path.isdir(sdir):
                continue  # the job's ConfigMap: not a key
            items = src.get("items") or [{"key": k, "path": k} for k in sorted(os.listdir(sdir))]
            data = os.path.join(d, "..2026_01_01_00_00_00.000000001")
            os.makedirs(data)
            os.symlink(os.path.basename(data), os.path.join(d, "..data"))
            mode = src.get("defaultMode", 0o644)
            if fs_group is not None:
                mode |= 0o440
            for it in items:
                shutil.copyfile(os.path.join(sdir, it["key"]), os.path.join(data, it["path"]))
                os.chmod(os.path.join(data, it["path"]), it.get("mode", mode))
                os.symlink(os.path.join("..data", it["path"]), os.path.join(d, it["path"]))
    return vols


def mapped(container, vols, text):
    """text with the container's mount paths replaced by their folders here."""
    for m in sorted(container.get("volumeMounts", []), key=lambda m: -len(m["mountPath"])):
        if m["name"] in vols:
            text = text.replace(m["mountPath"], vols[m["name"]])
    return text


def run_init(tag, pod, vols):
    """Run the pod's init containers' commands here, paths mapped."""
    for c in pod.get("initContainers", []):
        cmd = [mapped(c, vols, x) for x in c["command"]]
        check(cmd[:2] == ["/bin/sh", "-c"], "%s: init container %s does not run /bin/sh -c" % (tag, c["name"]))
        p = subprocess.run(cmd, capture_output=True, text=True)
        check(p.returncode == 0, "%s: init container %s: exit %d: %s" % (tag, c["name"], p.returncode, p.stderr))
        for m in c.get("volumeMounts", []):
            secret = next((v for v in pod["volumes"] if v["name"] == m["name"] and "secret" in v), None)
            check(secret is None or m.get("readOnly") is True,
                  "%s: init container %s mounts the Secret writable" % (tag, c["name"]))


def key_args(tag, c, pod, flags):
    """The container's key flags: present, no --insecure; each --curve-key
    an init container's copy in a memory volume mounted read-only, each
    public key from the ConfigMap sluice-public-keys."""
    args = dict(a[2:].split("=", 1) for a in c["args"] if "=" in a)
    check("--insecure" not in c["args"], "%s: the container passes --insecure" % tag)
    for f in flags:
        check(f in args, "%s: the container lacks --%s" % (tag, f))
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    key_mount = mounts.get(os.path.dirname(args["curve-key"]))
    check(key_mount is not None and key_mount.get("readOnly") is True,
          "%s: --curve-key's folder is not a read-only mount" % tag)
    ed = vols[key_mount["name"]].get("emptyDir")
    check(ed is not None and ed.get("medium") == "Memory", "%s: --curve-key's volume is not a memory emptyDir" % tag)
    check(pod["securityContext"].get("fsGroup") == pod["securityContext"].get("runAsGroup"),
          "%s: fsGroup is not the pods' group: the init container could not read the Secret" % tag)
    inits = pod.get("initContainers", [])
    check(any(any(m["name"] == key_mount["name"] and not m.get("readOnly") for m in i["volumeMounts"])
              for i in inits), "%s: no init container writes the key volume" % tag)
    secrets = [v for v in pod["volumes"] if "secret" in v]
    check(len(secrets) == 1 and secrets[0]["secret"].get("defaultMode") == 0o400,
          "%s: one Secret volume with defaultMode 0400 expected: %s" % (tag, secrets))
    pub = args.get("curve-allow") or args.get("curve-server-key")
    pub_dir = pub if "curve-allow" in args else os.path.dirname(pub)
    pm = mounts.get(pub_dir)
    check(pm is not None and vols[pm["name"]].get("configMap", {}).get("name") == "sluice-public-keys",
          "%s: the public keys do not come from the ConfigMap sluice-public-keys" % tag)
    return args


def kubernetes_run(sts, fargs, jobk, tc, tf_template, jobfile, shards, store):
    fpod, tpod = sts["spec"]["template"]["spec"], jobk["spec"]["template"]["spec"]
    fc = fpod["containers"][0]
    fkeys = key_args("the feeders", fc, fpod, ("curve-key", "curve-allow"))
    tkeys = key_args("the trainers", tc, tpod, ("curve-key", "curve-server-key"))
    check(tpod["volumes"][[v["name"] for v in tpod["volumes"]].index(
        next(m["name"] for m in tc["volumeMounts"] if m["mountPath"] == os.path.dirname(tkeys["curve-server-key"])))]
          ["configMap"]["items"] == [{"key": "feeder.pub", "path": "feeder.pub"}],
          "the trainers' --curve-server-key folder should hold feeder.pub alone")
    check(fpod["volumes"][[v["name"] for v in fpod["volumes"]].index(
        next(m["name"] for m in fc["volumeMounts"] if m["mountPath"] == fkeys["curve-allow"]))]
          ["configMap"]["items"] == [{"key": "trainer.pub", "path": "trainer.pub"}],
          "the feeders' --curve-allow should hold trainer.pub alone")
    ok("keys: the feeders pass --curve-key (an init container's copy, memory volume) and --curve-allow (trainer.pub "
       "of sluice-public-keys), the trainers --curve-key and --curve-server-key (feeder.pub); no --insecure; one "
       "Secret each, defaultMode 0400, fsGroup the pods' group")

    fvols = lay_out_pod("k8s-feeder", fpod, store)
    tvols = lay_out_pod("k8s-trainer", tpod, store)
    # the Secret's own file, as the kubelet gives it, is refused: the reason
    # for the init container
    secret_key = os.path.join(fvols["secret-key"], "feeder.key")
    check(os.stat(secret_key).st_mode & 0o777 == 0o440, "the laid-out Secret is not 0440")
    run_init("the feeder pod", fpod, fvols)
    run_init("the trainer pod", tpod, tvols)
    for tag, c, vols, k in (("feeder", fc, fvols, fkeys), ("trainer", tc, tvols, tkeys)):
        copy = mapped(c, vols, k["curve-key"])
        check(os.stat(copy).st_mode & 0o777 == 0o600, "the %s's key copy is not 0600" % tag)
    # the feeder's arguments as the pod runs them (index 1), on an ipc endpoint
    sock = "ipc://" + os.path.join(TMP, "k8s-feeder.sock")
    argv = [BINS["sluice-feeder"]]
    for a in fc["args"]:
        a = mapped(fc, fvols, a.replace("$(FEEDER_INDEX)", "1"))
        if a.startswith("--listen="):
            a = "--listen=" + sock
        if a.startswith("--job="):
            a = "--job=" + jobfile
        if a.startswith("--metrics-listen="):  # a port of its own here
            a = "--metrics-listen=127.0.0.1:0"
        argv.append(a)
    p = subprocess.run([a if not a.startswith("--curve-key=") else "--curve-key=" + secret_key for a in argv] +
                       ["--files=" + shards], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "a secret key readable or writable by others (mode 0440)" in p.stderr,
          "the feeder given the Secret's own file (0440): exit %d: %s" % (p.returncode, p.stderr[-500:]))
    err = gets_past_options("the feeder pod's arguments", argv + ["--files=" + shards], seconds=2)
    pub = open(os.path.join(store, "configmap", "sluice-public-keys", "feeder.pub")).read().strip()
    check("CURVE: this feeder's public key is %s; 1 trainer keys allowed" % pub in err,
          "the feeder pod does not serve with the feeder key and the one trainer key:\n%s" % err[-1000:])
    # trainer 1's: its TF_CONFIG read through --cluster-from tf_config
    env = dict(os.environ, TF_CONFIG=tf_template.replace("$(WORKER_INDEX)", "1"))
    targv = [BINS["sluice-trainer"]] + [mapped(tc, tvols, a) if not a.startswith("--metrics-listen=")
                                        else "--metrics-listen=127.0.0.1:0" for a in tc["args"]]
    gets_past_options("the trainer pod's arguments", targv, env=env, seconds=3)
    # without its keys, its ring on every interface is refused
    p = subprocess.run([a for a in targv if not a.startswith("--curve-")], capture_output=True, text=True, env=env,
                       timeout=30)
    check(p.returncode == 2 and "can be reached from other hosts" in p.stderr,
          "the trainer pod's arguments without keys: exit %d: %s" % (p.returncode, p.stderr[-500:]))
    ok("the pods' volumes laid out as the kubelet does: the Secret's 0440 file is refused, the init containers' "
       "0600 copies accepted; the feeder (index 1) serves with the feeder key, trainer 1 (with TF_CONFIG) gets past "
       "option checking, and is refused without its keys")


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
        keys = re.findall(r'^\s*%s_KEYS="([^"]*)"' % var, text, re.M)
        check(len(keys) == 2 and keys[0] == "--insecure" and "--curve-key" in keys[1],
              "sluice.sbatch: %s_KEYS should be --insecure (the opt-out), then the keys: %s" % (var, keys))
        for k in keys:
            n += check_flags("sluice.sbatch %s_KEYS" % var, binary, shlex.split(k))
        check(re.search(r'exec "\$%s" [^\n]*\$%s_KEYS' % (var, var), text) is not None,
              "sluice.sbatch: $%s_KEYS is not on the exec line" % var)
    ok("deploy/slurm/sluice.sbatch: bash -n, and its %d flags (the key options and the --insecure opt-out among "
       "them) are options of the binaries" % n)


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


def set_user_acl(path, uid):
    """Give uid read access to path by a POSIX ACL, as systemd does for a
    credential (the system.posix_acl_access xattr: version 2, then the
    entries USER_OBJ r, USER uid r, GROUP_OBJ none, MASK r, OTHER none).
    False where the file system takes no ACL."""
    def ent(tag, perm, ident=0xFFFFFFFF):
        return struct.pack("<HHI", tag, perm, ident)
    acl = struct.pack("<I", 2) + ent(0x01, 4) + ent(0x02, 4, uid) + ent(0x04, 0) + ent(0x10, 4) + ent(0x20, 0)
    try:
        os.setxattr(path, "system.posix_acl_access", acl)
    except OSError:
        return False
    return True


def unit_keys(service, argv):
    """The unit's keys: LoadCredential= of the secret key, ExecStartPre's
    copy of it, ExecStart's --curve-key (the copy) and --curve-allow, SIGHUP
    on reload. ExecStartPre is run here (%d and %t mapped) on a credential
    laid out as systemd lays it out; returns the paths for the traced run."""
    check("--insecure" not in argv, "ExecStart passes --insecure")
    check("--curve-key" in argv and "--curve-allow" in argv, "ExecStart lacks --curve-key or --curve-allow")
    key = argv[argv.index("--curve-key") + 1]
    allow = argv[argv.index("--curve-allow") + 1]
    creds = service.get("LoadCredential", [])
    check(len(creds) == 1 and creds[0].split(":", 1)[1].startswith("/etc/credstore/"),
          "one LoadCredential=ID:/etc/credstore/... expected: %s" % creds)
    cred_id = creds[0].split(":", 1)[0]
    runtime = service.get("RuntimeDirectory", [""])[0]
    check(runtime != "" and service.get("RuntimeDirectoryMode") == ["0700"],
          "RuntimeDirectory= with RuntimeDirectoryMode=0700 expected")
    check(key == "%%t/%s/%s" % (runtime, cred_id), "--curve-key %s is not the copy %%t/%s/%s" % (key, runtime, cred_id))
    check(any(allow == p or allow.startswith(p + "/") for p in service["ReadOnlyPaths"][0].split()),
          "--curve-allow %s is not under ReadOnlyPaths" % allow)
    check(service.get("ExecReload") == ["/bin/kill -HUP $MAINPID"], "ExecReload does not send SIGHUP")
    pre = service.get("ExecStartPre", [])
    check(len(pre) == 1, "one ExecStartPre expected: %s" % pre)
    # the credential as systemd 254 and later write it for a DynamicUser on
    # a tmpfs: root's, 0400, and an ACL granting the service's user
    d = os.path.join(TMP, "unit-creds")
    t = os.path.join(TMP, "unit-run")
    os.makedirs(d, mode=0o700)
    os.makedirs(os.path.join(t, runtime), mode=0o700)
    kdir = os.path.join(TMP, "unit-keys")
    os.makedirs(os.path.join(kdir, "trainers"), mode=0o700)
    for n in ("feeder", "trainer"):
        subprocess.run([BINS["sluice-feeder"], "keygen", n], cwd=kdir, check=True, capture_output=True)
    shutil.copy(os.path.join(kdir, "trainer.pub"), os.path.join(kdir, "trainers", "trainer.pub"))
    cred = os.path.join(d, cred_id)
    shutil.copyfile(os.path.join(kdir, "feeder.key"), cred)
    os.chmod(cred, 0o400)
    how = "an ACL for uid 61234" if set_user_acl(cred, 61234) else "mode 0440 (no ACL on this file system)"
    if not how.startswith("an ACL"):
        os.chmod(cred, 0o440)
    check(os.stat(cred).st_mode & 0o777 == 0o440, "the laid-out credential's mode is not 0440")
    cmd = [x.replace("%d", d).replace("%t", t) for x in shlex.split(pre[0])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, "ExecStartPre: exit %d: %s" % (p.returncode, p.stderr))
    copy = key.replace("%t", t)
    check(os.stat(copy).st_mode & 0o777 == 0o600 and open(copy).read() == open(cred).read(),
          "ExecStartPre's copy is not the credential, mode 0600")
    # the credential itself is refused, the copy accepted
    job = os.path.join(TMP, "keys-job.json")
    json.dump({"name": "keys", "files": [gen("dk", 16)], "format": "tfrecord",
               "features": {"label": {"dtype": "int64", "shape": []}}, "global_batch_size": 64}, open(job, "w"))
    for path, refused in ((cred, True), (copy, False)):
        argv = [BINS["sluice-feeder"], "--job", job, "--curve-key", path, "--curve-allow",
                os.path.join(kdir, "trainers"), "--listen", "ipc://" + os.path.join(TMP, "keys.sock")]
        if refused:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            check(p.returncode == 2 and "a secret key readable or writable by others (mode 0440)" in p.stderr,
                  "the feeder given the credential %s: exit %d: %s" % (path, p.returncode, p.stderr[-500:]))
        else:
            gets_past_options("the feeder given ExecStartPre's copy", argv, seconds=2)
    ok("the unit's keys: LoadCredential=%s, ExecStartPre copies it (0600) into %%t/%s, ExecStart's --curve-key is "
       "the copy and --curve-allow %s is readable; the credential as systemd gives it (0400, %s: mode 0440) is "
       "refused by the feeder, the copy accepted; ExecReload sends SIGHUP" % (creds[0], runtime, allow, how))
    with open(os.path.join(kdir, "feeder.pub")) as f:
        pub = f.read().strip()
    return {"copy": copy, "allow": os.path.join(kdir, "trainers"), "trainer_key": os.path.join(kdir, "trainer.key"),
            "feeder_pub": os.path.join(kdir, "feeder.pub"), "pub": pub}


def built_with_systemd():
    """The feeder was built with libsystemd (it can tell a Type=notify unit)."""
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        return any(line.strip() == "SYSTEMD_FOUND:INTERNAL=1" for line in f)


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
    creds = unit_keys(service, argv)
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
        elif a == "--metrics-listen":
            skip = "127.0.0.1:0"
        elif a == "--curve-key":
            skip = creds["copy"]
        elif a == "--curve-allow":
            skip = creds["allow"]
    trace = os.path.join(TMP, "strace.txt")
    flog = open(os.path.join(TMP, "feeder.log"), "w")
    # Type=notify: the service manager's socket, so the feeder's sd_notify
    # calls are traced too (issue #29 item 4)
    manager = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    manager.bind(os.path.join(TMP, "notify.sock"))
    manager.settimeout(0)
    feeder = subprocess.Popen(["strace", "-f", "-qq", "-o", trace] + cmd, stdout=flog, stderr=subprocess.STDOUT,
                              env=dict(os.environ, NOTIFY_SOCKET=os.path.join(TMP, "notify.sock")))
    W = int(cmd[cmd.index("--workers") + 1])
    R = cmd[cmd.index("--replicas") + 1]
    trainers = [subprocess.Popen([BINS["sluice-trainer"], "--connect", "tcp://127.0.0.1:%d" % port, "--job", "unit",
                                  "--worker", str(w), "--workers", str(W), "--replicas", R, "--no-shm", "--quiet",
                                  "--curve-key", creds["trainer_key"], "--curve-server-key", creds["feeder_pub"]],
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
    log = open(flog.name).read()
    check("CURVE: this feeder's public key is %s" % creds["pub"] in log and
          "CURVE: %d trainer connections accepted, 0 refused" % W in log,
          "the feeder under strace did not serve its %d workers over CURVE:\n%s" % (W, log[-1500:]))
    notes = []
    while True:
        try:
            notes.append(manager.recv(4096).decode())
        except BlockingIOError:
            break
    manager.close()
    check(not built_with_systemd() or notes[:1] == ["READY=1"], "Type=notify: the feeder told %s" % notes)
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
        store = kubernetes_keys()
        kubernetes_run(sts, fargs, jobk, tc, tf_template, jobfile, shards, store)
        slurm()
        systemd()
        docs()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, 0 failed" % passed)


if __name__ == "__main__":
    main()
