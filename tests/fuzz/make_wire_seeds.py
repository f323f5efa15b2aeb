#!/usr/bin/env python3
"""Write the seed corpus of fuzz_wire (tests/fuzz/seeds/wire/): one file per
header frame, the same inputs the hostile tests send a live feeder
(tests/integration/test_hostile_live.py). Each message type's valid
encoding (the unit test's pinned examples among them), each one cut short,
other protocol versions, declared lengths and counts far past the frame or
the limits, HELLO's share at 4095 / 4096 / 2^32 - 1, its incarnation at 0,
1 and 2^64 - 1, and the other limits one past their edge.

scripts/fuzz.sh copies these into build-fuzz/corpus/fuzz_wire before each
run. Run this again after a change to the wire format and commit the
output:

    python3 tests/fuzz/make_wire_seeds.py            # rewrites tests/fuzz/seeds/wire/
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import wire  # noqa: E402
from wire import BYTES, FLOAT32, INT64, UINT8  # noqa: E402

U32, U64 = (1 << 32) - 1, (1 << 64) - 1


def seeds():
    s = {}
    fields = [wire.field("image", UINT8, 0, [16]), wire.field("label", INT64, 0, []),
              wire.field("id", INT64, 0, []), wire.field("text", BYTES, 1, [2]),
              wire.field("text.offsets", INT64, 1, [])]
    valid = {
        "hello-pinned": wire.PINNED_HELLO,
        "hello-min": wire.hello(job="j"),
        "hello-job256": wire.hello(job="j" * 256),
        "hello-status-shm": wire.hello(worker=3, workers=4, replicas=2, credits=16, flags=3, heartbeat_ms=1000,
                                       resume_seq=1 << 48, job="fmnist"),
        "hello-max": wire.hello(worker=65535, workers=65536, replicas=1024, credits=1 << 20, flags=U32,
                                heartbeat_ms=U32, resume_epoch=U64, resume_seq=U64, incarnation=U64, share=4095,
                                job="x" * 256),
        "welcome-fields": wire.welcome(fields=fields),
        "welcome-empty": wire.welcome(feeder=4095, feeders=4096, steps_per_epoch=0, epochs=0, batch=1 << 24),
        "welcome-shm": wire.welcome(fields=fields[:3], shm=(1234, 7, 1 << 20, 0xDEADBEEF)),
        "welcome-rank8": wire.welcome(fields=[wire.field("t", FLOAT32, 0, [2] * 8)]),
        "refuse": wire.refuse(b"worker 0 is already connected (another trainer process, heard from 0.1 s ago)"),
        "refuse-empty": wire.refuse(b""),
        "refuse-1024": wire.refuse(b"r" * 1024),
        "credit": wire.credit(1),
        "credit-max-shm": wire.credit(1 << 20, 1),
        "credit-zero": wire.credit(0, U32),
        "piece-pinned": wire.PINNED_PIECE,
        "piece-empty": wire.piece(),
        "piece-shm": wire.piece(rows=4, flags=3, tensors=(wire.tensor(FLOAT32, [4, 3], 48, 0),),
                                shm_offset=4096, shm_bytes=48),
        "piece-bytes": wire.piece(rows=2, tensors=(wire.tensor(BYTES, [2], 11, 0),
                                                   wire.tensor(INT64, [3], 24, 64))),
        "end": wire.end(),
        "error": wire.error(),
        "error-4096": wire.error(code=-8, msg=b"e" * 4096),
        "heartbeat": wire.heartbeat(123456789),
        "bye": wire.bye(),
        "status-pinned": wire.PINNED_STATUS,
    }
    s.update(valid)
    # cut short: at the magic, the version, the type, the first field, the middle, one byte before the end
    for name, m in valid.items():
        for cut in sorted({0, 3, 5, 7, 8, 9, len(m) // 2, len(m) - 1}):
            if cut < len(m):
                s["cut-%s-%d" % (name, cut)] = m[:cut]
    # other protocol versions: a HELLO the feeder refuses in words, other types malformed
    for v in (0, 1, 2, 3, 5, 65535):
        s["version%d-hello" % v] = wire.hello(job="j", version=v)
        s["version%d-credit" % v] = wire.credit(1, version=v)
    s["magic-bad"] = b"SLC2" + wire.PINNED_HELLO[4:]
    s["magic-zero"] = bytes(len(wire.PINNED_HELLO))
    for t in (0, 11, 255, 65535):
        s["type%d" % t] = wire.header(t) + bytes(8)
    # declared lengths and counts far past the frame or the limits
    s["hello-joblen-65535"] = wire.hello(job="j", job_len=65535)
    s["hello-joblen-257"] = wire.hello(job="j" * 257)
    s["hello-joblen-0"] = wire.hello(job="")
    s["hello-joblen-short"] = wire.hello(job="abc", job_len=2)
    s["refuse-len-65535"] = wire.refuse(b"r", reason_len=65535)
    s["refuse-1025"] = wire.refuse(b"r" * 1025)
    s["error-len-65535"] = wire.error(msg=b"e", msg_len=65535)
    s["error-4097"] = wire.error(msg=b"e" * 4097)
    s["error-code-1"] = wire.error(code=1)
    s["welcome-ntensors-65535"] = wire.welcome(fields=fields[:1], ntensors=65535)
    s["welcome-ntensors-65"] = wire.welcome(fields=[wire.field("t%d" % i, INT64, 0, []) for i in range(65)])
    s["welcome-rank9"] = wire.welcome(fields=[wire.field("t", FLOAT32, 0, [2] * 9)])
    s["welcome-dims-huge"] = wire.welcome(fields=[wire.field("t", FLOAT32, 0, [1 << 31, 1 << 31])])
    s["welcome-dim-negative"] = wire.welcome(fields=[wire.field("t", FLOAT32, 0, [-1])])
    s["welcome-name-161"] = wire.welcome(fields=[wire.field("n" * 161, INT64, 0, [])])
    s["welcome-shm-huge"] = wire.welcome(shm=(1, 2, 1 << 63, 3))
    s["welcome-feeders-4097"] = wire.welcome(feeder=0, feeders=4097)
    s["welcome-batch-0"] = wire.welcome(batch=0)
    s["piece-ntensors-65535"] = wire.piece(tensors=(wire.tensor(FLOAT32, [4, 3], 48, 0),), ntensors=65535)
    s["piece-bytes-2p63"] = wire.piece(rows=1, tensors=(wire.tensor(BYTES, [1], 1 << 63, 0),))
    s["piece-offset-2p63"] = wire.piece(rows=1, tensors=(wire.tensor(UINT8, [1], 1, 1 << 63),))
    s["piece-dims-2p62"] = wire.piece(rows=4, tensors=(wire.tensor(FLOAT32, [4, 1 << 62], 0, 0),))
    s["piece-rank10"] = wire.piece(rows=1, tensors=(wire.tensor(UINT8, [1] * 10, 1, 0),))
    s["piece-rows-2p24plus1"] = wire.piece(rows=(1 << 24) + 1)
    s["piece-shm-bytes-2p40"] = wire.piece(rows=1, flags=2, tensors=(wire.tensor(UINT8, [1], 1, 0),),
                                           shm_offset=4096, shm_bytes=1 << 40)
    s["status-files-max"] = wire.status(files=U64, files_done=U64)
    s["status-state-2"] = wire.status(state=2)
    s["status-retry-0"] = wire.status(retry_ms=0)
    # HELLO's limits, one past their edge, and version 4's fields
    s["hello-share-4095"] = wire.hello(share=4095)
    s["hello-share-4096"] = wire.hello(share=4096)
    s["hello-share-u32max"] = wire.hello(share=U32)
    s["hello-incarnation-0"] = wire.hello(incarnation=0)
    s["hello-incarnation-1"] = wire.hello(incarnation=1)
    s["hello-incarnation-u64max"] = wire.hello(incarnation=U64)
    s["hello-worker-eq-workers"] = wire.hello(worker=2, workers=2)
    s["hello-workers-0"] = wire.hello(worker=0, workers=0)
    s["hello-workers-65537"] = wire.hello(worker=0, workers=65537)
    s["hello-replicas-0"] = wire.hello(replicas=0)
    s["hello-replicas-1025"] = wire.hello(replicas=1025)
    s["hello-credits-2p20plus1"] = wire.hello(credits=(1 << 20) + 1)
    s["credit-2p20plus1"] = wire.credit((1 << 20) + 1)
    s["credit-trailing"] = wire.credit(1) + b"\0"
    s["bye-trailing"] = wire.bye() + b"\0"
    s["heartbeat-trailing"] = wire.heartbeat() + b"\0\0\0"
    return s


def main():
    out = os.path.join(HERE, "seeds", "wire")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name, data in sorted(seeds().items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(os.listdir(out)), os.path.relpath(out)))


if __name__ == "__main__":
    main()
