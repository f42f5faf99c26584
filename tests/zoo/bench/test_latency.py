"""Latency over many calls (`zoo.bench.latency`): each call's time, percentiles, and client
threads calling at once."""

from __future__ import annotations

import threading
import time

import pytest

from zoo.bench import latency


@pytest.mark.parametrize("values, share, expected", [
    ([4, 1, 3, 2], 50, 2), ([4, 1, 3, 2], 100, 4), ([4, 1, 3, 2], 1, 1),
    (list(range(1, 101)), 99, 99), (list(range(1, 201)), 99, 198), ([7], 99, 7),
])
def test_percentile_is_the_nearest_rank(values, share, expected):
    assert latency.percentile(values, share) == expected


@pytest.mark.parametrize("values, share", [([], 50), ([1.0], 0), ([1.0], 101)])
def test_percentile_refuses_what_has_none(values, share):
    with pytest.raises(ValueError, match="got"):
        latency.percentile(values, share)


def test_the_summary_is_in_milliseconds():
    seconds = [0.001 * n for n in range(1, 101)]  # 1 to 100 ms
    assert latency.latency_summary(seconds) == {
        "calls": 100, "p50_ms": 50.0, "p99_ms": 99.0, "min_ms": 1.0, "mean_ms": 50.5}


def test_concurrent_clients_call_at_once_until_the_span_ends():
    inside, most, lock = [0], [0], threading.Lock()
    seen = set()

    def request(client):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            seen.add(client)
        time.sleep(0.02)
        with lock:
            inside[0] -= 1
        return client + 1  # items: 1 for client 0, 2 for 1, 3 for 2

    traffic = latency.concurrent_calls(request, threads=3, seconds=0.2)
    assert seen == {0, 1, 2} and most[0] == 3  # three calls in flight at once
    assert all(s >= 0.02 for s in traffic.seconds)
    assert traffic.elapsed >= 0.2 and 3 <= len(traffic.seconds) <= 3 * 0.3 / 0.02
    assert 3 <= traffic.items <= 3 * len(traffic.seconds)
    summary = traffic.summary()
    assert summary["threads"] == 3 and summary["calls"] == len(traffic.seconds)
    assert summary["items_per_s"] == round(traffic.items / traffic.elapsed, 2)


def test_an_error_in_a_client_is_raised_once_all_have_ended():
    def request(client):
        if client == 1:
            raise KeyError("bad request")
        time.sleep(0.01)
        return 1

    with pytest.raises(KeyError, match="bad request"):
        latency.concurrent_calls(request, threads=2, seconds=0.05)


@pytest.mark.parametrize("threads, seconds", [(0, 1.0), (1, 0.0)])
def test_concurrent_calls_refuse_no_clients_or_no_time(threads, seconds):
    with pytest.raises(ValueError, match="got"):
        latency.concurrent_calls(lambda client: 1, threads, seconds)
