"""Python input: the sluice Python client against PyTorch DataLoaders over a
pure-Python TFRecord reader and over the public `tfrecord` reader, and
against sluice's C client, on the same Fashion-MNIST TFRecord shards,
measured in one run (issue #17 section 4, issue #25).

    tools/bench_python.py [--data DIR] [--build DIR] [--epochs N] [--dl-epochs N]
                          [--batch N] [--step-ms MS] [--repeat N] [--dl-repeat N]
                          [--dl-workers 0,2] [--dl-crc on|off|both]
                          [--tfrecord-lib DIR] [--tfrecord-datasets chain,multi] [--json FILE]

Contenders, each consuming the training shards (no shuffle) in batches of
--batch rows, with the same consumer loop: take the next batch (timed: the
input wait), sum its labels and ids (the checks below), then a simulated
training step (a busy loop of --step-ms, 0 allowed):

  python     sluice.Client (worker 0 of 1, one replica) fed by one
             sluice-feeder over ipc://, pieces in shared memory (each
             step copied out of it once: writable arrays)
  python-lend  the same with lend=True: each step lent where it lies
             (read-only arrays; its credit back once the loop drops it)
  c          the C client library (libsluice) fed the same way: a small C
             program with the same loop, compiled for the run from the
             public header against BUILD/client/libsluice.so; its
             sluice_client_release after each step counts as input time
             (the Python client returns a step's credit inside next())
  dataloader torch.utils.data.DataLoader(num_workers=0 and 2, batch_size
             --batch, default collate) over an IterableDataset reading the
             shards in pure Python, as users read TFRecords without
             TensorFlow: struct framing, the masked CRC32C of each length
             and each record checked (a table-driven pure-Python CRC32C;
             --dl-crc off skips them, both measures each DataLoader both
             ways), and tf.train.Example parsed by
             a hand-written protobuf wire-format decoder (no generated code)
  tfrecord   the same DataLoaders over the public `tfrecord` reader
             (github.com/vahidk/tfrecord, what `pip install tfrecord`
             gives): its TFRecordDataset per shard chained in file order
             (chain) and its MultiTFRecordDataset (multi), description
             image "byte", label "int", id "int", the image's bytes made a
             uint8 array by the dataset's transform; with workers, each
             reads its share of every shard through the library's own
             index (made for the run by its tfrecord2idx). The library
             does not check CRCs. It is imported, never copied: from
             --tfrecord-lib DIR (put first on sys.path) or a normal import;
             it needs python3-protobuf and python3-crc32c. When the import
             fails, these contenders are skipped and the report says why.

Each sluice contender gets a feeder of its own (started before its clock
starts, once it logs 'serving job'; the feeder's temporary job is
examples/fmnist-train.json with shuffle off, --epochs and --batch). The
sluice contenders run --repeat times, alternating, and the run with the
median elements/s is reported; each DataLoader runs --dl-repeat times (by
default once: a pure-Python epoch takes seconds), in the same rounds.

Per contender: batches/s, elements/s and the input stall, the time the
consumer waited for its next batch over its total time (from creating
the client or the DataLoader iterator to the last batch). Ratios (of
elements/s): Python client / C client (target >= 0.8), Python client /
the best DataLoader (target >= 20), and C client and Python client / the
best DataLoader over the tfrecord reader (target for C >= 60). The report
gives the load average at the start and at the end.

Checks: every contender must see exactly --expect-rows rows in each
epoch, with the same label sum (that of the IDX label file the shards were
made from, when it is there) and the same id sum, so that a wrong reader
cannot look fast. Exit status: 0 measured and checked, 1 a check failed
or a contender could not run, 2 usage.

Every child process (feeders, the C program, DataLoader workers) is killed
on exit, Ctrl-C and SIGTERM included.
"""
import argparse
import gc
import glob
import gzip
import json
import multiprocessing
import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FMNIST = "/usr/share/datasets/fashion-mnist"
JOB_NAME = "fmnist-bench-python"

CHILDREN = []  # Popen objects this process started
MAIN_PID = os.getpid()


# ---------------------------------------------------------------------------
# CRC32C (Castagnoli), table-driven, pure Python

def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


