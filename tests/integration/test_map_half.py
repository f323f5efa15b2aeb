#!/usr/bin/env python3
"""float16 and bfloat16 through real processes (issue #27): sluice-feeder
serving a job whose map normalizes a uint8 image into float16 or bfloat16
and casts floats and labels to them, to the Python client (sluice.Client)
and sluice.torch.

1. Every element's bytes equal numpy's: the normalize computed in float32
   ((x / 255 - mean) / std, as the feeder does), then numpy's
   astype(float16) (round to nearest, ties to even), and bfloat16 rounded
   from the float32 bits (and checked against torch's .to(torch.bfloat16));
   CHW and HWC. float16 arrives as numpy float16; bfloat16 as uint16 bits of
   dtype sluice.bfloat16, torch.bfloat16 through sluice.torch.to_torch.
2. A trainer that predates float16/bfloat16 (its HELLO without the flag, as
   sent before it existed) gets a REFUSE saying so, not a WELCOME it would
   misread.
3. STATS with the map stage: a HELLO with SL_WIRE_HELLO_STATS_MAP gets the
   64-byte STATS whose map_ns grows once pieces were mapped; one without it
   the 56-byte STATS a trainer before the map stage reads.

Usage: test_map_half.py BUILD_DIR
"""
import base64
import json
import os
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
import wire  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

import numpy as np  # noqa: E402

RECORDS, H, W, C = 40, 4, 4, 3
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
FLAG_SHM, FLAG_STATUS, FLAG_STATS, FLAG_HALF, FLAG_STATS_MAP = 1, 2, 4, 8, 16
STATS = 11


def records(files):
    """{id: (image bytes, label, dense float32 [3])} from sluice-record cat."""
    out = {}
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        for line in p.stdout.splitlines():
            ft = json.loads(line)["example"]["features"]["feature"]
            img = base64.b64decode(ft["image"]["bytesList"]["value"][0])
            dense = np.array([np.float32(v) for v in ft["dense"]["floatList"]["value"]], dtype=np.float32)
            out[int(ft["id"]["int64List"]["value"][0])] = (img, int(ft["label"]["int64List"]["value"][0]), dense)
    return out


def bf16_bits(a):
    """float32 -> bfloat16 bits in numpy: the top 16 bits, rounded to
    nearest, ties to even; a NaN kept a NaN."""
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((b >> 16) | 0x40).astype(np.uint16), r)


