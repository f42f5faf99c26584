"""The pieces of multi-process training that one process can check: job settings from flags
and the environment, the refusals, and each process's rows of a global batch. (Two real
processes: tests/zoo/recipes/test_multiprocess_training.py.)"""

import keras
import numpy as np
import pytest

from zoo.training.errors import UserError
from zoo.training.distribution import (JobSettings, ProcessShard, check_job_settings,
                                       is_chief, is_lost_peer, job_settings, process_count)


@pytest.mark.parametrize("flags, environ, expected", [
    ({}, {}, JobSettings()),
    ({"coordinator_address": "10.0.0.1:1234", "num_processes": 2, "process_id": 1},
     {"KERAS_DISTRIBUTION_NUM_PROCESSES": "4"}, JobSettings("10.0.0.1:1234", 2, 1)),
    ({}, {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "10.0.0.1:1234,10.0.0.2:1234",
          "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": "0"},
     JobSettings("10.0.0.1:1234", 2, 0)),
    ({}, {"JAX_COORDINATOR_ADDRESS": "head:5000"}, JobSettings("head:5000", None, None)),
    ({"process_id": 0}, {"KERAS_DISTRIBUTION_PROCESS_ID": "3"}, JobSettings(None, None, 0)),
])
def test_flags_win_over_the_environment(flags, environ, expected):
    assert job_settings(**flags, environ=environ) == expected


@pytest.mark.parametrize("settings, multi", [
    (JobSettings(), False),
    (JobSettings(num_processes=1, coordinator_address="a:1", process_id=0), False),
    (JobSettings("a:1", 2, 0), True),
    (JobSettings(coordinator_address="a:1"), True),  # the rest from the cluster
])
def test_what_counts_as_a_job(settings, multi):
    assert settings.is_multi_process is multi


@pytest.mark.parametrize("name", ["KERAS_DISTRIBUTION_NUM_PROCESSES",
                                  "KERAS_DISTRIBUTION_PROCESS_ID"])
def test_a_non_number_in_the_environment_is_one_line_naming_it(name):
    with pytest.raises(UserError, match=f"^environment variable {name} must be an int; "
                                        "got 'two'$"):
        job_settings(environ={name: "two"})


@pytest.mark.parametrize("settings, backend, message", [
    (JobSettings("a:1", 2, 0), "tensorflow",
     "multi-process training runs on the JAX backend .*keras-team/keras#20585"),
    (JobSettings("a:1", 2, 0), "torch", "got KERAS_BACKEND=torch"),
    (JobSettings("a:1", 2, 2), "jax", r"--process-id must lie in \[0, 1\] .*; got 2$"),
])
def test_settings_that_cannot_run_are_refused_in_one_line(settings, backend, message):
    with pytest.raises(UserError, match=message) as caught:
        check_job_settings(settings, backend)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_one_process_is_fine_on_every_backend(backend):
    check_job_settings(JobSettings(), backend)
    check_job_settings(JobSettings("a:1", 1, 0), backend)


class _Batches(keras.utils.PyDataset):
    """Global batches of (rows numbered from 0, their squares) of the given sizes."""

    def __init__(self, sizes):
        super().__init__()
        self.sizes, self.epochs_ended = sizes, 0

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, position):
        start = sum(self.sizes[:position])
        rows = np.arange(start, start + self.sizes[position])
        return rows[:, None].astype("float32"), rows ** 2

    def on_epoch_end(self):
        self.epochs_ended += 1


@pytest.mark.parametrize("count", [2, 3])
def test_the_processes_rows_put_together_are_the_global_batch(count):
    batches = _Batches([6, 6])
    shards = [ProcessShard(batches, index=k, count=count) for k in range(count)]
    for position in range(len(batches)):
        parts = [shard[position] for shard in shards]
        assert {len(part[0]) for part in parts} == {6 // count}
        x, y = batches[position]
        np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), x)
        np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), y)


def test_an_uneven_batch_is_completed_with_its_own_rows_never_emptied():
    batches = _Batches([4, 3, 1])
    shards = [ProcessShard(batches, index=k, count=2) for k in range(2)]
    # The batch of 3 rows (4, 5, 6) becomes 4, 5 | 6, 4; the batch of 1 row becomes 7 | 7.
    assert [shard[1][1].tolist() for shard in shards] == [[16, 25], [36, 16]]
    assert [shard[2][1].tolist() for shard in shards] == [[49], [49]]


def test_the_shard_passes_the_end_of_an_epoch_on():
    batches = _Batches([2])
    ProcessShard(batches, index=0, count=2).on_epoch_end()
    assert batches.epochs_ended == 1


def test_one_process_is_the_chief_and_loses_no_peer():
    assert process_count() == 1 and is_chief()
    assert not is_lost_peer(ValueError("UNKNOWN: Gloo all-reduce failed: Connection closed"))
