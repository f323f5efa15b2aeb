# Type stubs of the sluice package (__init__.py); docs/python.md has the API.
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import numpy
import numpy.typing as npt

from ._sluice import Client as _CClient
from ._sluice import Error as Error
from ._sluice import Step as Step
from ._sluice import bfloat16 as bfloat16
from ._sluice import version as version

__all__ = ["Client", "Error", "Step", "bfloat16", "bfloat16_to_float32", "is_bfloat16", "plan", "set_log_level",
           "version"]
__version__: Final[str]

def set_log_level(level: Literal["debug", "info", "warning", "error"] | None, fd: int = 2) -> None: ...

class Client(_CClient):
    def __init__(
        self,
        feeders: str | Sequence[str],
        job: str,
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
        metrics_listen: str | None = None,
        resume_epoch: int = 0,
        reshape: bool = False,
        transition: tuple[int, int, int, int] | None = None,
    ) -> None: ...
    @classmethod
    def from_tf_config(
        cls,
        job: str,
        tf_config: str | dict[str, Any] | None = None,
        *,
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
        metrics_listen: str | None = None,
    ) -> Client: ...
    def __enter__(self) -> Client: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...
    def __length_hint__(self) -> int: ...

def is_bfloat16(a: object) -> bool: ...
def bfloat16_to_float32(a: npt.ArrayLike) -> npt.NDArray[numpy.float32]: ...
def plan(
    job: str | os.PathLike[str],
    workers: int = 1,
    replicas: int = 1,
    files: str | None = None,
    sets: Sequence[str] = (),
    feeder: str | None = None,
) -> dict[str, Any]: ...
from .feeder import Feeder as Feeder, FeederError as FeederError, Job as Job
