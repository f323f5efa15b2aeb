#!/usr/bin/env python3
"""The CUDA/NCCL backend as a loadable module (issue #24 item 14).

sluice-trainer links the CPU backend only; the CUDA and NCCL code is
libsluice-cuda.so, installed in LIBDIR/sluice and dlopen()ed when a GPU is
asked for (--devices gpu..., or `auto` probing). So the installed trainer
starts and trains on CPU replicas on a node without libcudart or libnccl,
and asking it for a GPU there fails with the loader's reason.

1. `cmake --install BUILD --prefix TMP/prefix`: the trainer's ELF needs
   neither libcudart nor libnccl (readelf NEEDED, and `ldd` lists neither).
   In a build with CUDA, the
   module is installed there, exports sluice_cuda_module_v1 only and needs
   libcudart and libnccl.
2. The module removed from the prefix: the installed trainer trains on
   `--devices cpu:2` and on `--devices auto` (the probe falls back to CPU
   replicas) against the installed feeder, exit 0 and "ok": true; asked for
   gpu:0 it exits 2 with the exact message naming the missing module
   (dlerror) and where it was looked for, or, in a build without CUDA, that the build has none.
3. The module back, the CUDA libraries hidden (a private mount namespace
   with an empty tmpfs over the directories libcudart and libnccl resolve
   to; needs root or user namespaces, else said and skipped): `ldd` of the
   module shows them "not found", the trainer still trains on CPU, and
   gpu:0 fails naming the missing CUDA library.

Usage: test_cuda_module.py BUILD_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

RECORDS, SHARDS = 96, 2
MODULE = "libsluice-cuda.so"


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def must(args, **kw):
    p = run(args, **kw)
    if p.returncode != 0:
        fail("%s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", must(["readelf", "-d", path]))


def install(prefix):
    must(["cmake", "--install", bed.BUILD, "--prefix", prefix])
    trainer = os.path.join(prefix, "bin", "sluice-trainer")
    libdir = next((os.path.join(prefix, d) for d in ("lib", "lib64")
                   if os.path.exists(os.path.join(prefix, d, "libsluice.so"))), None)
    if libdir is None:
        fail("libsluice.so not installed under %s" % prefix)
    deps = needed(trainer)
    if any(d.startswith(("libcudart", "libnccl", "libcuda.")) for d in deps):
        fail("the installed trainer still needs the CUDA libraries: %s" % deps)
    ldd = must(["ldd", trainer])
    if re.search(r"libcudart|libnccl", ldd):
        fail("ldd lists CUDA libraries for the installed trainer:\n%s" % ldd)
    ok("installed trainer: NEEDED %s (no libcudart, no libnccl; ldd agrees)" % " ".join(deps))
    module = os.path.join(libdir, "sluice", MODULE)
    built = os.path.exists(os.path.join(bed.BUILD, "lib", "sluice", MODULE))
    if built != os.path.exists(module):
        fail("module in the build: %s, installed at %s: %s" % (built, module, os.path.exists(module)))
    if built:
        syms = must(["nm", "-D", "--defined-only", module]).split()[2::3]
        if syms != ["sluice_cuda_module_v1"]:
            fail("%s exports %s, expected sluice_cuda_module_v1 only" % (module, syms[:20]))
        mdeps = needed(module)
        if not any(d.startswith("libcudart") for d in mdeps) or not any(d.startswith("libnccl") for d in mdeps):
            fail("%s needs %s, expected libcudart and libnccl" % (module, mdeps))
        ok("module %s: exports sluice_cuda_module_v1 only, needs %s" % (os.path.relpath(module, prefix),
                                                                        " ".join(mdeps)))
    return trainer, module if built else None


def train(prefix, job_path, tag, devices, wrap=()):
    """One short CPU training with the installed feeder and trainer: exit 0,
    every step trained, "ok": true."""
    sock = os.path.join(bed.TMP, "%s.sock" % tag)
    feeder = spawn([os.path.join(prefix, "bin", "sluice-feeder"), "--job", job_path, "--listen", "ipc://" + sock],
                   log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", feeder, "%s: the feeder did not start" % tag)
    args = list(wrap) + [os.path.join(prefix, "bin", "sluice-trainer"), "--connect", "ipc://" + sock, "--job",
                         "job-m", "--devices", devices, "--model", "softmax", "--input", "image", "--label", "label",
                         "--classes", "10", "--progress", "off"]
    p = run(args, timeout=120)
    if p.returncode != 0:
        fail("%s: the trainer (--devices %s) exited %d:\n%s" % (tag, devices, p.returncode, p.stderr[-3000:]))
    if bed.wait(feeder, 30, "the feeder") != 0:
        fail("%s: the feeder exited with %d" % (tag, feeder.returncode))
    s = json.loads(p.stdout.strip().splitlines()[-1])["summary"]
    if s.get("ok") is not True or s.get("elements") != RECORDS:
        fail("%s: summary %s" % (tag, json.dumps(s)[:1500]))
    return s


def gpu_refused(trainer, want, wrap=()):
    """--devices gpu:0: exit 2, the message; returns it."""
    p = run(list(wrap) + [trainer, "--devices", "gpu:0", "--job", "job-m", "--connect", "ipc:///nonexistent.sock"],
            timeout=60)
    first = p.stderr.splitlines()[0] if p.stderr else ""
    if p.returncode != 2 or not re.fullmatch(want, first):
        fail("--devices gpu:0: exit %d, %r; expected exit 2 and /%s/" % (p.returncode, p.stderr[-2000:], want))
    return first


def hide_cuda(module):
    """The wrapper that runs a command with the directories holding
    libcudart and libnccl hidden, or None (said) when no namespace can be made."""
    dirs = sorted({os.path.dirname(os.path.realpath(m.group(1)))
                   for m in re.finditer(r"lib(?:cudart|nccl)\S* => (\S+)", must(["ldd", module]))})
    if not dirs:
        fail("ldd %s resolves neither libcudart nor libnccl" % module)
    # never hide what the trainer itself needs (CUDA installed among the
    # system's libraries): the test would then say nothing
    trainer = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(module))), "bin", "sluice-trainer")
    own = {os.path.dirname(os.path.realpath(m.group(1)))
           for m in re.finditer(r"=> (/\S+)", must(["ldd", trainer]))}
    if own & set(dirs):
        print("SKIP part 3: the CUDA libraries share %s with the trainer's own" % sorted(own & set(dirs)))
        return None, dirs
    script = " && ".join("mount -t tmpfs sluice-hidden %s" % d for d in dirs) + ' && exec "$@"'
    for unshare in (["unshare", "-m"], ["unshare", "-r", "-m"]):
        if shutil.which("unshare") and run(unshare + ["sh", "-c", script, "sh", "true"]).returncode == 0:
            return unshare + ["sh", "-c", script, "sh"], dirs
    print("SKIP part 3: no mount namespace here (needs root or user namespaces) to hide %s" % dirs)
    return None, dirs


def main():
    bed.setup(sys.argv[1], "cudamod")
    try:
        prefix = os.path.join(bed.TMP, "prefix")
        trainer, module = install(prefix)
        files = bed.gen("m", RECORDS, SHARDS)
        job_path, _ = bed.write_job("job-m", files, epochs=1)

        # 2. without the module
        if module is not None:
            os.rename(module, module + ".away")
        s = train(prefix, job_path, "cpu2", "cpu:2")
        a = train(prefix, job_path, "auto", "auto")
        if module is not None:
            msg = gpu_refused(trainer, re.escape(
                "sluice-trainer: --devices: 'gpu:0' asks for GPUs, but the CUDA backend module could not be "
                "loaded: %s: cannot open shared object file: No such file or directory (looked in %s/bin/../%s/"
                "sluice, then LD_LIBRARY_PATH and the system's directories)"
                % (MODULE, prefix, os.path.relpath(os.path.dirname(os.path.dirname(module)), prefix))))
        else:
            msg = gpu_refused(trainer, re.escape(
                "sluice-trainer: --devices: 'gpu:0' asks for GPUs, but this build has no CUDA backend (CUDA and "
                "NCCL were not found at configure time)"))
        ok("no module: cpu:2 trained %d elements in %d steps, auto %d replicas; gpu:0 refused: %s"
           % (s["elements"], s["steps"], a["replicas"], msg))
        if module is None:
            print("SKIP part 3: this build has no CUDA backend")
            bed.finish()
            return
        os.rename(module + ".away", module)

        # 3. the module, and the CUDA libraries hidden
        wrap, dirs = hide_cuda(module)
        if wrap is not None:
            hidden = run(wrap + ["ldd", module]).stdout
            if not re.search(r"lib(cudart|nccl)\S* => not found", hidden):
                fail("the CUDA libraries are not hidden: ldd %s in the namespace:\n%s" % (module, hidden))
            s = train(prefix, job_path, "hidden", "cpu:2", wrap)
            msg = gpu_refused(trainer, r"sluice-trainer: --devices: 'gpu:0' asks for GPUs, but the CUDA backend "
                              r"module could not be loaded: lib(cudart|nccl)\.so\.\d+: cannot open shared object "
                              r"file: No such file or directory", wrap)
            ok("CUDA libraries hidden (%s): cpu:2 trained %d elements; gpu:0 refused: %s"
               % (" ".join(dirs), s["elements"], msg))
        bed.finish()
    finally:
        harness.stop_all()
        bed.cleanup()


if __name__ == "__main__":
    main()
