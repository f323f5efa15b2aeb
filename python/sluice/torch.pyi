# Type stubs of sluice.torch (torch.py).
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy.typing as npt
import torch
import torch.utils.data

__all__ = ["IterableDataset", "to_torch"]

def to_torch(arrays: Mapping[str, npt.NDArray[Any]], pin_memory: bool = False) -> dict[str, torch.Tensor]: ...

class IterableDataset(torch.utils.data.IterableDataset[Any]):
    feeders: list[str]
    job: str
    options: dict[str, Any]
    replicas: int
    pin_memory: bool
    position: int
    steps_per_epoch: int | None
    epochs: int | None
    epoch: int | None
    def __init__(
        self,
        feeders: str | Sequence[str],
        job: str,
        pin_memory: bool = False,
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
    ) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...
    def close(self) -> None: ...
    @property
    def metrics_url(self) -> str | None: ...
    def __iter__(self) -> Iterator[Any]: ...