def normalized(img, chw):
    x = np.frombuffer(img, dtype=np.uint8).reshape(H, W, C).astype(np.float32)
    v = (x / np.float32(255.0) - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    return v.transpose(2, 0, 1).copy() if chw else v


def job_for(name, files, dtype, layout, other, epochs=1):
    job = {"name": name, "files": files, "format": "tfrecord", "global_batch_size": 8, "epochs": epochs, "prefetch": 4,
           "shuffle": {"buffer": 16, "seed": 9},
           "features": {"image": {"dtype": "uint8", "shape": [H, W, C], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []},
                        "id": {"dtype": "int64", "shape": []},
                        "dense": {"dtype": "float32", "shape": [3]}},
           "map": [{"op": "normalize", "feature": "image", "mean": MEAN, "std": STD, "dtype": dtype,
                    "layout": layout},
                   {"op": "cast", "feature": "dense", "dtype": other},
                   {"op": "cast", "feature": "label", "dtype": dtype}]}
    path = os.path.join(bed.TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def serve(tag, job_path):
    sock = os.path.join(bed.TMP, tag + ".sock")
    p = spawn([bed.FEEDER, "--job", job_path, "--listen", "ipc://" + sock, "--threads", "2", "--heartbeat-ms", "100",
               "--idle-exit", "30"], log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not start" % tag)
    return p, "ipc://" + sock


def receive(tag, endpoint, name):
    """Every element the Python client gets: {id: {feature: array}}, and
    the torch tensors of the first step."""
    import sluice
    got, first = {}, None
    with sluice.Client([endpoint], name, replicas=1) as c:
        for step in c:
            r = step.replicas[0]
            if first is None:
                first = r
            for i in range(len(r["id"])):
                # a slice, not r[k][i]: a rank-1 array's element is a scalar, which drops the dtype's metadata
                got[int(r["id"][i])] = {k: r[k][i:i + 1].reshape(r[k].shape[1:]) for k in ("image", "dense", "label")}
    if sorted(got) != list(range(RECORDS)):
        fail("%s: not every id once: %d elements" % (tag, len(got)))
    return got, first


def check(tag, got, first, want, dtype, layout, other):
    import sluice
    chw = layout == "CHW"
    for i, (img, label, dense) in want.items():
        e = got[i]
        v = normalized(img, chw)
        exp = {"image": (v.astype(np.float16).view(np.uint16) if dtype == "float16" else bf16_bits(v)),
               "dense": (dense.astype(np.float16).view(np.uint16) if other == "float16" else bf16_bits(dense)),
               "label": (np.array(label, dtype=np.float16).view(np.uint16) if dtype == "float16"
                         else bf16_bits(np.float32(label)))}
        for k, bits in exp.items():
            kind = dtype if k != "dense" else other
            a = e[k]
            want_dtype = "float16" if kind == "float16" else "uint16"
            if str(a.dtype) != want_dtype or sluice.is_bfloat16(a) != (kind == "bfloat16"):
                fail("%s: id %d: %s arrives as %s (bfloat16 metadata %s), want %s" %
                     (tag, i, k, a.dtype, sluice.is_bfloat16(a), kind))
            want_bytes = np.ascontiguousarray(bits, dtype="<u2").tobytes()
            if a.tobytes() != want_bytes:
                fail("%s: id %d: %s bytes %s, numpy says %s" % (tag, i, k, a.tobytes().hex(), want_bytes.hex()))
        bf = e["image"] if dtype == "bfloat16" else e["dense"]
        if not np.array_equal(sluice.bfloat16_to_float32(bf).view(np.uint32) >> 16, bf):
            fail("%s: id %d: bfloat16_to_float32 does not widen the bits" % (tag, i))
    shape = [first["image"].shape[0]] + ([C, H, W] if chw else [H, W, C])
    if list(first["image"].shape) != shape:
        fail("%s: image shape %s, want %s" % (tag, list(first["image"].shape), shape))
    try:
        import torch
        import sluice.torch as st
    except ImportError:
        return "torch absent: not checked"
    t = st.to_torch(first)
    for k, kind in (("image", dtype), ("dense", other)):
        want_t = torch.float16 if kind == "float16" else torch.bfloat16
        if t[k].dtype != want_t:
            fail("%s: sluice.torch gives %s for %s, want %s" % (tag, t[k].dtype, k, want_t))
        # the same bits as the numpy array, and torch's own rounding of the float32 values agrees
        if t[k].view(torch.int16).numpy().view(np.uint16).tobytes() != first[k].tobytes():
            fail("%s: sluice.torch's %s is not the received bits" % (tag, k))
    ids = [int(x) for x in first["id"]]
    v32 = np.stack([normalized(want[i][0], chw) for i in ids])
    theirs = torch.from_numpy(v32).to(torch.float16 if dtype == "float16" else torch.bfloat16)
    if theirs.view(torch.int16).numpy().view(np.uint16).tobytes() != first["image"].tobytes():
        fail("%s: torch's own rounding of the float32 normalize differs from the feeder's" % tag)
    return "torch: %s and %s, and torch's rounding agrees" % (t["image"].dtype, t["dense"].dtype)


def recv_until(sock, want_type, timeout_s, after_pieces=0):
    """Frames from the feeder until one of want_type (after at least
    `after_pieces` PIECEs): its header frame, or None."""
    deadline, pieces = time.time() + timeout_s, 0
    while time.time() < deadline:
        if not sock.poll(200):
            continue
        frames = sock.recv_multipart()
        mtype = struct.unpack_from("<H", frames[0], 6)[0]
        if mtype == wire.PIECE:
            pieces += 1
        if mtype == want_type and pieces >= after_pieces:
            return frames[0]
        if mtype in (wire.REFUSE, wire.ERROR) and want_type not in (wire.REFUSE, wire.ERROR):
            fail("the feeder answered %d: %r" % (mtype, frames[0][8:]))
    return None


def raw_peer(endpoint, name, flags, credits):
    import zmq
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    s.send(wire.hello(job=name, flags=flags, credits=credits, heartbeat_ms=0, incarnation=flags + 1))
    return s


def wire_checks(endpoint, name):
    # a trainer from before float16: SHM, STATUS and STATS, not the new flag
    s = raw_peer(endpoint, name, FLAG_SHM | FLAG_STATUS | FLAG_STATS, 0)
    h = recv_until(s, wire.REFUSE, 10)
    s.close()
    reason = h[10:].decode() if h is not None else ""
    if h is None or "float16" not in reason or "predates" not in reason:
        fail("an old trainer's HELLO: no REFUSE naming float16 (got %r)" % reason)
    ok("a trainer that predates float16: refused in words: %s" % reason)
    # STATS: both forms, from the same feeder
    sizes = {}
    for flags, want in ((FLAG_STATS | FLAG_HALF, 56), (FLAG_STATS | FLAG_HALF | FLAG_STATS_MAP, 64)):
        s = raw_peer(endpoint, name, flags, 64)
        h = recv_until(s, STATS, 10, after_pieces=1)
        if h is None or len(h) != want:
            fail("STATS to HELLO flags %#x: %s bytes, want %d" % (flags, None if h is None else len(h), want))
        if want == 64:
            h2 = recv_until(s, STATS, 10)  # a later one: the map's time of the pieces made by now
            map_ns = struct.unpack_from("<Q", h2, 56)[0]
            if not map_ns > 0:
                fail("STATS with the map stage: map_ns %d after pieces were mapped" % map_ns)
            sizes[want] = map_ns
        s.send(wire.bye())
        s.close()
        time.sleep(0.2)  # the worker's place freed before the next HELLO
    ok("STATS: 56 bytes to a trainer without the map flag, 64 with it (map_ns %d ns)" % sizes[64])


def main():
    bed.setup(sys.argv[1], "map-half")
    os.environ["PYTHONPATH"] = os.path.join(bed.BUILD, "python")
    sys.path.insert(0, os.path.join(bed.BUILD, "python"))
    try:
        out = os.path.join(bed.TMP, "d")
        subprocess.run([bed.RECORD, "gen", "--output-dir", out, "--records", str(RECORDS), "--shards", "2",
                        "--seed", "4", "--image-bytes", str(H * W * C), "--floats", "3", "--classes", "5",
                        "--prefix", "part"], check=True, capture_output=True)
        files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("part-"))
        want = records(files)
        for dtype, layout, other in (("float16", "CHW", "bfloat16"), ("bfloat16", "HWC", "float16")):
            tag = "%s-%s" % (dtype, layout)
            job = job_for("job-" + tag, files, dtype, layout, other)
            p, endpoint = serve(tag, job)
            got, first = receive(tag, endpoint, "job-" + tag)
            note = check(tag, got, first, want, dtype, layout, other)
            ok("%s %s: %d elements' bytes equal numpy's (normalize into %s, dense cast to %s, label to %s); %s" %
               (dtype, layout, len(got), dtype, other, dtype, note))
            p.kill()
            p.wait()
        # the raw peers: a job without end, so that every HELLO is served
        job = job_for("job-wire", files, "float16", "CHW", "bfloat16", epochs=0)
        p, endpoint = serve("wire", job)
        wire_checks(endpoint, "job-wire")
        p.kill()
        p.wait()
    finally:
        harness.stop_all()
    bed.finish()


if __name__ == "__main__":
    main()
