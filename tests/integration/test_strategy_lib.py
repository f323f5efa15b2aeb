#!/usr/bin/env python3
"""The installed distributed-values library (issue #24 item 19).

1. `cmake --install BUILD --prefix TMP/prefix` puts libsluice-strategy
   (SONAME libsluice-strategy.so.MAJOR, with its links),
   include/sluice/strategy.h beside client.h (no internal header),
   sluice-strategy.pc (Requires: sluice) and the target sluice::strategy in
   the sluice CMake package under the prefix.
2. The library exports exactly the functions strategy.h declares
   (SLUICE_API), nothing else.
3. examples/strategy/sluice_values.c builds against the prefix only, with
   pkg-config (sluice-strategy) and with CMake's find_package(sluice), and
   both builds, run against a real sluice-feeder serving the seed pages'
   dataset ([5., 6., 7., 8.], float32, global batch 2) as worker 0 of 1
   with 2 replicas, print exactly the pages' results: PerReplica [5.], [6.];
   run +1 -> [6.], [7.]; reduce SUM axis 0 -> 11.0; local results; the
   replica ids; values_from_function's (1.0, 1.0), (3.0, 2.0), (2, 2);
   run * 2 -> 4, 4; all_reduce("sum") of the ids -> 1, 1 (integers where
   the pages' values are integers).

Usage: test_strategy_lib.py BUILD_DIR
"""
import json
import os
import re
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

EXPECTED = """distributed_values = next(dataset_iterator)
PerReplica:{
  0: [5.],
  1: [6.]
}
strategy.run(lambda input: input + 1.0, args=(distributed_values,))
PerReplica:{
  0: [6.],
  1: [7.]
}
strategy.reduce(SUM, distributed_values, axis=0)
11.0
strategy.reduce(SUM, distributed_values, axis=None)
[11.]
strategy.reduce(MEAN, distributed_values, axis=0)
5.5
strategy.experimental_local_results(distributed_values)
([5.], [6.])
strategy.run(lambda: get_replica_context().replica_id_in_sync_group)
PerReplica:{
  0: 0,
  1: 1
}
experimental_local_results(values_from_function(lambda ctx: tf.constant(1.)))
(1.0, 1.0)
experimental_local_results(values_from_function(lambda ctx: array_value[ctx.replica_id_in_sync_group]))
(3.0, 2.0)
experimental_local_results(values_from_function(lambda ctx: ctx.num_replicas_in_sync))
(2, 2)
strategy.run(lambda input: input * 2, args=(values_from_function(num_replicas_in_sync),))
PerReplica:{
  0: 4,
  1: 4
}
strategy.run(lambda input: get_replica_context().all_reduce("sum", input), \
args=(values_from_function(replica_id_in_sync_group),))
PerReplica:{
  0: 1,
  1: 1
}
steps 2
"""