CRC_TABLE = _crc_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    table = CRC_TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data):
    """TFRecord's masked CRC32C."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def check_crc32c():
    """Known vectors (the check value, RFC 3720 B.4)."""
    vectors = [(b"123456789", 0xE3069283), (b"", 0), (bytes(32), 0x8A9136AA),
               (b"\xff" * 32, 0x62A8AB43), (bytes(range(32)), 0x46DD794E),
               (bytes(range(31, -1, -1)), 0x113FDB5C)]
    for data, want in vectors:
        got = crc32c(data)
        if got != want:
            raise SystemExit("bench_python: crc32c(%r...) = %08x, not %08x" % (data[:9], got, want))


# ---------------------------------------------------------------------------
# TFRecord framing and tf.train.Example, pure Python

_HEAD = struct.Struct("<QI")
_CRC = struct.Struct("<I")


def read_tfrecord(path, check_crc=True):
    """The records of one plain TFRecord file: u64 length, masked CRC32C of
    the length, data, masked CRC32C of the data."""
    with open(path, "rb") as f:
        while True:
            head = f.read(12)
            if not head:
                return
            if len(head) != 12:
                raise ValueError("%s: truncated record header" % path)
            length, length_crc = _HEAD.unpack(head)
            if check_crc and masked_crc(head[:8]) != length_crc:
                raise ValueError("%s: bad length CRC" % path)
            data = f.read(length)
            tail = f.read(4)
            if len(data) != length or len(tail) != 4:
                raise ValueError("%s: truncated record" % path)
            if check_crc and masked_crc(data) != _CRC.unpack(tail)[0]:
                raise ValueError("%s: bad data CRC" % path)
            yield data


def _varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint too long")


def _fields(buf, start, end):
    """(field number, wire type, value) of a message's fields in buf[start:end]:
    value an int for varints and fixed ints, a (start, end) span for
    length-delimited ones."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value = (pos, pos + n)
            pos += n
        elif wire == 5:
            value = buf[pos:pos + 4]
            pos += 4
        elif wire == 1:
            value = buf[pos:pos + 8]
            pos += 8
        else:
            raise ValueError("unsupported wire type %d" % wire)
        if pos > end:
            raise ValueError("field past the end of its message")
        yield field, wire, value


def _int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def _feature(buf, start, end):
    """Feature: oneof bytes_list = 1, float_list = 2, int64_list = 3; each a
    message whose field 1 holds the values (packed or not)."""
    values = []
    for kind, wire, span in _fields(buf, start, end):
        if wire != 2 or kind not in (1, 2, 3):
            continue
        values = []
        for f, w, v in _fields(buf, span[0], span[1]):
            if f != 1:
                continue
            if kind == 1:                       # BytesList: repeated bytes
                values.append(bytes(buf[v[0]:v[1]]))
            elif kind == 2:                     # FloatList: repeated float
                if w == 2:
                    n = (v[1] - v[0]) // 4
                    values.extend(struct.unpack_from("<%df" % n, buf, v[0]))
                elif w == 5:
                    values.append(struct.unpack("<f", v)[0])
            else:                               # Int64List: repeated int64
                if w == 2:
                    p = v[0]
                    while p < v[1]:
                        x, p = _varint(buf, p)
                        values.append(_int64(x))
                elif w == 0:
                    values.append(_int64(v))
    return values


def parse_example(buf):
    """tf.train.Example -> {name: [values]} (Example.features = 1;
    Features.feature = 1, a map<string, Feature>: entries of key = 1, value = 2)."""
    out = {}
    for f, w, span in _fields(buf, 0, len(buf)):
        if f != 1 or w != 2:
            continue
        for g, w2, entry in _fields(buf, span[0], span[1]):
            if g != 1 or w2 != 2:
                continue
            key = None
            value = (0, 0)
            for h, w3, v in _fields(buf, entry[0], entry[1]):
                if h == 1 and w3 == 2:
                    key = bytes(buf[v[0]:v[1]]).decode()
                elif h == 2 and w3 == 2:
                    value = v
            if key is not None:
                out[key] = _feature(buf, value[0], value[1])
    return out


def make_dataset_class():
    import numpy as np
    import torch

    class TFRecordDataset(torch.utils.data.IterableDataset):
        """Rows of the shards in file order; each DataLoader worker reads its
        own files (worker k of n: files k, k+n, ...)."""

        def __init__(self, files, check_crc=True):
            super().__init__()
            self.files = list(files)
            self.check_crc = check_crc

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            files = self.files if info is None else self.files[info.id::info.num_workers]
            for path in files:
                for rec in read_tfrecord(path, self.check_crc):
                    ex = parse_example(rec)
                    yield {"image": np.frombuffer(ex["image"][0], dtype=np.uint8).copy(),
                           "label": (ex.get("label") or [0])[0],
                           "id": ex["id"][0]}

    return TFRecordDataset


# ---------------------------------------------------------------------------
# the consumer loop, the same for every Python contender

