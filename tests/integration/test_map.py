#!/usr/bin/env python3
"""The map stage through real processes (issue #27 section 1): sluice-feeder
serving a job whose map one-hots the label, pads the tokens (with a mask)
and casts them, runs the example plugin (examples/plugin/scale.c, found
beside the job file) on the dense floats, and a test plugin that writes each
element's random stream key, to the Python client (sluice.Client).

1. Every element's tensors equal what an independent computation from the
   records (`sluice-record cat`) gives, exactly: one-hot rows, padded and
   truncated tokens as float32 with their uint8 mask, dense x 2 + 1, and the
   stream key sl_rng_key(seed, epoch, element id, op index) recomputed here
   (splitmix64), element id the record's place in the job's files.
2. The same with F = 2 feeders: the same elements, the same keys (the
   augmentation stream does not depend on who made the piece).
3. A label outside one_hot's depth, and a plugin that returns more bytes
   than its capacity: the feeder stops the job with an error naming the file,
   the record, its offset, the element id and the op (the plugin's path).
4. The feeder's --stats has a `map` stage.

Usage: test_map.py BUILD_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok  # noqa: E402
from rrc_ref import rng_key  # noqa: E402

RECORDS, SHARDS, CLASSES, SEED, LENGTH = 60, 3, 5, 5, 4



def records(files):
    """{id: (element id, label, dense, tokens)} from sluice-record cat."""
    out, element = {}, 0
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        for line in p.stdout.splitlines():
            ft = json.loads(line)["example"]["features"]["feature"]
            ids = int(ft["id"]["int64List"]["value"][0])
            toks = [int(v) for v in ft.get("tokens", {}).get("int64List", {}).get("value", [])]
            dense = [float(v) for v in ft["dense"]["floatList"]["value"]]
            out[ids] = (element, int(ft["label"]["int64List"]["value"][0]), dense, toks)
            element += 1
    return out


def job_for(name, files, depth=CLASSES, test_mode="seed"):
    d = os.path.join(bed.TMP, name)
    os.makedirs(d, exist_ok=True)
    # the example plugin beside the job file, named relatively
    shutil.copy(os.path.join(bed.BUILD, "tests", "libsluice_scale.so"), os.path.join(d, "libscale.so"))
    job = {"name": name, "files": files, "format": "tfrecord", "global_batch_size": 8, "epochs": 2, "prefetch": 4,
           "shuffle": {"buffer": 16, "seed": SEED},
           "features": {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []},
                        "id": {"dtype": "int64", "shape": []},
                        "dense": {"dtype": "float32", "shape": [3]},
                        "tokens": {"dtype": "int64", "varlen": True}},
           "map": [{"op": "one_hot", "feature": "label", "depth": depth},
                   {"op": "pad_or_truncate", "feature": "tokens", "length": LENGTH, "pad": -1,
                    "mask": "tokens_mask"},
                   {"op": "cast", "feature": "tokens", "dtype": "float32"},
                   {"op": "plugin", "feature": "dense", "path": "libscale.so", "args": {"scale": 2, "offset": 1}},
                   {"op": "plugin", "feature": "image", "path": os.path.join(bed.BUILD, "tests",
                                                                             "libsl_map_test_plugin_plain.so"),
                    "args": {"mode": test_mode}}]}
    path = os.path.join(d, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


CLIENT = r"""
import json, sys
import numpy as np
import sluice
out = []
try:
    with sluice.Client(sys.argv[2].split(","), sys.argv[1], replicas=1) as c:
        for step in c:
            r = step.replicas[0]
            for i in range(len(r["id"])):
                out.append({"epoch": step.epoch, "id": int(r["id"][i]),
                            "label": r["label"][i].tolist(), "label_dtype": str(r["label"].dtype),
                            "tokens": r["tokens"][i].tolist(), "tokens_dtype": str(r["tokens"].dtype),
                            "mask": r["tokens_mask"][i].tolist(), "mask_dtype": str(r["tokens_mask"].dtype),
                            "dense": [float(x) for x in r["dense"][i]], "dense_dtype": str(r["dense"].dtype),
                            "key": int(np.frombuffer(r["image"][i].tobytes(), dtype="<u8")[0])})