def run(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        fail("%s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def install(prefix):
    run(["cmake", "--install", bed.BUILD, "--prefix", prefix])
    libdir = next((os.path.join(prefix, d) for d in ("lib", "lib64")
                   if os.path.exists(os.path.join(prefix, d, "libsluice-strategy.so"))), None)
    if libdir is None:
        fail("libsluice-strategy.so not installed under %s" % prefix)
    so = os.path.join(libdir, "libsluice-strategy.so")
    if not os.path.islink(so) or not os.path.islink(so + ".0"):
        fail("libsluice-strategy.so and .so.0 are not links: %s" % sorted(os.listdir(libdir)))
    headers = sorted(os.listdir(os.path.join(prefix, "include", "sluice")))
    if headers != ["client.h", "map_plugin.h", "strategy.h"] or os.path.exists(os.path.join(prefix, "include", "train_strategy.h")):
        fail("installed headers: %s" % headers)
    for f in ("pkgconfig/sluice-strategy.pc", "cmake/sluice/sluiceTargets.cmake"):
        if not os.path.exists(os.path.join(libdir, f)):
            fail("%s not installed" % f)
    with open(os.path.join(libdir, "cmake", "sluice", "sluiceTargets.cmake")) as f:
        if "sluice::strategy" not in f.read():
            fail("the CMake package has no sluice::strategy")
    soname = re.search(r"SONAME\s+(\S+)", run(["objdump", "-p", so]))
    if soname is None or soname.group(1) != "libsluice-strategy.so.0":
        fail("SONAME: %s" % (soname and soname.group(1)))
    ok("install: libsluice-strategy (SONAME libsluice-strategy.so.0) + links, include/sluice/strategy.h, "
       "sluice-strategy.pc, sluice::strategy")
    return libdir, so


def exports(prefix, so):
    names = sorted(run(["nm", "-D", "--defined-only", so]).split()[2::3])
    with open(os.path.join(prefix, "include", "sluice", "strategy.h")) as f:
        declared = sorted(set(re.findall(r"SLUICE_API\s[^;(]*?\b(sluice_\w+)\s*\(", f.read())))
    if not declared or names != declared:
        fail("exports %s\n  declared %s" % (names, declared))
    ok("exports: the %d functions strategy.h declares, nothing else" % len(names))


def build_pkgconfig(libdir):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = run(["pkg-config", "--cflags", "--libs", "sluice-strategy"], env=env).split()
    if "-lsluice-strategy" not in flags or "-lsluice" not in flags:
        fail("pkg-config sluice-strategy: %s (expected -lsluice-strategy and, through Requires, -lsluice)" % flags)
    out = os.path.join(bed.TMP, "values-pc")
    run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", os.path.join(SRC, "examples", "strategy", "sluice_values.c"),
         "-o", out] + flags + ["-Wl,-rpath," + libdir])
    ok("pkg-config: %s" % " ".join(flags))
    return out


def build_cmake(prefix):
    out = os.path.join(bed.TMP, "values-cmake")
    run(["cmake", "-S", os.path.join(SRC, "examples", "strategy"), "-B", out, "-DCMAKE_PREFIX_PATH=" + prefix])
    run(["cmake", "--build", out])
    ok("find_package(sluice): sluice::strategy sluice::sluice")
    return os.path.join(out, "sluice_values")


def write_npy(path, values):
    """A float32 .npy vector (format 1.0), written by hand (no numpy needed)."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() +
                struct.pack("<%df" % len(values), *values))


def main():
    bed.setup(sys.argv[1], "strategylib")
    try:
        prefix = os.path.join(bed.TMP, "prefix")
        libdir, so = install(prefix)
        exports(prefix, so)
        progs = [("pkg-config build", build_pkgconfig(libdir)), ("CMake build", build_cmake(prefix))]
        # the seed pages' dataset: from_tensor_slices([5., 6., 7., 8.]).batch(2)
        npy = os.path.join(bed.TMP, "x.npy")
        write_npy(npy, [5.0, 6.0, 7.0, 8.0])
        job_path = os.path.join(bed.TMP, "values.json")
        with open(job_path, "w") as f:
            json.dump({"name": "values", "format": "arrays", "global_batch_size": 2, "epochs": 1,
                       "features": {"x": {"dtype": "float32", "array": npy}}}, f)
        for i, (tag, prog) in enumerate(progs):
            sock = os.path.join(bed.TMP, "v%d.sock" % i)
            feeder = spawn([os.path.join(prefix, "bin", "sluice-feeder"), "--job", job_path, "--listen",
                            "ipc://" + sock], log=bed.log_path("v%d" % i, "feeder"))
            bed.wait_for_log("v%d" % i, "feeder", "serving job", feeder, "the feeder did not start")
            out = run([prog, "values", "x", "ipc://" + sock], timeout=120)
            if out != EXPECTED:
                fail("%s printed:\n%s\nexpected:\n%s" % (tag, out, EXPECTED))
            if bed.wait(feeder, 30, "the feeder") != 0:
                fail("the feeder exited with %d" % feeder.returncode)
            ok("%s: the seed pages' values, exactly (%d lines)" % (tag, len(out.splitlines())))
        bed.finish()
    finally:
        harness.stop_all()
        bed.cleanup()


if __name__ == "__main__":
    main()