def busy(seconds):
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def consume(make_iter, summarize, step_s):
    """Drive make_iter()'s batches: the wait for each (and for creating the
    iterator) is input wait; summarize(batch) -> (epoch, rows, label sum,
    id sum), then the simulated step."""
    epochs = {}
    batches = 0
    wait = 0.0
    t0 = time.perf_counter()
    it = make_iter()
    wait += time.perf_counter() - t0
    while True:
        a = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            wait += time.perf_counter() - a
            break
        wait += time.perf_counter() - a
        epoch, rows, lsum, isum = summarize(b)
        del b
        e = epochs.setdefault(epoch, [0, 0, 0])
        e[0] += rows
        e[1] += lsum
        e[2] += isum
        batches += 1
        busy(step_s)
    total = time.perf_counter() - t0
    return {"batches": batches, "seconds": total, "wait_s": wait,
            "epochs": [epochs[k] for k in sorted(epochs)]}


# ---------------------------------------------------------------------------
# processes

def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    CHILDREN.append(p)
    return p


def kill_children():
    for p in CHILDREN:
        if p.poll() is None:
            p.terminate()
    for p in CHILDREN:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for p in multiprocessing.active_children():  # DataLoader workers left by an interrupt
        p.terminate()
        p.join(5)
        if p.is_alive():
            p.kill()


def on_sigterm(signum, frame):
    if os.getpid() != MAIN_PID:  # a forked DataLoader worker: die as SIGTERM says
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise SystemExit(128 + signum)


class Feeder:
    """One sluice-feeder serving the run's job on an ipc:// socket, ready
    (it logged 'serving job') when start() returns."""

    def __init__(self, args, tmp, tag):
        self.sock = os.path.join(tmp, tag + ".sock")
        self.endpoint = "ipc://" + self.sock
        self.log = os.path.join(tmp, tag + "-feeder.log")
        self.cmd = [os.path.join(args.build, "feeder", "sluice-feeder"), "--job", args.job_path,
                    "--listen", self.endpoint, "--report-s", "0"]
        self.proc = None

    def start(self, timeout=60):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        with open(self.log, "w") as log:
            self.proc = spawn(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log) as f:
                if "serving job" in f.read():
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the feeder did not start: %s" % self.tail())
            time.sleep(0.01)

    def finish(self, timeout=30):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()
            raise RuntimeError("the feeder did not exit after its trainer left")
        if rc != 0:
            raise RuntimeError("the feeder exited with status %d: %s" % (rc, self.tail()))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()

    def tail(self):
        with open(self.log) as f:
            return " | ".join(f.read().strip().splitlines()[-3:])


# ---------------------------------------------------------------------------
# the C contender: the same loop over libsluice

C_SOURCE = r"""
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sluice/client.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int64_t sum64(const struct sluice_piece *p, const char *name)
{
    int64_t s = 0;
    for (size_t i = 0; i < p->ntensors; i++) {
        const struct sluice_tensor *t = &p->tensors[i];
        if (strcmp(t->name, name) != 0 || t->dtype != SLUICE_INT64)
            continue;
        for (uint64_t k = 0; k < t->bytes / 8; k++) {
            int64_t v;
            memcpy(&v, (const char *)t->data + 8 * k, 8);
            s += v;
        }
    }
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s JOB ENDPOINT STEP_MS\n", argv[0]);
        return 2;
    }
    double step_s = atof(argv[3]) / 1000.0;
    const char *feeders[1] = {argv[2]};
    struct sluice_options o = {0};
    o.job = argv[1];
    o.feeders = feeders;
    o.nfeeders = 1;
    struct sluice_error err;
    struct sluice_client *c;
    uint64_t batches = 0, cap = 0;
    int64_t (*ep)[3] = NULL;
    double wait = 0, t0 = now();
    if (sluice_client_open(&c, &o, &err) != SLUICE_OK) {
        fprintf(stderr, "bench_c: %s: %s\n", sluice_code_name(err.code), err.message);
        return 1;
    }
    wait += now() - t0;
    for (;;) {
        const struct sluice_piece *p;
        double a = now();
        int rc = sluice_client_next_step(c, &p, &err);
        wait += now() - a;
        if (rc == SLUICE_END)
            break;
        if (rc != SLUICE_OK) {
            fprintf(stderr, "bench_c: %s: %s\n", sluice_code_name(err.code), err.message);
            sluice_client_close(c);
            return 1;
        }
        if (p[0].epoch >= cap) {
            uint64_t n = p[0].epoch + 8;
            ep = realloc(ep, n * sizeof *ep);
            if (!ep)
                return 1;
            memset(ep + cap, 0, (n - cap) * sizeof *ep);
            cap = n;
        }
        ep[p[0].epoch][0] += p[0].rows;
        ep[p[0].epoch][1] += sum64(&p[0], "label");
        ep[p[0].epoch][2] += sum64(&p[0], "id");
        batches++;
        if (step_s > 0) {
            double end = now() + step_s;
            while (now() < end) {
            }
        }
        double r = now();
        sluice_client_release(c); /* the step's memory and credit back: input work, timed as such */
        wait += now() - r;
    }
    double total = now() - t0;
    sluice_client_close(c);
    printf("{\"batches\":%" PRIu64 ",\"seconds\":%.6f,\"wait_s\":%.6f,\"epochs\":[", batches, total, wait);
    uint64_t ne = 0;
    for (uint64_t e = 0; e < cap; e++)
        if (ep[e][0])
            ne = e + 1;
    for (uint64_t e = 0; e < ne; e++)
        printf("%s[%" PRId64 ",%" PRId64 ",%" PRId64 "]", e ? "," : "", ep[e][0], ep[e][1], ep[e][2]);
    printf("]}\n");
    free(ep);
    return 0;
}
"""


