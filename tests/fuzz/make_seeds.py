#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets added by issue #26 (one
directory per target under tests/fuzz/seeds/): small valid inputs laid out
as the writers in the tree lay them out (the byte layouts are documented in
each format's header: fmt_array.h, fmt_idx.h, feed_scan_cache.h,
train_ckpt.h, train_ps_ckpt.h, sl_wire.h, train_ring.c, train_rendezvous.c,
train_ps.h), a few at the edges of their limits and a few broken ones, so
that fuzzing starts deep. fuzz_wire's seeds come from make_wire_seeds.py.

Targets whose entry point checks a CRC-32C take a mode byte first (see the
target's comment); mode 0 has the target make the checksums right, and the
seeds carry right ones anyway. Run this again after a format change and
commit the output:

    python3 tests/fuzz/make_seeds.py        # rewrites tests/fuzz/seeds/<target>/ for its targets
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def u16(v):
    return struct.pack("<H", v)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def f32s(vals):
    return b"".join(struct.pack("<f", v) for v in vals)


def pad8(b):
    return b + bytes(-len(b) % 8)


# ---- .npy headers (NumPy's format: magic, version, length, dict literal)

def npy(descr, shape, fortran=False, version=1, data=b"", raw_dict=None):
    if raw_dict is None:
        dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
        raw_dict = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (descr, fortran, dims)
    text = raw_dict.encode()
    pre = 10 if version == 1 else 12
    text += b" " * (-(pre + len(text) + 1) % 64) + b"\n"
    head = b"\x93NUMPY" + bytes([version, 0]) + (u16(len(text)) if version == 1 else u32(len(text)))
    return head + text + data


def npy_seeds():
    return {
        "f4-2x3": npy("<f4", (2, 3), data=f32s([0, 1, 2, 3, 4, 5])),
        "u1-1d": npy("|u1", (4,), data=bytes([1, 2, 3, 250])),
        "i8-be": npy(">i8", (2, 1), data=struct.pack(">qq", -1, 7)),
        "bool": npy("|b1", (3,), data=bytes([0, 1, 2])),
        "u2": npy("<u2", (1, 2), data=struct.pack("<HH", 1, 65535)),
        "f8-v2": npy("<f8", (1,), version=2, data=struct.pack("<d", 0.5)),
        "i4-v3": npy("<i4", (2, 2), version=3, data=struct.pack("<4i", 1, -2, 3, -4)),
        "fortran-1d": npy("<f4", (2,), fortran=True, data=f32s([1, 2])),
        "fortran-2d": npy("<f4", (2, 2), fortran=True),
        "zero-rows": npy("<f4", (0, 4)),
        "zero-row-width": npy("<i2", (3, 0)),
        "dims-9": npy("|u1", (1,) * 9),
        "dims-10": npy("|u1", (1,) * 10),
        "huge": npy("<f8", (1 << 40, 1 << 30)),
        "scalar": npy("<f4", ()),
        "c8": npy("<c8", (2,)),
        "key-twice": npy("", (), raw_dict="{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"),
        "unknown-key": npy("", (), raw_dict="{'descr': '<f4', 'foo': 1, 'shape': (1,), }"),
        "python2-long": npy("", (), raw_dict="{'descr': '<i8', 'fortran_order': False, 'shape': (3L, 2L), }"),
        "version4": b"\x93NUMPY\x04\x00" + bytes(8),
        "truncated": npy("<f4", (2, 3))[:30],
        "png": b"\x89PNG\r\n\x1a\n" + bytes(8),
    }


# ---- IDX headers (00 00 type ndims, then big-endian u32 dims)

def idx(code, dims, data=b""):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def idx_seeds():
    return {
        "images": idx(0x08, (2, 2, 2), bytes(range(8))),
        "labels": idx(0x08, (3,), bytes([7, 2, 1])),
        "int8": idx(0x09, (1, 4), bytes([255, 1, 2, 3])),
        "int16": idx(0x0B, (2,), struct.pack(">hh", -1, 2)),
        "int32": idx(0x0C, (1, 1), struct.pack(">i", -5)),
        "float32": idx(0x0D, (2,), struct.pack(">ff", 1.5, -2)),
        "float64": idx(0x0E, (1,), struct.pack(">d", 3.25)),
        "dims-8": idx(0x08, (1,) * 8),
        "huge-element": idx(0x0E, (1, 65536, 65536)),
        "huge-array": idx(0x0E, (0xFFFFFFFF,) * 8),
        "zero-dim": idx(0x08, (5, 0, 3)),
        "bad-type": idx(0x0A, (1,)),
        "truncated": idx(0x08, (2, 28, 28))[:9],
    }


# ---- scan cache entries (feed_scan_cache.h's layout; mode byte first)

def scan_entry(fmt=0, asked=0, flags=0, max_record=1 << 20, size=100, comp=1, image=None, count=None,
               offsets=(), tail=0, first=None, parts=(), names=()):
    image = size if image is None else image
    count = len(offsets) if count is None else count
    h = b"SLSCANC\0" + u32(1) + u32(fmt) + u32(asked) + u32(flags) + u64(max_record)
    h += u64(64769) + u64(1234567) + u64(size) + u64(1700000000) + u64(123456789) + u64(1700000001) + u64(5)
    h += u64(count) + u64(image) + u64(tail) + u32(comp) + u32(len(names)) + u64(len(parts)) + u32(0)
    h += u32(crc32c(h))
    body = b"".join(u64(o) for o in offsets)
    if first is not None:
        body += b"".join(u64(f) for f in first)
        body += b"".join(u32(n) + u32(0) + u64(o) + u64(ln) for n, o, ln in parts)
        body += b"".join(n.encode().ljust(64, b"\0") for n in names)
    return h, body


def scan_cache_seeds():
    s = {}
    cases = {
        "tfrecord": dict(offsets=(0, 30, 60)),
        "text-count-only": dict(fmt=1, flags=1, offsets=(0, 10, 11, 50), tail=0),
        "gzip": dict(comp=2, asked=0, size=80, image=1000, offsets=(0, 500)),
        "zlib-asked": dict(comp=3, asked=3, size=80, image=4096, offsets=(0, 1, 2)),
        "tfrecord-tail": dict(offsets=(0,), tail=7),
        "empty": dict(offsets=()),
        "tar": dict(fmt=2, size=4096, offsets=(0, 1024), first=(0, 2, 3),
                    parts=((0, 512, 10), (1, 600, 20), (0, 1536, 5)), names=("jpg", "cls")),
        "tar-empty": dict(fmt=2, size=4096, offsets=(), first=(0,), parts=(), names=()),
        "offsets-out-of-order": dict(offsets=(0, 60, 30)),
        "offset-past-image": dict(offsets=(0, 100)),
        "count-huge": dict(offsets=(0,), count=1 << 40),
    }
    for name, kw in cases.items():
        h, body = scan_entry(**kw)
        s[name] = b"\x00" + h + body              # assembled: path and CRCs by the target
    h, body = scan_entry(offsets=(0, 30, 60))
    s["keep-magic-bad"] = b"\x02" + b"XLSCANC\0" + h[8:] + body
    path = b"/dev/shm/sluice-fuzz-XXXXXX/data"
    raw = h[:128] + u32(len(path)) + h[132:]
    raw = raw[:132] + u32(crc32c(raw[:132]))
    whole = path + body
    s["raw-entry"] = b"\x01" + raw + whole + u32(crc32c(whole))
    s["raw-truncated"] = b"\x01" + raw[:100]
    s["own-body-crc"] = b"\x04" + h + body + u32(0xDEADBEEF)
    return s


# ---- checkpoints (train_ckpt.h and train_ps_ckpt.h; mode byte first)

def position(epoch, step, replicas):
    b = b"SLPOS001" + u64(epoch) + u64(step) + u64(step * replicas) + u32(replicas)
    return b + u32(crc32c(b))


def params_of(inputs, hidden, classes):
    dims = [inputs] + list(hidden) + [classes]
    return sum(dims[i] * dims[i + 1] + dims[i + 1] for i in range(len(dims) - 1))


def ckpt(job=b"fmnist", worker=0, workers=1, replicas=1, model=1, mode=0, classes=3, inputs=2, hidden=(),
         lr=0.1, momentum=0.9, seed=7, epoch=0, step=40, version=3, steps_per_epoch=40, transition=None):
    n = params_of(inputs, hidden, classes) if model else 0
    hid = list(hidden) + [0] * (4 - len(hidden))
    # version 2 adds steps_per_epoch, version 3 the transition (old workers,
    # replicas, epoch, step, old steps per epoch, steps before the change)
    hb = {1: 128, 2: 136}.get(version, 176)
    h = b"SLUICECK" + u32(version) + u32(hb) + position(epoch, step, replicas)
    h += u32(worker) + u32(workers) + u32(replicas) + u32(model) + u32(mode)
    h += u32(classes if model else 0) + u32(inputs if model else 0) + u32(len(hidden))
    h += b"".join(u32(x) for x in hid) + f32s([lr, momentum]) + u32(seed) + u32(len(job)) + u64(n)
    if version != 1:
        h += u64(steps_per_epoch)
    if version >= 3:
        fw, fr, fe, fs, ft, base = transition or (0, 0, 0, 0, 0, 0)
        h += u32(fw) + u32(fr) + u64(fe) + u64(fs) + u64(ft) + u64(base)
    assert len(h) == hb
    f = h + pad8(job) + f32s([0.01 * i for i in range(n)]) + f32s([-0.001 * i for i in range(n)])
    return f + u32(crc32c(f))


def ckpt_seeds():
    s = {
        "softmax": ckpt(),
        "mlp-tower": ckpt(model=2, mode=1, inputs=4, hidden=(3, 2), classes=2, replicas=2, step=5, epoch=1,
                          worker=1, workers=2),
        "no-model": ckpt(model=0, inputs=0, classes=0),
        "job-256": ckpt(job=b"j" * 256),
        "hidden-4": ckpt(model=2, inputs=1, hidden=(1, 1, 1, 1), classes=1),
        "version-1": ckpt(version=1),
        "version-2": ckpt(version=2),
        # 2 x 1 -> this 1 x 1 at step 7 of epoch 1 (30 steps), 37 steps before
        # it; the position is 3 steps past the change
        "transition": ckpt(epoch=1, step=3, steps_per_epoch=40, transition=(2, 1, 1, 7, 30, 37)),
        "transition-step-0": ckpt(epoch=1, step=3, transition=(2, 1, 1, 0, 30, 37)),
    }
    good = s["softmax"]
    s["bad-crc"] = good[:-4] + u32(0)
    s["truncated"] = good[:-9]
    s["version-4"] = good[:8] + u32(4) + good[12:]
    s["nparams-wrong"] = good[:120] + u64(8) + good[128:]
    s["job-nul"] = good[:176] + b"fm\0ist\0\0" + good[184:]
    out = {}
    for name, f in s.items():
        out[name] = b"\x00" + f
    out["raw-softmax"] = b"\x01" + good
    out["raw-bad-crc"] = b"\x01" + s["bad-crc"]
    return out


def ps_ckpt(index=0, servers=2, workers=2, version=10, step=7, config=b"inputs=2 classes=3 hidden=- seed=1",
            positions=None, n=5, fmt=2, changes=0, world_epoch=0):
    # format 2 keeps an elastic job's world in what were format 1's 12 zero
    # bytes: the changes (u32) and the epoch the world starts at (u64)
    if positions is None:
        positions = [position(0, 3, 1)] + [bytes(40)] * (workers - 1)
    h = b"SLUICEPS" + u32(fmt) + u32(index) + u32(servers) + u32(workers) + u64(version) + u64(step) + u64(n)
    h += u32(len(config)) + u32(changes) + u64(world_epoch)
    f = h + pad8(config) + b"".join(positions) + f32s([0.5 * i for i in range(n)]) + f32s([0.0] * n)
    return f + u32(crc32c(f))


def ps_ckpt_seeds():
    s = {
        "two-workers": ps_ckpt(),
        "no-config": ps_ckpt(config=b"", n=0, workers=1, positions=[bytes(40)]),
        "all-pushed": ps_ckpt(workers=3, positions=[position(1, 4, 2), position(0, 9, 1), position(2, 0, 4)]),
        "config-512": ps_ckpt(config=b"c" * 512),
        "step-over-version": ps_ckpt(version=3, step=4),
        "format-1": ps_ckpt(fmt=1),
        "world": ps_ckpt(workers=3, changes=1, world_epoch=1,
                         positions=[position(1, 12, 1), bytes(40), position(2, 20, 1)]),
        "world-epoch-no-change": ps_ckpt(world_epoch=3),
        "position-before-world": ps_ckpt(changes=2, world_epoch=1),
    }
    good = s["two-workers"]
    s["nan"] = good[:-8] + struct.pack("<f", float("nan")) + good[-4:]
    s["truncated"] = good[:-13]
    out = {name: b"\x00" + f for name, f in s.items()}
    out["raw-two-workers"] = b"\x01" + good
    out["other-server"] = b"\x02" + good
    return out


# ---- Slurm, TF_CONFIG

def nodelist_seeds():
    return {
        "brackets": b"node[01-04,07],gpu1,rack[1-2]-n[1-2]",
        "plain": b"a,b.example.org,c_1",
        "width": b"node[08-10]",
        "tasks": b"2(x3),1",
        "tasks-one": b"4",
        "reversed": b"x[7-3]",
        "too-many": b"n[0-999999999]",
        "groups-5": b"a[1-2]b[1-2]c[1-2]d[1-2]e[1-2]",
        "unclosed": b"n[1-3",
        "long-name": b"h" * 241,
    }


def slurm_seeds():
    base = [b"SLURM_PROCID=1", b"SLURM_NTASKS=3", b"SLURM_JOB_NODELIST=node[1-3]", b"SLURM_TASKS_PER_NODE=1(x3)"]
    return {
        "block": b"\n".join([b""] + base),
        "layout": b"\n".join([b"feeders=2,feeder-port=6000,ring-port=7100"] + base),
        "step-vars": b"\n".join([b"feeders=1", b"SLURM_PROCID=3", b"SLURM_STEP_NUM_TASKS=4",
                                 b"SLURM_STEP_NODELIST=gpu[01-02]", b"SLURM_STEP_TASKS_PER_NODE=2(x2)",
                                 b"SLURMD_NODENAME=gpu02"]),
        "cyclic": b"\n".join([b"", b"SLURM_PROCID=2", b"SLURM_NTASKS=4", b"SLURM_NODELIST=a,b",
                              b"SLURM_TASKS_PER_NODE=2,2", b"SLURM_DISTRIBUTION=cyclic"]),
        "plane": b"\n".join([b"", b"SLURM_PROCID=0", b"SLURM_NTASKS=2", b"SLURM_NODELIST=a,b",
                             b"SLURM_DISTRIBUTION=plane=2"]),
        "ports-overlap": b"\n".join([b"feeders=2,feeder-port=7000,ring-port=7001"] + base),
        "ports-past": b"\n".join([b"feeder-port=65535,ring-port=65535"] + base),
        "no-worker": b"\n".join([b"feeders=3"] + base),
    }


def tf_config_seeds():
    return {
        "worker": b'{"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"], '
                  b'"feeder": ["tcp://host5:5555", "tcp://host6:5555"]}, "task": {"type": "worker", "index": 1}}',
        "feeder": b'{"cluster":{"feeder":["tcp://h:1","ipc:///tmp/f"],"worker":["w:1"]},"task":{"type":"feeder","index":1}}',
        "ps": b'{"cluster":{"ps":["p0:2000","p1:2000"],"worker":["w0:1","w1:1"],"evaluator":["e:1"]},'
              b'"task":{"type":"ps","index":0}}',
        "evaluator": b'{"cluster":{"worker":["w0:1"]},"task":{"type":"evaluator","index":0}}',
        "curve": b'{"cluster":{"worker":["w0:1"]},"task":{"type":"worker","index":0},'
                 b'"curve":{"key":"/etc/sluice/trainer.key","server_keys":"/etc/sluice/feeders","allow":"/a"}}',
        "curve-unknown": b'{"cluster":{"worker":["w0:1"]},"task":{"type":"worker","index":0},"curve":{"secret":"x"}}',
        "duplicate": b'{"cluster":{"worker":["a:1"],"worker":["b:1"]},"task":{"type":"worker","index":0}}',
        "index-out": b'{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":1}}',
        "no-task": b'{"cluster":{"worker":["a:1"]}}',
        "not-object": b'["cluster"]',
    }


# ---- STATUS / STATS bodies (the target puts the header in front)

def status_seeds():
    status = u32(1) + u32(500) + u64(3) + u64(10) + u64(12345) + u64(1 << 30)
    stats = b"".join(u64(x) for x in (10, 20, 30, 40, 50, 60))
    return {
        "status": b"\x00" + status,
        "status-max": b"\x00" + u32(1) + u32(600000) + u64(1 << 32) + u64(1 << 32) + u64(1 << 60) + u64(1 << 60),
        "status-done-over": b"\x00" + u32(1) + u32(1) + u64(11) + u64(10) + u64(0) + u64(0),
        "status-short": b"\x00" + status[:-1],
        "stats": b"\x01" + stats,
        "stats-max": b"\x01" + u64(1 << 60) * 6,
        "stats-over": b"\x01" + u64((1 << 60) + 1) + stats[8:],
        "stats-long": b"\x01" + stats + b"\0",
    }


# ---- ring, rendezvous and ps messages

def ring_hdr(typ, sender=0, step=0, seq=0, chunk=0, detail=0, nbytes=0, version=1, magic=b"SLR1"):
    return magic + u16(version) + u16(typ) + u32(sender) + u32(step) + u64(seq) + u32(chunk) + u32(detail) + u64(nbytes)


def ring_seeds():
    return {
        "join": ring_hdr(1, sender=3),
        "data": ring_hdr(2, sender=1, step=2, seq=9, chunk=1, nbytes=4096),
        "abort": ring_hdr(3, sender=2, step=1, chunk=0, detail=2),
        "heartbeat": ring_hdr(4, sender=0, seq=1 << 40),
        "type-5": ring_hdr(5),
        "version-2": ring_hdr(2, version=2),
        "magic": ring_hdr(2, magic=b"SLR2"),
    }


def rv(typ, rank=0, size=0, a=b"", b=b"", alen=None, blen=None, version=1):
    alen = len(a) if alen is None else alen
    blen = len(b) if blen is None else blen
    return b"SLV1" + u16(version) + u16(typ) + u32(rank) + u32(size) + u32(alen) + u32(blen) + a + b


def rendezvous_seeds():
    return {
        "hello": rv(1, 1, 2, b"fmnist", b"model=mlp hidden=128"),
        "hello-max": rv(1, 4095, 4096, b"j" * 256, b"c" * 1024),
        "hello-job-257": rv(1, 1, 2, b"j" * 257),
        "status": rv(2, 2, 1),
        "welcome": rv(3, 0, 2, b"\x01" * 128),
        "welcome-4096": rv(3, 0, 2, b"n" * 4096),
        "refuse": rv(4, 1, 2, b"rendezvous: rank 1 is in job 'a', but rank 0 is in job 'b'"),
        "refuse-long-len": rv(4, 1, 1, b"x", alen=5000),
        "short": rv(2)[:23],
        "type-5": rv(5),
    }


def ps_hdr(typ, worker=0, flags=0, version=0, step=0, incarnation=0, session=0, wire=2):
    b = b"SLPS" + bytes([wire, typ, 0, 0]) + u32(worker) + u32(flags) + u64(version) + u64(step)
    return b + u64(incarnation) + u64(session)


def ps_seeds():
    return {
        "pull-config": ps_hdr(1, worker=1, session=77) + b"inputs=784 classes=10 hidden=128 seed=1 lr=0.1",
        "pull-final": ps_hdr(1, flags=1) + b"inputs=2",
        "values": ps_hdr(2, version=5, step=4) + f32s([1, 2, 3]),
        "push-position": ps_hdr(3, worker=2, step=9) + position(0, 9, 1),
        "push-position-r4": ps_hdr(3, worker=0) + position(3, 2, 4),
        "ack-skipped": ps_hdr(4, flags=0x80000000),
        "bye-read-only": ps_hdr(5, flags=2),
        "error-text": ps_hdr(6) + b"server 0: refused PUSH\x01\\\n\xff",
        "resume": ps_hdr(7, worker=1, incarnation=1 << 63, session=5) + position(0, 0, 1),
        "type-8": ps_hdr(8),
        "wire-1": ps_hdr(1, wire=1),
        "inputs-huge": ps_hdr(1) + b"inputs=999999999 classes=2",
    }


def main():
    sets = {
        "npy": npy_seeds(), "idx": idx_seeds(), "scan_cache": scan_cache_seeds(), "ckpt": ckpt_seeds(),
        "ps_ckpt": ps_ckpt_seeds(), "nodelist": nodelist_seeds(), "slurm": slurm_seeds(),
        "tf_config": tf_config_seeds(), "status": status_seeds(), "ring": ring_seeds(),
        "rendezvous": rendezvous_seeds(), "ps": ps_seeds(),
    }
    for target, seeds in sets.items():
        out = os.path.join(HERE, "seeds", target)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        for name, data in sorted(seeds.items()):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
        print("%d seeds in %s" % (len(seeds), os.path.relpath(out)))


if __name__ == "__main__":
    main()
