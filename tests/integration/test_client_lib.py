#!/usr/bin/env python3
"""The installed C client library (issue #17 part 1).

1. `cmake --install BUILD --prefix TMP/prefix` puts the four programs,
   libsluice with its SONAME links, include/sluice/client.h (beside
   libsluice-strategy's strategy.h, and no internal header), sluice.pc, the CMake package and (with help2man) the
   man pages under the prefix.
2. The library exports the public API only: `nm -D --defined-only` lists
   sluice_* symbols and nothing else; its SONAME is libsluice.so.MAJOR.
3. examples/client/sluice_count.c builds against the prefix with
   pkg-config and with CMake's find_package(sluice) (sluice::sluice), and
   both builds, run against a real sluice-feeder on an ipc socket as worker
   0 of 1 with 2 replicas, receive exactly the reference model's pieces:
   the same count, rows and ids per piece, every id once per epoch.

Usage: test_client_lib.py BUILD_DIR
"""
import glob
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

RECORDS, SHARDS, R = 150, 5, 2


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        fail("%s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def install(prefix):
    run(["cmake", "--install", bed.BUILD, "--prefix", prefix])
    for prog in ("sluice-feeder", "sluice-trainer", "sluice-record", "sluice-bench"):
        if not os.access(os.path.join(prefix, "bin", prog), os.X_OK):
            fail("bin/%s not installed" % prog)
    libdirs = [d for d in ("lib", "lib64") if os.path.isdir(os.path.join(prefix, d))]
    libs = [os.path.join(prefix, d) for d in libdirs]
    libdir = next((d for d in libs if os.path.exists(os.path.join(d, "libsluice.so"))), None)
    if libdir is None:
        fail("libsluice.so not installed under %s" % libs)
    so = os.path.join(libdir, "libsluice.so")
    if not os.path.islink(so) or not os.path.islink(os.path.join(libdir, "libsluice.so.0")):
        fail("libsluice.so and libsluice.so.0 are not links: %s" % os.listdir(libdir))
    headers = sorted(os.listdir(os.path.join(prefix, "include", "sluice")))
    # strategy.h: libsluice-strategy's (test_strategy_lib.py)
    if headers != ["client.h", "map_plugin.h", "strategy.h"] or os.path.exists(os.path.join(prefix, "include", "client.h")):
        fail("installed headers: %s" % headers)
    for f in ("pkgconfig/sluice.pc", "cmake/sluice/sluiceConfig.cmake", "cmake/sluice/sluiceTargets.cmake"):
        if not os.path.exists(os.path.join(libdir, f)):
            fail("%s not installed" % f)
    if shutil.which("help2man"):
        for prog in ("sluice-feeder", "sluice-trainer", "sluice-record", "sluice-bench"):
            page = os.path.join(prefix, "share", "man", "man1", prog + ".1")
            with open(page) as f:
                if ".SH NAME" not in f.read():
                    fail("%s: not a man page" % page)
    ok("install: programs, libsluice + links, include/sluice/client.h (+ strategy.h), sluice.pc, CMake package, man pages")
    return libdir, so


def exports(so):
    syms = run(["nm", "-D", "--defined-only", so]).split()
    names = [s for s in syms[2::3]]
    if not names or any(not n.startswith("sluice_") for n in names):
        fail("libsluice exports more than sluice_*: %s" % [n for n in names if not n.startswith("sluice_")][:20])
    for want in ("sluice_client_open", "sluice_client_next_step", "sluice_client_release", "sluice_client_position"):
        if want not in names:
            fail("%s not exported: %s" % (want, names))
    soname = re.search(r"SONAME\s+(\S+)", run(["objdump", "-p", so]))
    if soname is None or soname.group(1) != "libsluice.so.0":
        fail("SONAME: %s" % (soname and soname.group(1)))
    ok("exports: %d symbols, all sluice_*; SONAME libsluice.so.0" % len(names))


def build_pkgconfig(prefix, libdir):
    """Built as docs/client.md says, the run-time path from pkg-config's
    libdir (-Wl,-rpath); without it the program does not start from a
    non-standard prefix, and LD_LIBRARY_PATH is the other way."""
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    env.pop("LD_LIBRARY_PATH", None)
    flags = run(["pkg-config", "--cflags", "--libs", "sluice"], env=env).split()
    pc_libdir = run(["pkg-config", "--variable=libdir", "sluice"], env=env).strip()
    if os.path.realpath(pc_libdir) != os.path.realpath(libdir):
        fail("pkg-config --variable=libdir sluice: %s, not %s" % (pc_libdir, libdir))
    src = os.path.join(SRC, "examples", "client", "sluice_count.c")
    bare = os.path.join(bed.TMP, "count-bare")
    run(["cc", "-std=c11", "-Wall", "-Werror", src, "-o", bare] + flags, env=env)
    p = subprocess.run([bare], capture_output=True, text=True, env=env)
    if p.returncode != 127 or "libsluice.so.0: cannot open shared object file" not in p.stderr:
        fail("built without an rpath: exit %d (expected 127, libsluice.so.0 not found): %s" % (p.returncode,
                                                                                               p.stderr))
    p = subprocess.run([bare], capture_output=True, text=True, env=dict(env, LD_LIBRARY_PATH=pc_libdir))
    if p.returncode != 2 or not p.stderr.startswith("usage: "):
        fail("built without an rpath, run with LD_LIBRARY_PATH: exit %d (expected its usage, 2): %s"
             % (p.returncode, p.stderr))
    out = os.path.join(bed.TMP, "count-pc")
    run(["cc", "-std=c11", "-Wall", "-Werror", src, "-o", out] + flags + ["-Wl,-rpath," + pc_libdir], env=env)
    ok("pkg-config: %s; -Wl,-rpath,$(pkg-config --variable=libdir sluice) or LD_LIBRARY_PATH finds libsluice, "
       "neither: exit 127" % " ".join(flags))
    return out


def build_cmake(prefix):
    out = os.path.join(bed.TMP, "count-cmake")
    run(["cmake", "-S", os.path.join(SRC, "examples", "client"), "-B", out, "-DCMAKE_PREFIX_PATH=" + prefix])
    run(["cmake", "--build", out])
    ok("find_package(sluice): sluice::sluice")
    return os.path.join(out, "sluice_count")


def expected(job):
    per = RECORDS // SHARDS
    ref = bed.reference(job, [per] * SHARDS, 1, R)[0]
    return [(x["epoch"], x["step"], x["replica"], list(x["elems"])) for x in ref]


def check_run(prog, tag, sock, want, epochs):
    out = run([prog, "job-c", "0", "1", str(R), "ipc://" + sock], timeout=120)
    got = []
    for line in out.splitlines():
        w = line.split()
        if w[0] == "piece":
            got.append((int(w[2]), int(w[3]), int(w[4]), int(w[5]), [int(v) for v in w[7:]]))
    if len(got) != len(want):
        fail("%s: %d pieces, reference %d" % (tag, len(got), len(want)))
    rows = sum(g[3] for g in got)
    if rows != RECORDS * epochs:
        fail("%s: %d rows, expected %d" % (tag, rows, RECORDS * epochs))
    for i, (g, x) in enumerate(zip(got, want)):
        if (g[0], g[1], g[2]) != (x[0], x[1], x[2]) or g[3] != len(x[3]) or len(g[4]) != g[3]:
            fail("%s: piece %d is (epoch, step, replica, rows) %s, reference %s" % (tag, i, g[:4],
                                                                                    (x[0], x[1], x[2], len(x[3]))))
    for e in range(epochs):
        ids = sorted(v for g in got if g[0] == e for v in g[4])
        if ids != list(range(RECORDS)):
            fail("%s: epoch %d: ids are not 0..%d once each" % (tag, e, RECORDS - 1))
    if "position %d" % (len(want)) not in out or not out.rstrip().endswith("end"):
        fail("%s: position/end lines: %s" % (tag, out.splitlines()[-2:]))
    ok("%s: %d pieces, %d rows, every id once per epoch, position %d" % (tag, len(got), rows, len(want)))


PY_CHECK = r"""
import os, sys
import sluice
assert sluice.__file__.startswith(sys.argv[1]), sluice.__file__
plan = sluice.plan(sys.argv[2], 1, %d)
ids = []
with sluice.Client([sys.argv[3]], "job-c", replicas=%d) as c:
    for step in c:
        for rep in step.replicas:
            ids.append((step.epoch, rep["id"].tolist()))
print("steps", plan["workers"][0]["steps"])
for e in sorted(set(x for x, _ in ids)):
    print("epoch", e, " ".join(str(v) for x, vs in ids if x == e for v in vs))
"""

PY_FEEDER = r"""
import sys
import sluice
with sluice.Feeder(sys.argv[1], threads=1) as f:
    with f.client() as c:
        n = sum(len(rep["id"]) for step in c for rep in step.replicas)
print(f.args[0], n, f.returncode)
"""


def check_python(prefix, job_path, tag):
    """The installed Python package: under PREFIX/lib/python3.X/dist-packages,
    its extension finding the installed libsluice by its RUNPATH ($ORIGIN),
    sluice.plan finding PREFIX/bin/sluice-feeder; every id once per epoch."""
    pydirs = glob.glob(os.path.join(prefix, "lib*", "python3*", "dist-packages", "sluice"))
    if not pydirs:
        return False
    pkg = pydirs[0]
    ext = glob.glob(os.path.join(pkg, "_sluice*.so"))
    # (the type stubs and py.typed too, issue #29)
    if sorted(os.listdir(pkg)) != sorted(["__init__.py", "torch.py", "feeder.py",
                                          os.path.basename(ext[0]) if ext else "?", "__init__.pyi", "_sluice.pyi", "torch.pyi", "feeder.pyi", "py.typed"]):
        fail("installed Python package: %s" % sorted(os.listdir(pkg)))
    runpath = re.search(r"RUNPATH\s+(\S+)", run(["objdump", "-p", ext[0]]))
    if runpath is None or not runpath.group(1).startswith("$ORIGIN/"):
        fail("the extension's RUNPATH: %s" % (runpath and runpath.group(1)))
    sock = os.path.join(bed.TMP, "fpy.sock")
    feeder = spawn([os.path.join(prefix, "bin", "sluice-feeder"), "--job", job_path, "--listen", "ipc://" + sock],
                   log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", feeder, "the feeder did not start")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.path.dirname(pkg), "PYTHONDONTWRITEBYTECODE": "1"}
    out = run(["/usr/bin/python3", "-c", PY_CHECK % (R, R), os.path.dirname(pkg), job_path, "ipc://" + sock],
              env=env, cwd=bed.TMP, timeout=120)
    if bed.wait(feeder, 30, "the feeder") != 0:
        fail("the feeder exited with %d" % feeder.returncode)
    lines = out.splitlines()
    epochs = [ln.split()[2:] for ln in lines if ln.startswith("epoch ")]
    if len(epochs) != 2 or any(sorted(int(v) for v in e) != list(range(RECORDS)) for e in epochs):
        fail("installed Python package: ids are not 0..%d once per epoch:\n%s" % (RECORDS - 1, out[:2000]))
    # sluice.Feeder (issue #29 item 2) finds PREFIX/bin/sluice-feeder from
    # the installed package alone (PATH without it, no SLUICE_BUILD)
    out = run(["/usr/bin/python3", "-c", PY_FEEDER, job_path], env=env, cwd=bed.TMP, timeout=120).split()
    if out[0] != os.path.join(prefix, "bin", "sluice-feeder") or out[1:] != [str(RECORDS * 2), "0"]:
        fail("installed Python package: sluice.Feeder ran %s" % out)
    ok("installed Python package: %s; RUNPATH %s; %s; every id once in each of 2 epochs; sluice.Feeder runs %s"
       % (os.path.relpath(pkg, prefix), runpath.group(1), lines[0], os.path.relpath(out[0], prefix)))
    return True


def main():
    bed.setup(sys.argv[1], "clientlib")
    try:
        prefix = os.path.join(bed.TMP, "prefix")
        libdir, so = install(prefix)
        exports(so)
        progs = [("pkg-config build", build_pkgconfig(prefix, libdir)), ("CMake build", build_cmake(prefix))]
        files = bed.gen("a", RECORDS, SHARDS)
        job_path, job = bed.write_job("job-c", files, epochs=2)
        want = expected(job)
        for i, (tag, prog) in enumerate(progs):
            # a feeder is done once its one worker has everything: one per run
            sock = os.path.join(bed.TMP, "f%d.sock" % i)
            feeder = spawn([os.path.join(prefix, "bin", "sluice-feeder"), "--job", job_path, "--listen",
                            "ipc://" + sock], log=bed.log_path("c%d" % i, "feeder"))
            bed.wait_for_log("c%d" % i, "feeder", "serving job", feeder, "the feeder did not start")
            check_run(prog, tag, sock, want, 2)
            if bed.wait(feeder, 30, "the feeder") != 0:
                fail("the feeder exited with %d" % feeder.returncode)
        if os.path.isdir(os.path.join(bed.BUILD, "python", "sluice")) and not check_python(prefix, job_path, "py"):
            fail("the build has the Python package, the install does not")
        bed.finish()
    finally:
        harness.stop_all()
        bed.cleanup()


if __name__ == "__main__":
    main()
