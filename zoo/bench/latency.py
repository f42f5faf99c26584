"""Latency over many calls, from one client or from several at once: a nearest-rank
percentile (`percentile`), the figures a result reports (`latency_summary`: p50, p99, min
and mean in milliseconds) and `concurrent_calls`, client threads calling one function at once
for a span (what a served model's session sees from concurrent clients), every call's latency
kept.

Why not `seconds_per_call` alone: a mean hides the tail that a served request's client
waits for; p99 needs each call's time, and concurrent clients need one clock shared by
threads. The clock is the harness's (`zoo.bench.steps.Stopwatch`), so the scripts in
benchmarks/ read none of their own.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Callable, Sequence

from zoo.bench.steps import Stopwatch


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `share` percent of the
    values at or below it (p50 of [1, 2, 3, 4] is 2; p99 of 100 values is the 99th smallest).

    Args:
        values: the figures (any order).
        share: the percent, above 0 and at most 100.
    """
    if not values:
        raise ValueError("percentile of no values; got an empty sequence")
    if not 0 < share <= 100:
        raise ValueError(f"share must be above 0 and at most 100; got {share!r}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(share / 100 * len(ordered))) - 1]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """`{"calls", "p50_ms", "p99_ms", "min_ms", "mean_ms"}` of calls' wall seconds, the times
    in milliseconds rounded to two decimals."""
    milliseconds = [1000 * s for s in seconds]
    return {"calls": len(milliseconds),
            "p50_ms": round(percentile(milliseconds, 50), 2),
            "p99_ms": round(percentile(milliseconds, 99), 2),
            "min_ms": round(min(milliseconds), 2),
            "mean_ms": round(sum(milliseconds) / len(milliseconds), 2)}


@dataclasses.dataclass
class Traffic:
    """What `concurrent_calls` saw.

    Attributes:
        seconds: each call's wall seconds, in the order the calls ended.
        items: the items the calls served (the sum of what `request` returned).
        elapsed: the wall seconds from the first client's start to the last one's end (a
            call in flight at the deadline finishes).
        threads: how many clients called.
    """

    seconds: list[float]
    items: int
    elapsed: float
    threads: int

    def items_per_second(self) -> float:
        """Items served a second of wall time, all clients together."""
        return self.items / self.elapsed

    def summary(self) -> dict[str, float]:
        """`latency_summary` of the calls, with `threads`, `items` and `items_per_s`."""
        return {"threads": self.threads, "items": self.items,
                "items_per_s": round(self.items_per_second(), 2),
                **latency_summary(self.seconds)}


def concurrent_calls(request: Callable[[int], int], threads: int, seconds: float) -> Traffic:
    """`threads` client threads, each calling `request(client)` (its number, 0 to
    `threads - 1`) over and over until `seconds` have passed since they started; each
    call's latency is kept. An error in any call stops that client and is raised here once
    all have ended.

    Args:
        request: sends one request and returns how many items it held; it must be safe to
            call from several threads (a TF1 session's `run` is).
        threads: how many clients, at least 1.
        seconds: how long the clients keep sending (above 0).

    Example:
        rngs = [np.random.default_rng(seed) for seed in range(8)]
        traffic = concurrent_calls(lambda client: send(rngs[client]), threads=8, seconds=4)
        traffic.summary()["p99_ms"]
    """
    if threads < 1:
        raise ValueError(f"threads must be at least 1; got {threads!r}")
    if not seconds > 0:
        raise ValueError(f"seconds must be above 0; got {seconds!r}")
    latencies: list[float] = []
    counted, errors = [0], []
    lock = threading.Lock()
    span = Stopwatch().start()

    def client(number: int) -> None:
        try:
            while span.elapsed() < seconds:
                with Stopwatch() as watch:
                    items = request(number)
                with lock:
                    latencies.append(watch.seconds)
                    counted[0] += int(items)
        except BaseException as error:  # noqa: BLE001 (raised again below, in the caller)
            with lock:
                errors.append(error)

    clients = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    elapsed = span.stop()
    if errors:
        raise errors[0]
    return Traffic(latencies, counted[0], elapsed, threads)
