# Type stubs of the C extension (_sluice.c); the public names are
# re-exported by sluice (__init__.pyi). Checked by mypy --strict and
# mypy.stubtest against the built module (ctest python_types).
from collections.abc import Sequence
from typing import Any, Final, final

import numpy
import numpy.typing as npt
from _typeshed import structseq
from typing_extensions import Self

version: Final[str]
bfloat16: Final[numpy.dtype[numpy.uint16]]
LOG_DEBUG: Final[int]
LOG_INFO: Final[int]
LOG_WARNING: Final[int]
LOG_ERROR: Final[int]

class Error(Exception):
    code: int
    code_name: str

@final
class Step(structseq[Any], tuple[int, int, int, bool, list[dict[str, npt.NDArray[Any]]], list[int]]):
    __match_args__: Final = ("step", "epoch", "seq", "last_step", "replicas", "rows")
    @property
    def step(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def last_step(self) -> bool: ...
    @property
    def replicas(self) -> list[dict[str, npt.NDArray[Any]]]: ...
    @property
    def rows(self) -> list[int]: ...

class Client:
    def __init__(
        self,
        feeders: Sequence[str],
        job: str,
        *,
        worker: int | None = 0,
        workers: int | None = 1,
        replicas: int | None = 1,
        credits: int | None = None,
        heartbeat_ms: int | None = None,
        timeout_ms: int | None = None,
        connect_timeout_ms: int | None = None,
        reconnect_ms: int | None = None,
        takeover_ms: int | None = None,
        no_shm: bool = False,
        resume_seq: int | None = None,
        curve_key: str | None = None,
        curve_server_keys: Sequence[str] | None = None,
        lend: bool = False,
        metrics_listen: str | None = None,
        resume_epoch: int | None = 0,
        reshape: bool = False,
        transition: tuple[int, int, int, int] | list[int] | None = None,
    ) -> None: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> Step: ...
    def close(self) -> None: ...
    def keepalive(self, ms: int, /) -> None: ...
    @property
    def position(self) -> int: ...
    @property
    def steps_per_epoch(self) -> int: ...
    @property
    def epochs(self) -> int: ...
    @property
    def replicas_per_step(self) -> int: ...
    @property
    def feeders(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def metrics_url(self) -> str | None: ...

def tf_config(text: str | None, /) -> tuple[list[str], int, int]: ...
def log_setup(prog: str, fd: int, level: int, /) -> None: ...
def code_name(code: int, /) -> str: ...
