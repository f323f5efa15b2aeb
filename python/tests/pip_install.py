#!/usr/bin/env python3
"""pip install sluice into a virtual environment, as a user would (issue #29 item 1).

1. `python3 -m venv --system-site-packages` (Debian's numpy), then `pip
   install --no-build-isolation --no-index SRC` (the repository root):
   offline, CMake builds libsluice and the extension. From a folder
   outside the source tree the venv imports sluice from its own
   site-packages, and the libsluice mapped into the process is the venv's
   copy beside the extension (/proc/self/maps), which finds it through a
   RUNPATH of $ORIGIN alone. It reads a real feeder's stream: exactly the
   reference model's ids, step by step, and the short reprs of Step and
   Client. `pip uninstall -y sluice` leaves no file of it, and the import
   fails.
2. `python3 -m build --wheel --no-isolation SRC/python` (the package's own
   folder): the wheel holds exactly the package's files, libsluice.so.0
   among them; the extension needs libsluice.so.0 and libc only, with
   RUNPATH $ORIGIN; libsluice needs system libraries only. Installed into
   a second venv from the wheel file alone, ldd resolves the extension's
   libsluice to that venv's copy and everything else to the system's, and
   it reads the stream exactly again.
3. The wheel's feeder: the wheel holds sluice/bin/sluice-feeder
   (executable, no RUNPATH, no libsluice); ldd of the venv's copy resolves
   every library to the system's (/lib, /usr/lib). In the wheel's venv,
   with SLUICE_BUILD unset, PATH holding no build folder and the cwd outside
   the source tree, `sluice.Feeder(job_dict)` starts that copy (its
   /proc/PID/exe is the venv's sluice/bin/sluice-feeder, as find_feeder()
   says) and a client reads exactly the reference model's ids from it;
   sluice.plan runs the same copy.

The build folder (BUILD/python/pip-build, SLUICE_PIP_BUILD) is kept between
runs, so a rerun builds incrementally; the venvs are made afresh.
CMAKE_C_COMPILER_LAUNCHER (ccache) passes through to CMake.

Usage: pip_install.py BUILD_DIR PYTHON (Debian's /usr/bin/python3)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import bed  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

RECORDS = 20

# run by the venv's interpreter from a folder outside the source tree:
# where sluice and libsluice come from, then the stream, as JSON
READ = r"""
import json, sys
import sluice
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libsluice" in l})
out = {"file": sluice.__file__, "ext": sluice._sluice.__file__, "libsluice": maps, "version": sluice.__version__,
       "steps": [], "path": sys.path}
with sluice.Client(sys.argv[2], sys.argv[1]) as c:
    out["client"] = repr(c)
    for s in c:
        if not out["steps"]:
            out["step_repr"] = repr(s)
        out["steps"].append([s.epoch, s.step, s.replicas[0]["id"].tolist()])
out["closed"] = repr(c)
print(json.dumps(out))
"""

# run by the wheel venv's interpreter, no build tree in reach: a feeder
# started by sluice.Feeder from a job dict, what it runs, its stream
FEED = r"""
import json, os, sys
import sluice
out = {"found": sluice.feeder.find_feeder(), "steps": []}
with open("job.json", "w") as f:
    json.dump(json.loads(sys.argv[1]), f)
out["plan_steps"] = sluice.plan("job.json")["workers"][0]["steps"]
with sluice.Feeder(json.loads(sys.argv[1]), threads=1, heartbeat_ms=200) as f:
    out["exe"] = os.readlink("/proc/%d/exe" % f.pid)
    with f.client() as c:
        for s in c:
            out["steps"].append([s.epoch, s.step, s.replicas[0]["id"].tolist()])