except Exception as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(3)
print(json.dumps(out))
"""


def serve(tag, job_path, F, extra=()):
    return bed.serve_client(tag, job_path, F, CLIENT,
                            lambda j: ["--stats", os.path.join(bed.TMP, "%s-%d.stats" % (tag, j))] + list(extra))


def check_elements(tag, got, want):
    seen = {}
    for e in got:
        element, label, dense, toks = want[e["id"]]
        one = [0.0] * CLASSES
        one[label] = 1.0
        pad = (toks + [-1] * LENGTH)[:LENGTH]
        mask = [1 if i < len(toks) else 0 for i in range(LENGTH)]
        # the plugin: float32(double(float32 x) * 2 + 1), as float32
        import numpy as np
        dense_want = [float(np.float32(float(np.float32(x)) * 2 + 1)) for x in dense]
        exp = {"label": one, "label_dtype": "float32", "tokens": [float(v) for v in pad], "tokens_dtype": "float32",
               "mask": mask, "mask_dtype": "uint8", "dense": dense_want, "dense_dtype": "float32",
               "key": rng_key(SEED, e["epoch"], element, 4)}
        for k, v in exp.items():
            if e[k] != v:
                fail("%s: element id %d (record %d) epoch %d: %s is %r, want %r" % (tag, element, e["id"],
                                                                                  e["epoch"], k, e[k], v))
        seen[(e["epoch"], e["id"])] = e["key"]
    if sorted(seen) != sorted((ep, i) for ep in (0, 1) for i in range(RECORDS)):
        fail("%s: not every id once per epoch: %d elements" % (tag, len(seen)))
    return seen


def main():
    bed.setup(sys.argv[1], "map")
    try:
        subprocess.run([bed.RECORD, "gen", "--output-dir", os.path.join(bed.TMP, "d"), "--records", str(RECORDS),
                        "--shards", str(SHARDS), "--seed", "3", "--image-bytes", "16", "--floats", "3",
                        "--varlen-max", "6", "--classes", str(CLASSES), "--vocab", "100", "--prefix", "part"],
                       check=True, capture_output=True)
        files = sorted(glob.glob(os.path.join(bed.TMP, "d", "part-*")))
        want = records(files)
        if not any(len(t) > LENGTH for _, _, _, t in want.values()) or not any(len(t) < LENGTH
                                                                                  for _, _, _, t in want.values()):
            fail("the data set has no tokens both longer and shorter than %d" % LENGTH)
        job = job_for("job-m", files)

        keys = {}
        for F in (1, 2):
            tag = "f%d" % F
            p, codes = serve(tag, job, F)
            if p.returncode != 0 or codes != [0] * F:
                fail("%s: client exit %d, feeders %s\n%s%s" % (tag, p.returncode, codes, p.stdout[-2000:],
                                                                p.stderr[-2000:]))
            keys[F] = check_elements(tag, json.loads(p.stdout), want)
            ok("F=%d: %d elements of 2 epochs exact: one_hot, pad_or_truncate + mask, cast, the example plugin "
               "(beside the job), the stream key (seed, epoch, element id, op)" % (F, len(keys[F])))
        if keys[1] != keys[2]:
            fail("the stream keys differ between F=1 and F=2")
        ok("F=1 and F=2: the same stream key for every (epoch, element)")
        with open(os.path.join(bed.TMP, "f1-0.stats")) as f:
            st = json.load(f)
        cpu = st["cpu_s"]
        if "map" not in cpu or not cpu["map"] > 0:
            fail("--stats cpu_s has no map stage time: %s" % cpu)
        ops = [o["op"] for o in st.get("map_ops", [])]
        if ops != ["map[0] one_hot", "map[1] pad_or_truncate", "map[2] cast", "map[3] plugin", "map[4] plugin"] or \
                any(not o["cpu_s"] >= 0 for o in st["map_ops"]):
            fail("--stats map_ops: %s" % st.get("map_ops"))
        ok("--stats: cpu_s.map %.6f s; map_ops %s" % (cpu["map"], [round(o["cpu_s"], 6) for o in st["map_ops"]]))

        # a label past one_hot's depth: the job stops, the error names it
        bad = [(i, w) for i, w in want.items() if w[1] >= CLASSES - 1]
        job = job_for("job-depth", files, depth=CLASSES - 1)
        p, codes = serve("depth", job, 1)
        log = bed.read_log("depth", "feeder0")
        if p.returncode == 0 or codes == [0]:
            fail("depth: a label outside one_hot's depth was served (client %d, feeder %s)" % (p.returncode, codes))
        import re
        m = re.search(r"(\S+part-\S+): record (\d+) at (\d+): element (\d+): map\[0\] one_hot: label (\d+) is "
                      r"outside \[0, 4\)", log)
        if m is None:
            fail("depth: the feeder's error does not name the file, record, offset, element and op:\n%s" % log[-3000:])
        element = int(m.group(4))
        by_element = {w[0]: (i, w) for i, w in want.items()}
        if element not in by_element or by_element[element][1][1] != int(m.group(5)) or not bad:
            fail("depth: element %s is not a record with label %s" % (element, m.group(5)))
        ok("a label outside one_hot's depth: %s" % m.group(0)[m.group(0).rfind("/") + 1:])

        # a plugin that returns more than its capacity: refused, named
        job = job_for("job-over", files, test_mode="oversize")
        p, codes = serve("over", job, 1)
        log = bed.read_log("over", "feeder0")
        m = re.search(r"record \d+ at \d+: element \d+: map\[4\] plugin: plugin \S+libsl_map_test_plugin_plain.so "
                      r"returned 4112 bytes, its output is 16 bytes \(more than the capacity it was given\)", log)
        if p.returncode == 0 or codes == [0] or m is None:
            fail("over: an oversized plugin output was not refused as expected:\n%s" % log[-3000:])
        ok("a plugin returning more than its capacity: refused with its path, element and record")
    finally:
        harness.stop_all()
    bed.finish()


if __name__ == "__main__":
    main()
