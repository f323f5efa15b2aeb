"""sluice's wire protocol (docs/protocol.md, version 4) written byte by byte
in Python, for the hostile tests and the fuzz seeds: every header frame a
peer may send, valid or not. Nothing here checks a rule: a hostile peer
writes whatever it likes, so every field takes any value that fits its
size, and `raw_*` helpers write fields the encoder in C would refuse.

    hello(worker=0, workers=2, job="j")     the 62 + N bytes of a HELLO
    credit(5), heartbeat(), bye()           trainer -> feeder messages
    welcome(...), piece(...), ...           feeder -> trainer messages
"""
import struct

MAGIC = b"SLC1"
VERSION = 4
HELLO, WELCOME, REFUSE, CREDIT, PIECE, END, ERROR, HEARTBEAT, BYE, STATUS = range(1, 11)
NAMES = {HELLO: "hello", WELCOME: "welcome", REFUSE: "refuse", CREDIT: "credit", PIECE: "piece", END: "end",
         ERROR: "error", HEARTBEAT: "heartbeat", BYE: "bye", STATUS: "status"}
INT64, FLOAT32, BYTES, UINT8 = 0, 1, 2, 3


def header(mtype, version=VERSION):
    return MAGIC + struct.pack("<HH", version & 0xFFFF, mtype & 0xFFFF)


def hello(worker=0, workers=1, replicas=1, credits=4, flags=0, heartbeat_ms=0, resume_epoch=0, resume_seq=0,
          incarnation=0, share=0, job="job", job_len=None, version=VERSION):
    """A HELLO; job_len, when given, is written instead of the name's length."""
    name = job.encode() if isinstance(job, str) else job
    n = len(name) if job_len is None else job_len
    return (header(HELLO, version) +
            struct.pack("<IIIIIIQQQIH", worker, workers, replicas, credits, flags, heartbeat_ms, resume_epoch,
                        resume_seq, incarnation, share, n & 0xFFFF) + name)


def credit(credits=1, flags=0, version=VERSION):
    return header(CREDIT, version) + struct.pack("<II", credits, flags)


def heartbeat(sent_ns=0, version=VERSION):
    return header(HEARTBEAT, version) + struct.pack("<Q", sent_ns)


def bye(version=VERSION):
    return header(BYE, version)


def refuse(reason=b"no", reason_len=None, version=VERSION):
    n = len(reason) if reason_len is None else reason_len
    return header(REFUSE, version) + struct.pack("<H", n & 0xFFFF) + reason


def error(code=-1, msg=b"a.tfrecord: corrupted record at 12", msg_len=None, version=VERSION):
    n = len(msg) if msg_len is None else msg_len
    return header(ERROR, version) + struct.pack("<iH", code, n & 0xFFFF) + msg


def end(worker=0, pieces=19, epochs=1, version=VERSION):
    return header(END, version) + struct.pack("<IQQ", worker, pieces, epochs)


def status(state=1, retry_ms=250, files_done=3, files=10, records=0x123456, bytes_=0x89ABCDEF01, version=VERSION):
    return header(STATUS, version) + struct.pack("<IIQQQQ", state, retry_ms, files_done, files, records, bytes_)


def field(name, dtype, ragged, dims):
    """A WELCOME tensor entry; len(dims) is the rank."""
    name = name.encode() if isinstance(name, str) else name
    return struct.pack("<H", len(name)) + name + struct.pack("<BBB", dtype, ragged, len(dims) & 0xFF) + \
        b"".join(struct.pack("<q", d) for d in dims)


def welcome(feeder=0, feeders=1, steps_per_epoch=19, epochs=2, batch=8, heartbeat_ms=1000, fields=(),
            ntensors=None, shm=(0, 0, 0, 0), version=VERSION):
    n = len(fields) if ntensors is None else ntensors
    return (header(WELCOME, version) + struct.pack("<IIQQIIH", feeder, feeders, steps_per_epoch, epochs, batch,
                                                   heartbeat_ms, n & 0xFFFF) +
            b"".join(fields) + struct.pack("<IIQQ", *shm))


def tensor(dtype, dims, nbytes, offset):
    """A PIECE tensor descriptor; len(dims) is the rank."""
    return struct.pack("<BB", dtype, len(dims) & 0xFF) + b"".join(struct.pack("<q", d) for d in dims) + \
        struct.pack("<QQ", nbytes, offset)


def piece(epoch=0, step=0, worker=0, replica=0, seq=0, rows=0, flags=0, tensors=(), ntensors=None,
          shm_offset=0, shm_bytes=0, version=VERSION):
    n = len(tensors) if ntensors is None else ntensors
    return (header(PIECE, version) + struct.pack("<QQIIQIIH", epoch, step, worker, replica, seq, rows, flags,
                                                 n & 0xFFFF) +
            b"".join(tensors) + struct.pack("<QQ", shm_offset, shm_bytes))


# the examples pinned in tests/unit/test_sl_wire.c and docs/protocol.md
PINNED_HELLO = hello(worker=1, workers=4, replicas=2, credits=8, flags=0x80, heartbeat_ms=500, resume_epoch=3,
                     resume_seq=0x0102030405060708, incarnation=0x1112131415161718, share=2, job="mnist")
PINNED_PIECE = piece(epoch=2, step=7, worker=1, replica=0, seq=29, rows=4, flags=1,
                     tensors=(tensor(FLOAT32, [4, 3], 48, 0), tensor(INT64, [4], 32, 64)))
PINNED_STATUS = status()