print(json.dumps(out))
"""


def run(args, what, cwd=None, env=None, timeout=300):
    t = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)
    if p.returncode != 0:
        fail("%s: %s: exit %d\n%s%s" % (what, " ".join(args), p.returncode, p.stdout[-4000:], p.stderr[-4000:]))
    print("# %s: %.1f s" % (what, time.monotonic() - t))
    return p.stdout


def clean_env():
    """The environment without the build tree's package (ctest's
    PYTHONPATH) nor a venv of the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def make_venv(python, path):
    shutil.rmtree(path, ignore_errors=True)
    run([python, "-m", "venv", "--system-site-packages", path], "venv " + os.path.basename(path), env=clean_env())
    return os.path.join(path, "bin", "python")


def site_packages(vpy):
    return run([vpy, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], "site-packages",
               env=clean_env()).strip()


def needed(path):
    """(NEEDED libraries, RUNPATH or None) of an ELF file."""
    d = run(["readelf", "-d", path], "readelf " + os.path.basename(path))
    rp = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]", d)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]*)\]", d), rp


def read_stream(vpy, tag, files, want, outside):
    """A feeder serving the job, the venv's interpreter reading it from
    `outside`; checks the ids exactly. Returns READ's answer."""
    job_path, job = bed.write_job("job-" + tag, files, epochs=2)
    ep = "ipc://%s/%s.sock" % (bed.TMP, tag)
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", ep, "--threads", "1", "--heartbeat-ms", "200",
               "--timeout-ms", "5000"], log=bed.log_path(tag, "feeder"))
    got = json.loads(run([vpy, "-c", READ, job["name"], ep], "read " + tag, cwd=outside, env=clean_env(),
                         timeout=60))
    if f.wait(timeout=30) != 0:
        fail("%s: the feeder exited %d" % (tag, f.returncode))
    if got["steps"] != want:
        fail("%s: the stream\n%s\nnot the reference model's\n%s" % (tag, got["steps"], want))
    # the tensors in the job's order (bed.FEATURES)
    want_step = "<sluice.Step epoch=0 step=0 seq=0 last_step=False rows=[8] tensors=['image', 'label', 'id']>"
    if got["step_repr"] != want_step:
        fail("%s: repr(step) %r, not %r" % (tag, got["step_repr"], want_step))
    steps = len(want) // 2
    want_client = ("<sluice.Client job='%s' worker=0/1 replicas=1 position=0 epochs=2 steps_per_epoch=%d>"
                   % (job["name"], steps))
    if got["client"] != want_client or got["closed"] != "<sluice.Client job='%s' worker=0/1 closed>" % job["name"]:
        fail("%s: repr(client) %r, then %r" % (tag, got["client"], got["closed"]))
    return got


def check_from_venv(got, site, tag):
    pkg = os.path.join(site, "sluice")
    if os.path.dirname(got["file"]) != pkg or os.path.dirname(got["ext"]) != pkg:
        fail("%s: sluice imported from %s (extension %s), not the venv's %s" % (tag, got["file"], got["ext"], pkg))
    if got["libsluice"] != [os.path.join(pkg, "libsluice.so.0")]:
        fail("%s: libsluice mapped from %s, not the venv's %s/libsluice.so.0 alone" % (tag, got["libsluice"], pkg))
    if any(p.startswith(SRC + os.sep) for p in got["path"]):
        fail("%s: the source tree on sys.path: %s" % (tag, got["path"]))


