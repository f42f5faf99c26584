"""TFDS without a network: a dataset that is not in TFDS's data folder is refused in one line
within seconds (this machine has no network; TFDS itself retried for minutes), at once where
offline mode is on, and a wrong split or kind is said before any download is tried."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("tensorflow_datasets")

from zoo.training.errors import UserError  # noqa: E402
from zoo.training import tfds_data  # noqa: E402
from zoo.training.tfds_data import (TfdsSpec, offline_variable, require_data,  # noqa: E402
                                    tfds_builder)


class _Info:
    def __init__(self, splits):
        self.splits = splits


class _Builder:
    """A builder as `require_data` sees it: its known splits, whether it is prepared."""

    def __init__(self, splits=None, prepared=False):
        self.info = _Info(splits or {})
        self.prepared = prepared
        self.data_dir = "/data/mnist/3.0.1"

    def is_prepared(self):
        return self.prepared


UNREACHABLE = ("192.0.2.1", 9)  # TEST-NET-1: never answers


CASES = [
    # (builder, spec split, environment, the words of the one line or None)
    (_Builder(prepared=True), "train", {}, None),
    (_Builder({"train": 1, "test": 1}, prepared=True), "validation", {},
     "no split 'validation'; it has test, train"),
    (_Builder({"train": 1, "test": 1}, prepared=True), "train[:10%]+test", {}, None),
    (_Builder(), "train", {"ZOO_OFFLINE": "1"}, "ZOO_OFFLINE forbids downloading it"),
    (_Builder(), "train", {"HF_DATASETS_OFFLINE": "true"}, "HF_DATASETS_OFFLINE forbids"),
    (_Builder(), "train", {}, "cannot be downloaded: the network does not answer"),
    # A split TFDS cannot parse is said as such, prepared or not, offline or not.
    (_Builder(), "train[", {"ZOO_OFFLINE": "1"}, r"invalid split 'train\[' \(Unrecognized"),
    (_Builder(), "train[:200%]", {}, r"invalid split 'train\[:200%\]' \(When unit=%"),
    (_Builder({"train": 1}, prepared=True), "train[1.5:]", {}, "invalid split 'train"),
    (_Builder(), "train+", {"TFDS_OFFLINE": "1"}, "invalid split 'train\\+'"),
]


@pytest.mark.parametrize("builder,split,environ,words", CASES)
def test_a_dataset_that_cannot_be_had_is_one_line_within_seconds(monkeypatch, builder, split,
                                                                 environ, words):
    for name in tfds_data.OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    spec = TfdsSpec("mnist", split)
    start = time.monotonic()
    if words is None:
        require_data(builder, spec, probe=UNREACHABLE, seconds=1.0)
    else:
        with pytest.raises(UserError, match=words) as caught:
            require_data(builder, spec, probe=UNREACHABLE, seconds=1.0)
        assert "\n" not in str(caught.value)
    assert time.monotonic() - start < 5


def test_offline_variable_reads_true_values_only(monkeypatch):
    assert offline_variable({"TFDS_OFFLINE": "0", "HF_HUB_OFFLINE": "yes"}) == "HF_HUB_OFFLINE"
    assert offline_variable({"ZOO_OFFLINE": ""}) is None


@pytest.mark.slow
def test_for_real_an_absent_dataset_fails_in_one_line_without_a_network(tmp_path, monkeypatch):
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    for name in tfds_data.OFFLINE_VARIABLES:  # the network's absence alone, not a switch
        monkeypatch.delenv(name, raising=False)
    tfds_builder.cache_clear()
    try:
        socket_ok = True
        import socket

        socket.create_connection(tfds_data._PROBE, timeout=3).close()
    except OSError:
        socket_ok = False
    if socket_ok:
        pytest.skip("this machine has a network: TFDS would download mnist")
    start = time.monotonic()
    with pytest.raises(UserError, match="cannot be downloaded") as caught:
        tfds_data.tfds_image_arrays("tfds:mnist", 8)
    assert "\n" not in str(caught.value)
    assert time.monotonic() - start < 120  # the builder's own start-up; no download retries
    tfds_builder.cache_clear()