def build_c_client(args, tmp):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    lib = os.path.join(args.build, "client")
    if not cc:
        raise RuntimeError("no C compiler (cc) to build the C contender")
    if not os.path.exists(os.path.join(lib, "libsluice.so")):
        raise RuntimeError("%s/libsluice.so is missing: build sluice first" % lib)
    src = os.path.join(tmp, "bench_c.c")
    exe = os.path.join(tmp, "bench_c")
    with open(src, "w") as f:
        f.write(C_SOURCE)
    cmd = [cc, "-std=c11", "-O2", "-I", os.path.join(ROOT, "client", "include"), src, "-o", exe,
           "-L", lib, "-lsluice", "-Wl,-rpath," + lib]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("building the C contender failed: %s" % r.stderr.strip())
    return exe


def run_c(args, tmp, exe):
    feeder = Feeder(args, tmp, "c")
    feeder.start()
    try:
        p = spawn([exe, JOB_NAME, feeder.endpoint, repr(args.step_ms)], stdin=subprocess.DEVNULL,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError("the C contender failed (%d): %s" % (p.returncode, err.strip()))
        feeder.finish()
    finally:
        feeder.stop()
    return json.loads(out)


def run_python(args, tmp, sluice, lend=False):
    feeder = Feeder(args, tmp, "py-lend" if lend else "py")
    feeder.start()
    client = []
    try:
        def make_iter():
            c = sluice.Client(feeders=[feeder.endpoint], job=JOB_NAME, lend=lend)
            client.append(c)
            return iter(c)

        def summarize(step):
            piece = step.replicas[0]
            return (step.epoch, step.rows[0], int(piece["label"].sum()), int(piece["id"].sum()))

        r = consume(make_iter, summarize, args.step_ms / 1000.0)
        for c in client:
            c.close()
        client.clear()
        feeder.finish()
    finally:
        for c in client:
            c.close()
        feeder.stop()
    return r


def run_dataloader(args, files, workers, check_crc):
    return run_loader(args, make_dataset_class()(files, check_crc=check_crc), workers)


def run_loader(args, ds, workers):
    """The consumer loop over a DataLoader on `ds` (batch --batch, default
    collate), --dl-epochs epochs; each batch a dict with 'label' and 'id'."""
    import torch
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=False, num_workers=workers)

    def make_iter():
        def gen():
            for e in range(args.dl_epochs):
                for b in loader:
                    yield e, b
        return gen()

    def summarize(eb):
        e, b = eb
        return (e, int(b["label"].shape[0]), int(b["label"].sum()), int(b["id"].sum()))

    return consume(make_iter, summarize, args.step_ms / 1000.0)


# ---------------------------------------------------------------------------
# the public `tfrecord` reader (github.com/vahidk/tfrecord, `pip install
# tfrecord`), imported, never copied: --tfrecord-lib DIR or a normal import

TFRECORD_DESCRIPTION = {"image": "byte", "label": "int", "id": "int"}


def import_tfrecord(lib):
    """(tfrecord.torch.dataset, tfrecord.tools.tfrecord2idx, where) or
    (None, None, why not). `lib`: a folder put first on sys.path, or None
    for the normal search path."""
    if lib is not None:
        sys.path.insert(0, lib)
    try:
        from tfrecord.torch import dataset as tfds
        from tfrecord.tools import tfrecord2idx
    except Exception as e:  # ImportError; protobuf refuses a generated module it cannot load with TypeError
        return None, None, "%s: %s" % (type(e).__name__, e)
    where = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tfds.__file__))))
    if lib is not None and os.path.realpath(where) != os.path.realpath(lib):
        return None, None, "tfrecord was imported from %s, not from --tfrecord-lib %s" % (where, lib)
    try:
        from google.protobuf import __version__ as pb_version
        from google.protobuf.internal import api_implementation
        where += " (protobuf %s, %s implementation)" % (pb_version, api_implementation.Type())
    except ImportError:
        pass
    return tfds, tfrecord2idx, where