def main():
    build, python = sys.argv[1], sys.argv[2]
    bed.setup(build, "pip")
    files = bed.gen("d", RECORDS, 1)
    ids = [int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
           for x in run([bed.RECORD, "cat", "--decode", "example", files[0]], "record cat").splitlines()]
    ref = bed.reference(bed.write_job("job-ref", files, epochs=2)[1], [RECORDS], 1, 1)[0]
    want = [[x["epoch"], x["step"], [ids[r] for _, r in x["elems"]]] for x in ref]
    outside = os.path.join(bed.TMP, "elsewhere")
    os.makedirs(outside)
    env = clean_env()
    env["SLUICE_PIP_BUILD"] = os.path.join(bed.BUILD, "python", "pip-build")
    for m in ("venv", "pip", "setuptools", "wheel", "build"):
        p = subprocess.run([python, "-c", "import " + m], capture_output=True)
        if p.returncode != 0:
            fail("%s has no module %s: Debian's python3-venv python3-pip python3-setuptools python3-wheel "
                 "python3-build (scripts/deps.sh)" % (python, m))

    # 1. pip install from the repository root, read, uninstall
    vpy = make_venv(python, os.path.join(bed.TMP, "venv"))
    run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", SRC], "pip install SRC", cwd=outside,
        env=env)
    site = site_packages(vpy)
    pkg = os.path.join(site, "sluice")
    ext = [f for f in os.listdir(pkg) if f.startswith("_sluice") and f.endswith(".so")]
    if len(ext) != 1:
        fail("installed: %s" % sorted(os.listdir(pkg)))
    libs, rp = needed(os.path.join(pkg, ext[0]))
    if rp != ["$ORIGIN"] or "libsluice.so.0" not in libs:
        fail("installed %s: RUNPATH %s, NEEDED %s" % (ext[0], rp, libs))
    got = read_stream(vpy, "pip", files, want, outside)
    check_from_venv(got, site, "pip install")
    if got["version"] != run([os.path.join(bed.BUILD, "feeder", "sluice-feeder"), "--version"],
                             "feeder --version").split()[1]:
        fail("version %s, not the project's" % got["version"])
    ok("pip install SRC in a venv: sluice %s from %s, libsluice the venv's, the stream exact (%d steps), "
       "short reprs" % (got["version"], pkg, len(want)))
    run([vpy, "-m", "pip", "uninstall", "-y", "sluice"], "pip uninstall", cwd=outside, env=clean_env())
    if os.path.exists(pkg) or [f for f in os.listdir(site) if f.startswith("sluice")]:
        fail("after pip uninstall: %s" % sorted(os.listdir(site)))
    p = subprocess.run([vpy, "-c", "import sluice"], capture_output=True, text=True, cwd=outside, env=clean_env())
    if p.returncode == 0 or "No module named 'sluice'" not in p.stderr:
        fail("import sluice after pip uninstall: exit %d %s" % (p.returncode, p.stderr[-2000:]))
    ok("pip uninstall -y sluice: no file left, import sluice fails")

    # 2. a wheel from python/, installed alone into another venv
    dist = os.path.join(bed.TMP, "dist")
    run([vpy, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, os.path.join(SRC, "python")],
        "build --wheel", cwd=outside, env=env)
    wheels = os.listdir(dist)
    if len(wheels) != 1 or not re.fullmatch(r"sluice-%s-cp3\d+-cp3\d+-linux_[a-z0-9_]+\.whl" % re.escape(
            got["version"]), wheels[0]):
        fail("wheels: %s" % wheels)
    whl = os.path.join(dist, wheels[0])
    names = sorted(n for n in zipfile.ZipFile(whl).namelist() if not n.startswith("sluice-"))
    want_names = sorted(["sluice/__init__.py", "sluice/__init__.pyi", "sluice/_sluice.pyi", "sluice/py.typed",
                         "sluice/torch.py", "sluice/torch.pyi", "sluice/feeder.py", "sluice/feeder.pyi",
                         "sluice/libsluice.so.0", "sluice/" + ext[0], "sluice/bin/sluice-feeder"])
    if names != want_names:
        fail("the wheel holds %s, not %s" % (names, want_names))
    unz = os.path.join(bed.TMP, "unzipped")
    zipfile.ZipFile(whl).extractall(unz)
    libs, rp = needed(os.path.join(unz, "sluice", ext[0]))
    if rp != ["$ORIGIN"] or sorted(libs) != ["libc.so.6", "libsluice.so.0"]:
        fail("the wheel's %s: RUNPATH %s, NEEDED %s" % (ext[0], rp, libs))
    libs, rp = needed(os.path.join(unz, "sluice", "libsluice.so.0"))
    if rp or any("sluice" in x for x in libs):
        fail("the wheel's libsluice: RUNPATH %s, NEEDED %s" % (rp, libs))
    mode = zipfile.ZipFile(whl).getinfo("sluice/bin/sluice-feeder").external_attr >> 16
    libs, rp = needed(os.path.join(unz, "sluice", "bin", "sluice-feeder"))
    if mode & 0o111 != 0o111 or rp or any("sluice" in x for x in libs):
        fail("the wheel's sluice-feeder: mode %o, RUNPATH %s, NEEDED %s" % (mode, rp, libs))
    ok("the wheel's sluice-feeder: mode %o, no RUNPATH, needs %s" % (mode & 0o777, " ".join(sorted(libs))))
    ok("%s: the package, libsluice.so.0 inside, the extension's RUNPATH $ORIGIN, libsluice needs %s"
       % (wheels[0], " ".join(sorted(libs))))
    vpy2 = make_venv(python, os.path.join(bed.TMP, "venv2"))
    run([vpy2, "-m", "pip", "install", "--no-index", whl], "pip install wheel", cwd=outside, env=clean_env())
    site2 = site_packages(vpy2)
    ldd = run(["ldd", os.path.join(site2, "sluice", ext[0])], "ldd")
    for line in ldd.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if "not found" in line or (m and m.group(1) == "libsluice.so.0"
                                   and m.group(2) != os.path.join(site2, "sluice", "libsluice.so.0")):
            fail("ldd of the wheel's extension:\n%s" % ldd)
        if m and m.group(1) != "libsluice.so.0" and not re.match(r"/(usr/)?lib", m.group(2)):
            fail("ldd of the wheel's extension: %s outside the system's libraries\n%s" % (m.group(1), ldd))
    got = read_stream(vpy2, "wheel", files, want, outside)
    check_from_venv(got, site2, "wheel")
    ok("the wheel installed alone into another venv: libsluice the venv's (ldd), the stream exact")

    # 3. the wheel's feeder, started by sluice.Feeder with no build tree in reach
    vfeeder = os.path.join(site2, "sluice", "bin", "sluice-feeder")
    if not os.access(vfeeder, os.X_OK):
        fail("%s: not an executable file" % vfeeder)
    ldd = run(["ldd", vfeeder], "ldd feeder")
    for line in ldd.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if "not found" in line or (m and not re.match(r"/(usr/)?lib", m.group(2))):
            fail("ldd of the wheel's sluice-feeder: %s outside the system's libraries\n%s" % (line.strip(), ldd))
    fenv = clean_env()
    fenv.pop("SLUICE_BUILD", None)
    fenv["PATH"] = os.pathsep.join(p for p in ["/usr/local/bin", "/usr/bin", "/bin"]
                                   if not os.path.exists(os.path.join(p, "sluice-feeder")))
    job = bed.write_job("job-feeder", files, epochs=2)[1]
    got = json.loads(run([vpy2, "-c", FEED, json.dumps(job)], "sluice.Feeder from the wheel", cwd=outside,
                         env=fenv, timeout=60))
    if got["exe"] != vfeeder or got["found"] != vfeeder:
        fail("sluice.Feeder ran %s (find_feeder: %s), not the wheel's %s" % (got["exe"], got["found"], vfeeder))
    if got["plan_steps"] != len(want) // 2:
        fail("sluice.plan in the wheel's venv: %s steps per epoch, not %d" % (got["plan_steps"], len(want) // 2))
    if got["steps"] != want:
        fail("sluice.Feeder's stream\n%s\nnot the reference model's\n%s" % (got["steps"], want))
    ok("sluice.Feeder(job dict) in the wheel's venv, no build tree in reach: ran %s (ldd: system libraries "
       "only), the stream exact (%d steps)" % (vfeeder, len(want)))
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
