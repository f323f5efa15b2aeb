"""A typed program over the whole public API of sluice, checked by
`mypy --strict` against the package's stubs (ctest python_types); never
run. Each call is as docs/python.md writes it; a wrong type here (or a
stub that lost a name or a keyword) fails the check."""
from __future__ import annotations

import operator
from typing import Any

import numpy
import numpy.typing as npt
import torch
import torch.utils.data

import sluice
import sluice.torch


def read(feeders: list[str], job: str) -> list[tuple[int, int, int, bool, list[int]]]:
    out: list[tuple[int, int, int, bool, list[int]]] = []
    with sluice.Client(feeders, job, worker=0, workers=2, replicas=1, credits=8, heartbeat_ms=200, timeout_ms=3000,
                       connect_timeout_ms=1000, reconnect_ms=500, takeover_ms=2000, no_shm=False, resume_seq=0,
                       curve_key=None, curve_server_keys=None, lend=True, metrics_listen="127.0.0.1:0") as client:
        url: str | None = client.metrics_url
        print(url)
        for step in client:
            arrays: dict[str, npt.NDArray[Any]] = step.replicas[0]
            image: npt.NDArray[Any] = arrays["image"]
            rows: list[int] = step.rows
            out.append((step.step, step.epoch, step.seq, step.last_step, rows))
            if sluice.is_bfloat16(image):
                wide: npt.NDArray[numpy.float32] = sluice.bfloat16_to_float32(image)
                print(wide.sum())
            if step.last_step:
                position: int = client.position
                print(position, client.steps_per_epoch, client.epochs, client.replicas_per_step)
        client.keepalive(100)
        state: dict[str, Any] = client.state_dict()
        client.load_state_dict(state)
        left: int = operator.length_hint(client)
        print(left)
        closed: bool = client.closed
        client.close()
        print(repr(client), closed)
    return out


def one(feeder: str) -> sluice.Step:
    c = sluice.Client(feeder, "j")
    step = next(c)
    c.close()
    return step


def tf(job: str) -> sluice.Client:
    a = sluice.Client.from_tf_config(job, {"cluster": {"feeder": ["h:1"], "worker": ["w:1"]},
                                           "task": {"type": "worker", "index": 0}}, replicas=2, lend=False)
    a.close()
    return sluice.Client.from_tf_config(job, None, timeout_ms=1000)


def errors(feeders: list[str]) -> str:
    try:
        sluice.Client(feeders, "j")
    except sluice.Error as e:
        code: int = e.code
        return "%s %d %s" % (e, code, e.code_name)
    return ""


def misc() -> None:
    sluice.set_log_level("debug")
    sluice.set_log_level(None, fd=2)
    version: str = sluice.version + sluice.__version__
    dt: numpy.dtype[Any] = sluice.bfloat16
    plan: dict[str, Any] = sluice.plan("job.json", workers=2, replicas=1, files="*.tfrecord", sets=["epochs=1"])
    print(version, dt, plan["workers"])


def train(feeders: list[str], job: str) -> int:
    ds = sluice.torch.IterableDataset(feeders, job, pin_memory=False, worker=0, workers=1, replicas=1, lend=True,
                                      metrics_listen=None)
    print(ds.metrics_url)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)
    n = 0
    for batch in loader:
        t: torch.Tensor = batch["image"]
        n += int(t.shape[0])
    print(ds.position, ds.steps_per_epoch, ds.epochs, ds.epoch, len(ds), len(loader))
    saved: dict[str, Any] = ds.state_dict()
    ds.load_state_dict(saved)
    tensors: dict[str, torch.Tensor] = sluice.torch.to_torch({"x": numpy.zeros(3)}, pin_memory=False)
    print(tensors)
    ds.close()
    return n


def feed(files: list[str]) -> list[int]:
    job = sluice.Job(name="j", files=files, features={"id": {"dtype": "int64"}}, global_batch_size=8)
    same: sluice.Job = sluice.Job(job.to_dict(), binary=None)
    job.save("job.json")
    loaded = sluice.Job.from_file("job.json", binary=None)
    name: str | None = loaded.name
    steps: int = job.plan["workers"][0]["steps"]
    ids: list[int] = []
    try:
        with sluice.Feeder(job, listen=None, feeder_index=0, feeders=1, threads=2, workers=1, replicas=1,
                           metrics_listen="127.0.0.1:0", serve_runs=True, idle_exit=600, heartbeat_ms=200,
                           timeout_ms=3000, sets=["epochs=2"], extra_args=["--report-s", "0"], binary=None,
                           start_timeout=60.0, stop_timeout=5.0) as feeder:
            address: str = feeder.address
            url: str | None = feeder.metrics_url
            log: str = feeder.log
            rc: int | None = feeder.returncode
            pid: int | None = feeder.pid
            print(address, url, log, rc, pid, feeder.closed, repr(feeder), same, name, steps)
            with feeder.client(worker=0, workers=1, replicas=1, heartbeat_ms=200) as client:
                for step in client:
                    ids += step.replicas[0]["id"].tolist()
            with sluice.Client(feeder.address, "j") as other:
                ids += [s.step for s in other]
        sluice.Feeder("job.json").close()
    except sluice.FeederError as e:
        code: int | None = e.returncode
        print(e.message, e.log, code)
    return ids