def tfrecord_image(features):
    """The `transform` a user gives the library: the image's bytes as a
    uint8 array (the library hands a single bytes value over as bytes; label
    and id come as int64 arrays of one value)."""
    import numpy as np
    features["image"] = np.frombuffer(features["image"], dtype=np.uint8).copy()
    return features


def tfrecord_indexes(files, tmp, tfrecord2idx):
    """The library's own index of each shard (its text format, made by its
    tfrecord2idx.create_index), which it needs to split the records
    between DataLoader workers: {shard path: index path}."""
    out = {}
    folder = os.path.join(tmp, "tfrecord-index")
    os.makedirs(folder, exist_ok=True)
    for path in files:
        idx = os.path.join(folder, os.path.basename(path)[:-len(".tfrecord")] + ".index")
        tfrecord2idx.create_index(path, idx)
        out[path] = idx
    return out


def run_tfrecord(args, files, indexes, workers, kind, tfds):
    """A DataLoader over the library's datasets: `chain`, one
    TFRecordDataset per shard chained in file order (torch's ChainDataset);
    `multi`, one MultiTFRecordDataset over the shards (equal weights,
    infinite=False: it draws each record from a randomly chosen shard until
    all are read). Without workers no index is passed (the library then
    reads each file from its start); with workers each worker reads its
    share of every shard through the index."""
    import torch
    use_index = workers > 0
    if kind == "chain":
        ds = torch.utils.data.ChainDataset(
            [tfds.TFRecordDataset(f, indexes[f] if use_index else None, TFRECORD_DESCRIPTION,
                                  transform=tfrecord_image) for f in files])
    else:
        names = [os.path.basename(f)[:-len(".tfrecord")] for f in files]
        folder = os.path.dirname(files[0]).replace("{", "{{").replace("}", "}}")
        ifolder = os.path.dirname(indexes[files[0]]).replace("{", "{{").replace("}", "}}")
        ds = tfds.MultiTFRecordDataset(os.path.join(folder, "{}.tfrecord"),
                                       os.path.join(ifolder, "{}.index") if use_index else None,
                                       {n: 1.0 for n in names}, TFRECORD_DESCRIPTION,
                                       transform=tfrecord_image, infinite=False)
    try:
        return run_loader(args, ds, workers)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # the library's own failure: listed as a problem, the run goes on
        raise RuntimeError("the tfrecord reader failed: %s: %s" % (type(e).__name__, e)) from e


# ---------------------------------------------------------------------------

def ensure_data(args):
    files = sorted(glob.glob(os.path.join(args.data, "train-*.tfrecord")))
    if files:
        return files
    rec = os.path.join(args.build, "tools", "sluice-record")
    print("bench_python: no shards in %s: making them from %s" % (args.data, FMNIST), file=sys.stderr)
    os.makedirs(args.data, exist_ok=True)
    subprocess.run([rec, "convert", "idx", "--images", os.path.join(FMNIST, "train-images-idx3-ubyte.gz"),
                    "--labels", os.path.join(FMNIST, "train-labels-idx1-ubyte.gz"), "--output-dir", args.data,
                    "--prefix", "train", "--shards", "8", "--index"], check=True, stdout=subprocess.DEVNULL)
    return sorted(glob.glob(os.path.join(args.data, "train-*.tfrecord")))


def idx_label_sum():
    path = os.path.join(FMNIST, "train-labels-idx1-ubyte.gz")
    if not os.path.exists(path):
        return None
    with gzip.open(path) as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic != 2049 or len(data) != 8 + n:
        return None
    return sum(data[8:])


def write_job(args, files, tmp):
    with open(os.path.join(ROOT, "examples", "fmnist-train.json")) as f:
        job = json.load(f)
    job["name"] = JOB_NAME
    job["files"] = [os.path.abspath(p) for p in files]
    job["shuffle"] = None
    job["epochs"] = args.epochs
    job["global_batch_size"] = args.batch
    path = os.path.join(tmp, "job.json")
    with open(path, "w") as f:
        json.dump(job, f, indent=1)
    return path


def machine():
    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d cores (%s), %s" % (os.cpu_count() or 0, model, platform.platform(terse=True))


