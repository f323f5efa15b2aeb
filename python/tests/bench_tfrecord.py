#!/usr/bin/python3
"""tools/bench_python.py's contender over the public `tfrecord` reader
(issue #25), without that library: stand-in packages written here, so the
tool's handling is checked wherever the tests run.

    bench_tfrecord.py BUILD DATA

1. --tfrecord-lib naming a folder without a tfrecord package: usage
   error, exit 2, before anything runs.
2. A tfrecord package that cannot be imported: the contender is skipped
   and the report says so and why; the others are measured and checked,
   exit 0.
3. A tfrecord package whose TFRecordDataset drops each shard's last
   record (a wrong reader): the per-epoch checks catch it, exit 1, with
   the exact rows it saw.
4. One whose TFRecordDataset raises: listed as a problem, exit 1, the
   other contenders still reported.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "bench_python.py")

# a reader that loses each shard's last record, built on the tool's own
# pure-Python TFRecord parser (not the library's code)
WRONG_DATASET = '''
import sys
import numpy as np
import torch
sys.path.insert(0, %r)
from bench_python import parse_example, read_tfrecord


class TFRecordDataset(torch.utils.data.IterableDataset):
    def __init__(self, data_path, index_path, description=None, shuffle_queue_size=None, transform=None):
        super().__init__()
        self.data_path, self.description, self.transform = data_path, description, transform

    def __iter__(self):
        for rec in list(read_tfrecord(self.data_path, False))[:-1]:
            ex = parse_example(rec)
            f = {k: ex[k][0] if d == "byte" else np.array(ex[k], dtype=np.int64)
                 for k, d in self.description.items()}
            yield self.transform(f)


class MultiTFRecordDataset(torch.utils.data.IterableDataset):
    pass
''' % os.path.join(ROOT, "tools")

INDEX = '''
def create_index(tfrecord_file, index_file):
    open(index_file, "w").close()
'''


def package(root, dataset_py):
    for d in ("tfrecord", "tfrecord/torch", "tfrecord/tools"):
        os.makedirs(os.path.join(root, d))
        open(os.path.join(root, d, "__init__.py"), "w").close()
    with open(os.path.join(root, "tfrecord/torch/dataset.py"), "w") as f:
        f.write(dataset_py)
    with open(os.path.join(root, "tfrecord/tools/tfrecord2idx.py"), "w") as f:
        f.write(INDEX)


def bench(build, data, lib, *extra):
    cmd = [sys.executable, TOOL, "--build", build, "--data", data, "--epochs", "1", "--repeat", "1",
           "--step-ms", "0", "--dl-workers", "0", "--dl-crc", "off", "--tfrecord-lib", lib] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    return r.returncode, r.stdout, r.stderr


def expect(cond, what, out=""):
    if not cond:
        print("FAIL: %s\n%s" % (what, out[-3000:]))
        sys.exit(1)
    print("ok: %s" % what)


def main():
    build, data = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="sluice-bench-tfrecord-") as tmp:
        empty = os.path.join(tmp, "empty")
        os.makedirs(empty)
        rc, out, err = bench(build, data, empty)
        expect(rc == 2 and "--tfrecord-lib %s: no folder tfrecord in it" % empty in err,
               "a folder without the package is a usage error (exit 2)", out + err)

        broken = os.path.join(tmp, "broken")
        package(broken, "import sluice_test_no_such_module\n")
        rc, out, err = bench(build, data, broken)
        expect(rc == 0, "an unimportable library: the run still measures the others (exit 0)", out + err)
        expect("DataLoader over the public tfrecord reader: SKIPPED, it cannot be imported "
               "(ModuleNotFoundError: No module named 'sluice_test_no_such_module')" in out,
               "the report says the contender was skipped, and why", out)
        expect("tfrecord " not in out.split("| contender |")[1] and "checks: 60000 rows per epoch" in out
               and ": ok" in out, "no row for it; the others checked ok", out)

        wrong = os.path.join(tmp, "wrong")
        package(wrong, WRONG_DATASET)
        rc, out, err = bench(build, data, wrong, "--tfrecord-datasets", "chain")
        expect("the public tfrecord reader: %s" % wrong in out, "the library is imported from --tfrecord-lib", out)
        expect(rc == 1 and "tfrecord-chain-0: epoch 0: 59992 rows, not 60000" in out and "FAILED" in out,
               "a reader that drops a record per shard fails the checks (exit 1, rows named)", out + err)

        failing = os.path.join(tmp, "failing")
        package(failing, WRONG_DATASET.replace("for rec in list(", "raise OSError('disk on fire')\n        for rec in list("))
        rc, out, err = bench(build, data, failing, "--tfrecord-datasets", "chain")
        expect(rc == 1 and "tfrecord-chain-0: the tfrecord reader failed: OSError: disk on fire" in out
               and "| sluice C client" in out,
               "a reader that raises: listed as a problem (exit 1), the others still reported", out + err)
    print("bench_tfrecord: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
