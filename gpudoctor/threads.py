"""Daemon threads for the probes, without concurrent.futures.

Two reasons, both measured on preflight()'s first call on the H200 (bench/preflight_timeline.py):
importing concurrent.futures pulls in logging, about 3 ms of CPU; and a pool started from a
helper thread starts its workers one after another behind the GIL while the main thread
imports, which held the probes back by ~30 ms. These helpers start every thread directly from
the calling thread."""

from __future__ import annotations

import threading

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~1.5 ms
if TYPE_CHECKING:
    from typing import Callable, Iterable, TypeVar

    T = TypeVar("T")
    R = TypeVar("R")


def start_daemon(target: "Callable[..., object]", *args: object, name: str) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True, name=name)
    thread.start()
    return thread


def map_in_threads(function: "Callable[[T], R]", items: "Iterable[T]", *, max_workers: int, name: str) -> "list[R]":
    """``[function(item) for item in items]`` on up to ``max_workers`` threads, in order. The
    first exception raised by a call is re-raised here after every thread has finished."""
    items = list(items)
    results: list = [None] * len(items)
    errors: list[BaseException] = []
    lock = threading.Lock()
    pending = iter(range(len(items)))

    def work() -> None:
        while True:
            with lock:
                index = next(pending, None)
            if index is None:
                return
            try:
                results[index] = function(items[index])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                errors.append(exc)

    workers = [start_daemon(work, name=f"{name}_{n}") for n in range(max(1, min(max_workers, len(items))))]
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    return results
