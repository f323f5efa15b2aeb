# Type stubs of sluice.feeder (feeder.py): Feeder, FeederError, Job.
import os
from collections.abc import Sequence
from typing import Any, Literal

from . import Client

__all__ = ["Feeder", "FeederError", "Job", "find_feeder"]

class FeederError(RuntimeError):
    message: str
    returncode: int | None
    log: str
    def __init__(self, message: str, returncode: int | None = None, log: str = "") -> None: ...

def find_feeder(binary: str | os.PathLike[str] | None = None) -> str: ...

class Job:
    plan: dict[str, Any]
    def __init__(
        self, keys: dict[str, Any] | None = None, /, *, binary: str | os.PathLike[str] | None = None, **more: Any
    ) -> None: ...
    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, binary: str | os.PathLike[str] | None = None) -> Job: ...
    @property
    def name(self) -> str | None: ...
    def to_dict(self) -> dict[str, Any]: ...
    def save(self, path: str | os.PathLike[str]) -> None: ...

class Feeder:
    job: str | None
    job_path: str
    listen: str
    address: str
    metrics_url: str | None
    args: list[str]
    def __init__(
        self,
        job: Job | dict[str, Any] | str | os.PathLike[str],
        *,
        listen: str | None = None,
        feeder_index: int | None = None,
        feeders: int | None = None,
        threads: int | None = None,
        workers: int | None = None,
        replicas: int | None = None,
        metrics_listen: str | None = None,
        serve_runs: bool = False,
        idle_exit: int | None = None,
        heartbeat_ms: int | None = None,
        timeout_ms: int | None = None,
        sets: Sequence[str] = (),
        join: Feeder | str | Sequence[Feeder | str] | None = None,
        advertise: str | None = None,
        extra_args: Sequence[str] = (),
        binary: str | os.PathLike[str] | None = None,
        start_timeout: float = 300.0,
        stop_timeout: float = 10.0,
    ) -> None: ...
    @property
    def log(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def closed(self) -> bool: ...
    def client(
        self,
        *,
        worker: int = 0,
        workers: int = 1,
        replicas: int = 1,
        credits: int | None = None,
        heartbeat_ms: int | None = None,
        timeout_ms: int | None = None,
        connect_timeout_ms: int | None = None,
        reconnect_ms: int | None = None,
        takeover_ms: int | None = None,
        no_shm: bool = False,
        resume_seq: int = 0,
        curve_key: str | None = None,
        curve_server_keys: Sequence[str] | None = None,
        lend: bool = False,
    ) -> Client: ...
    def close(self) -> None: ...
    def __enter__(self) -> Feeder: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...