def check(name, r, expect_rows, epochs, ref):
    """Problems with r's per-epoch counts: a list of strings."""
    bad = []
    if len(r["epochs"]) != epochs:
        bad.append("%s: %d epochs seen, not %d" % (name, len(r["epochs"]), epochs))
    for e, (rows, lsum, isum) in enumerate(r["epochs"]):
        if rows != expect_rows:
            bad.append("%s: epoch %d: %d rows, not %d" % (name, e, rows, expect_rows))
        if ref["label"] is not None and lsum != ref["label"]:
            bad.append("%s: epoch %d: label sum %d, not %d" % (name, e, lsum, ref["label"]))
        if ref["id"] is not None and isum != ref["id"]:
            bad.append("%s: epoch %d: id sum %d, not %d" % (name, e, isum, ref["id"]))
        if ref["label"] is None:
            ref["label"] = lsum
        if ref["id"] is None:
            ref["id"] = isum
    return bad


def figures(r):
    rows = sum(e[0] for e in r["epochs"])
    return {"batches": r["batches"], "rows": rows, "seconds": round(r["seconds"], 4),
            "batches_per_s": r["batches"] / r["seconds"], "elements_per_s": rows / r["seconds"],
            "stall_pct": 100.0 * r["wait_s"] / r["seconds"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head -70 %s) for what is measured." % __file__)
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fmnist"),
                    help="the shards' folder: DATA/train-*.tfrecord, made with sluice-record convert idx "
                         "from %s if missing (default data/fmnist)" % FMNIST)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="sluice's build folder (default build)")
    ap.add_argument("--epochs", type=int, default=10, help="epochs of the sluice contenders (default 10)")
    ap.add_argument("--dl-epochs", type=int, default=1, help="epochs of each DataLoader (default 1)")
    ap.add_argument("--batch", type=int, default=256, help="global batch size (default 256)")
    ap.add_argument("--step-ms", type=float, default=0.2,
                    help="the simulated training step, a busy loop, per batch (default 0.2; 0: none)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each sluice contender, alternating; the median is reported (default 3)")
    ap.add_argument("--dl-repeat", type=int, default=1,
                    help="runs of each DataLoader, in the same rounds as the sluice contenders; "
                         "the median is reported (default 1)")
    ap.add_argument("--dl-workers", default="0,2", help="DataLoader num_workers values (default 0,2)")
    ap.add_argument("--dl-crc", choices=["on", "off", "both"], default="on",
                    help="the pure-Python reader checks the CRCs (on, the default), skips them (off), "
                         "or each DataLoader is measured both ways (both)")
    ap.add_argument("--expect-rows", type=int, default=60000, help="rows per epoch (default 60000)")
    ap.add_argument("--tfrecord-lib", metavar="DIR",
                    help="the folder holding the public `tfrecord` package (github.com/vahidk/tfrecord: "
                         "DIR/tfrecord/torch/dataset.py), put first on sys.path; default: a normal import. "
                         "Its DataLoaders are measured when the import works, skipped (said so) when not")
    ap.add_argument("--tfrecord-datasets", default="chain,multi",
                    help="which of the library's datasets: chain (a TFRecordDataset per shard, chained), "
                         "multi (MultiTFRecordDataset), comma-separated; empty: none (default chain,multi)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as one JSON object")
    args = ap.parse_args()
    args.tfrecord_kinds = [k for k in args.tfrecord_datasets.split(",") if k != ""]
    if any(k not in ("chain", "multi") for k in args.tfrecord_kinds):
        ap.error("--tfrecord-datasets: a comma-separated list of chain and multi")
    if args.tfrecord_lib is not None:
        if not os.path.isdir(os.path.join(args.tfrecord_lib, "tfrecord")):
            ap.error("--tfrecord-lib %s: no folder tfrecord in it (give the folder that holds the package)"
                     % args.tfrecord_lib)
        args.tfrecord_lib = os.path.abspath(args.tfrecord_lib)
    if (args.epochs < 1 or args.dl_epochs < 1 or args.batch < 1 or args.repeat < 1 or args.dl_repeat < 1
            or args.step_ms < 0):
        ap.error("--epochs, --dl-epochs, --batch, --repeat and --dl-repeat must be >= 1, --step-ms >= 0")
    try:
        dl_workers = [int(x) for x in args.dl_workers.split(",") if x != ""]
    except ValueError:
        ap.error("--dl-workers: a comma-separated list of integers")
    args.build = os.path.abspath(args.build)
    args.data = os.path.abspath(args.data)

    signal.signal(signal.SIGTERM, on_sigterm)
    check_crc32c()
    tmp = tempfile.mkdtemp(prefix="sluice-bench-python-")
    rc = 1
    try:
        rc = bench(args, dl_workers, tmp)
    except KeyboardInterrupt:
        print("bench_python: interrupted", file=sys.stderr)
        rc = 130
    except SystemExit as e:
        print("bench_python: stopped", file=sys.stderr)
        rc = e.code
    finally:
        if os.getpid() != MAIN_PID:  # never clean up from a forked child
            os._exit(1)
        gc.collect()  # the interrupted DataLoader iterator shuts its workers down
        kill_children()
        shutil.rmtree(tmp, ignore_errors=True)
    return rc


