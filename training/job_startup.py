"""Joining a multi-process job in bounded time, and agreeing on its settings before training.

`jax.distributed.initialize` waits for every process for as long as it is told, then aborts
in C++ (a coordinator that never comes up, a dead peer, two processes with id 0); a port out
of range or in use is a native abort too, and processes started with different settings
(batch size, epochs, architecture) hang in gloo or train apart. So a process, before JAX
runs:

- checks the coordinator's address (`HOST:PORT`, the port in 1..65535) and, as process 0,
  that the port is free (`check_address`);
- joins under a watchdog (`within`): if the job is not whole after `--startup-timeout`
  seconds, it ends in one line naming what it waited for, status 1;

and once joined, `agree_on_settings`: process 0 publishes the job's settings through JAX's
own coordination service (its key-value store, no sockets of ours), every other process
compares them with its own and publishes its verdict, and a mismatch ends every process in
one line naming the setting and both values, before any model is built.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Mapping
from typing import Any, Iterator

from zoo.training.errors import UserError

_SETTINGS_KEY = "zoo/job-settings"
_VERDICT_KEY = "zoo/job-settings-verdict/"


def check_address(address: str, is_coordinator: bool) -> tuple[str, int]:
    """`(host, port)` of `--coordinator-address`; process 0 also checks the port is free.

    Raises:
        zoo.UserError: no port, a port that is no number or out of range, or (process 0)
            a port another program holds.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(f"--coordinator-address must be HOST:PORT with a port from 1 to "
                        f"65535; got {address!r}")
    if is_coordinator:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            try:
                probe.bind((host.strip("[]"), int(port)))
            except OSError as error:
                raise UserError(f"--coordinator-address {address}: process 0 cannot listen "
                                f"there ({error.strerror or error}); is another job or "
                                "process 0 running? choose another port") from None
    return host, int(port)


def end_job(message: str, status: int = 1) -> None:
    """Ends this process of a job at once, in one line: a normal exit would wait in JAX's
    shutdown barrier for processes that are not coming, then abort natively."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    print(f"zoo: error: {message}", file=sys.stderr, flush=True)
    os._exit(status)


@contextlib.contextmanager
def within(seconds: float, what: str) -> Iterator[None]:
    """Ends the process in one line (`end_job`) if the block has not finished after
    `seconds`; `what` says what it was waiting for."""
    done = threading.Event()

    def watch() -> None:
        if not done.wait(seconds):
            end_job(f"{what} within {seconds:g} s (--startup-timeout); start every process "
                    "of the job with the same --coordinator-address and --num-processes, "
                    "each with its own --process-id")

    threading.Thread(target=watch, daemon=True, name="zoo-startup-watchdog").start()
    try:
        yield
    finally:
        done.set()


def _client() -> Any:
    from jax._src import distributed

    return distributed.global_state.client


def first_difference(ours: Mapping[str, Any], theirs: Mapping[str, Any],
                     process_id: int) -> str | None:
    """The first way process `process_id`'s settings (`ours`) differ from process 0's
    (`theirs`): a setting only one of them has (another command: `zoo train vit` beside
    `zoo train translator`), else the first value that differs, as `--name differs ...:
    process 0 has A, process N has B`; None when they agree."""
    alone = sorted(set(ours) ^ set(theirs))
    if alone:
        holder = process_id if alone[0] in ours else 0
        return (f"the processes of the job run different commands: only process {holder} "
                f"has --{alone[0].replace('_', '-')}; start every process with the same "
                "command and settings")
    for key in sorted(ours):
        if ours[key] != theirs[key]:
            return (f"--{key.replace('_', '-')} differs between the processes of the job: "
                    f"process 0 has {theirs[key]!r}, process {process_id} has "
                    f"{ours[key]!r}; start every process with the same settings")
    return None


def agree_on_settings(settings: Mapping[str, Any], process_id: int, num_processes: int,
                      timeout_seconds: float) -> None:
    """Process 0 publishes `settings`; every other process compares its own and reports;
    a mismatch ends every process in one line naming the setting and both values.

    `settings` must be JSON-serialisable; the per-process ones (the process id, the
    output's `--force`) are left out by the caller.
    """
    client = _client()
    timeout_ms = int(timeout_seconds * 1000)
    mine = json.loads(json.dumps(dict(settings), sort_keys=True, default=str))
    if process_id == 0:
        client.key_value_set(_SETTINGS_KEY, json.dumps(mine))
        for other in range(1, num_processes):
            verdict = client.blocking_key_value_get(f"{_VERDICT_KEY}{other}", timeout_ms)
            if verdict != "ok":
                end_job(verdict, status=2)
        return
    theirs = json.loads(client.blocking_key_value_get(_SETTINGS_KEY, timeout_ms))
    difference = first_difference(mine, theirs, process_id)
    client.key_value_set(f"{_VERDICT_KEY}{process_id}", difference or "ok")
    if difference:
        end_job(difference, status=2)