def bench(args, dl_workers, tmp):
    load_start = os.getloadavg()
    files = ensure_data(args)
    args.job_path = write_job(args, files, tmp)
    problems = []
    results = {}  # name -> list of raw runs
    sys.path.insert(0, os.path.join(args.build, "python"))
    try:
        import sluice
    except ImportError as e:
        sluice = None
        problems.append("python: cannot import sluice from %s/python: %s" % (args.build, e))
    try:
        exe = build_c_client(args, tmp)
    except RuntimeError as e:
        exe = None
        problems.append("c: %s" % e)

    contenders = []  # (name, label, run function, epochs)
    if sluice is not None:
        contenders.append(("python", "sluice Python client (sluice.Client, shm)",
                           lambda: run_python(args, tmp, sluice), args.epochs))
        contenders.append(("python-lend", "sluice Python client, lent steps (sluice.Client lend=True, shm)",
                           lambda: run_python(args, tmp, sluice, lend=True), args.epochs))
    if exe is not None:
        contenders.append(("c", "sluice C client (libsluice, shm)", lambda: run_c(args, tmp, exe), args.epochs))
    crcs = {"on": [True], "off": [False], "both": [True, False]}[args.dl_crc]
    for w in dl_workers:
        for crc in crcs:
            contenders.append(("dataloader-%d%s" % (w, "" if crc else "-nocrc"),
                               "DataLoader, num_workers=%d (pure-Python TFRecord, %s)"
                               % (w, "CRC checked" if crc else "no CRC check"),
                               lambda w=w, crc=crc: run_dataloader(args, files, w, crc), args.dl_epochs))

    tfrecord_note = None
    if dl_workers and args.tfrecord_kinds:
        tfds, tfrecord2idx, where = import_tfrecord(args.tfrecord_lib)
        if tfds is None:
            tfrecord_note = ("DataLoader over the public tfrecord reader: SKIPPED, it cannot be imported (%s); "
                             "see docs/bench.md (--tfrecord-lib DIR, python3-protobuf)" % where)
            print("bench_python: " + tfrecord_note, file=sys.stderr)
        else:
            tfrecord_note = "the public tfrecord reader: %s" % where
            indexes = tfrecord_indexes(files, tmp, tfrecord2idx)
            for w in dl_workers:
                for kind in args.tfrecord_kinds:
                    contenders.append(("tfrecord-%s-%d" % (kind, w),
                                       "DataLoader, num_workers=%d (tfrecord %s, no CRC check)"
                                       % (w, "TFRecordDataset per shard, chained" if kind == "chain"
                                          else "MultiTFRecordDataset"),
                                       lambda w=w, kind=kind: run_tfrecord(args, files, indexes, w, kind, tfds),
                                       args.dl_epochs))
    elif args.tfrecord_kinds:
        tfrecord_note = "DataLoader over the public tfrecord reader: SKIPPED, no --dl-workers given"

    # rounds: each contender once per round, in turn, for as many rounds as
    # its --repeat or --dl-repeat asks
    def runs_of(name):
        return args.repeat if name in ("python", "python-lend", "c") else args.dl_repeat

    for rep in range(max(args.repeat, args.dl_repeat)):
        for name, _, fn, _ in contenders:
            if rep >= runs_of(name):
                continue
            print("bench_python: %s, run %d of %d" % (name, rep + 1, runs_of(name)), file=sys.stderr)
            try:
                r = fn()  # before setdefault: a contender that never ran has no entry, not an empty one
                results.setdefault(name, []).append(r)
            except RuntimeError as e:
                problems.append("%s: %s" % (name, e))
    labels = {name: label for name, label, _, _ in contenders}
    epochs_of = {name: ep for name, _, _, ep in contenders}

    ref = {"label": idx_label_sum(), "id": None}
    rows_out = {}
    for name, runs in results.items():
        for r in runs:
            problems.extend(check(name, r, args.expect_rows, epochs_of[name], ref))
        figs = [figures(r) for r in runs]
        figs.sort(key=lambda f: f["elements_per_s"])
        med = figs[len(figs) // 2]
        med["runs_elements_per_s"] = [round(f["elements_per_s"]) for f in figs]
        med["epochs"] = epochs_of[name]
        med["label"] = labels[name]
        rows_out[name] = med

    ratios = {}
    rounds = {}  # Python / C of each round: the pair ran back to back, under the same load
    for py_name, key in (("python", "python_over_c"), ("python-lend", "python_lend_over_c")):
        if py_name not in rows_out or "c" not in rows_out:
            continue
        ratios[key] = rows_out[py_name]["elements_per_s"] / rows_out["c"]["elements_per_s"]
        if len(results[py_name]) == len(results["c"]):  # else a run failed: no pairs (the problem is listed)
            rounds[key] = [figures(py)["elements_per_s"] / figures(c)["elements_per_s"]
                           for py, c in zip(results[py_name], results["c"])]
            ratios[key + "_rounds"] = [round(x, 3) for x in rounds[key]]
            ratios[key + "_rounds_median"] = sorted(rounds[key])[len(rounds[key]) // 2]
    for key, pick in (("python_over_best_dataloader", lambda n: not n.endswith("-nocrc")),
                      ("python_over_best_dataloader_nocrc", lambda n: n.endswith("-nocrc"))):
        dls = [rows_out[n] for n in rows_out if n.startswith("dataloader-") and pick(n)]
        if "python" in rows_out and dls:
            best = max(dls, key=lambda f: f["elements_per_s"])
            ratios[key] = rows_out["python"]["elements_per_s"] / best["elements_per_s"]

    tfs = [rows_out[n] for n in rows_out if n.startswith("tfrecord-")]
    if tfs:
        best = max(tfs, key=lambda f: f["elements_per_s"])
        for who in ("c", "python"):
            if who in rows_out:
                ratios["%s_over_best_tfrecord" % who] = rows_out[who]["elements_per_s"] / best["elements_per_s"]

    load = os.getloadavg()
    print()
    print("machine: %s" % machine())
    print("load average (1, 5, 15 min): %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end"
          % (load_start + load))
    if tfrecord_note:
        print(tfrecord_note)
    print("batch %d, step %.3g ms, sluice epochs %d (median of %d runs), DataLoader epochs %d (median of %d runs)"
          % (args.batch, args.step_ms, args.epochs, args.repeat, args.dl_epochs, args.dl_repeat))
    print()
    print("| contender | batches/s | elements/s | stall % |")
    print("| --- | ---: | ---: | ---: |")
    for name, f in rows_out.items():
        print("| %s | %.0f | %.0f | %.1f |" % (f["label"], f["batches_per_s"], f["elements_per_s"], f["stall_pct"]))
    print()
    for key, what in (("python_over_c", "Python client / C client"),
                      ("python_lend_over_c", "Python client, lent steps / C client")):
        if key in ratios:
            print("%s: %.2fx (target >= 0.8)" % (what, ratios[key]))
        if key in rounds:
            print("  in each round (back to back, the same load): %s; median %.2fx"
                  % (" ".join("%.2f" % x for x in rounds[key]), ratios[key + "_rounds_median"]))
    if "c_over_best_tfrecord" in ratios:
        print("C client / best DataLoader over the tfrecord reader: %.1fx (target >= 60)"
              % ratios["c_over_best_tfrecord"])
    if "python_over_best_tfrecord" in ratios:
        print("Python client / best DataLoader over the tfrecord reader: %.1fx" % ratios["python_over_best_tfrecord"])
    if "python_over_best_dataloader" in ratios:
        print("Python client / best DataLoader: %.1fx (target >= 20)" % ratios["python_over_best_dataloader"])
    if "python_over_best_dataloader_nocrc" in ratios:
        print("Python client / best DataLoader without CRC checks: %.1fx"
              % ratios["python_over_best_dataloader_nocrc"])
    print("checks: %d rows per epoch, label sum %s, id sum %s: %s"
          % (args.expect_rows, ref["label"], ref["id"], "FAILED" if problems else "ok"))
    for p in problems:
        print("  " + p)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "batch": args.batch, "step_ms": args.step_ms, "epochs": args.epochs,
                       "dl_epochs": args.dl_epochs, "repeat": args.repeat, "dl_repeat": args.dl_repeat,
                       "dl_crc": args.dl_crc,
                       "contenders": rows_out, "ratios": ratios, "label_sum": ref["label"], "id_sum": ref["id"],
                       "problems": problems, "ok": not problems, "loadavg_start": load_start, "loadavg_end": load, "tfrecord": tfrecord_note},
                      f, indent=1)
            f.write("\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
