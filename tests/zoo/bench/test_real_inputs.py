"""The served benchmarks' real inputs (`zoo.bench.real_inputs`), from the shared data."""

from __future__ import annotations

import gzip

import pytest

from zoo.bench import real_inputs


def test_the_sentences_are_the_first_lines_of_the_test_set(shared_data):
    if not real_inputs.SENTENCES.is_file():
        pytest.skip(f"{real_inputs.SENTENCES} is absent")
    with gzip.open(real_inputs.SENTENCES, "rt", encoding="utf-8") as lines:
        expected = [next(lines).rstrip("\n") for _ in range(3)]
    assert real_inputs.items_of("sentences", 3) == expected


def test_the_images_are_jpegs(shared_data):
    if not real_inputs.JPEGS.is_file():
        pytest.skip(f"{real_inputs.JPEGS} is absent")
    images = real_inputs.items_of("images", 2)
    assert len(images) == 2 and images[0] != images[1]
    assert all(image[:2] == b"\xff\xd8" for image in images)  # JPEG's start-of-image marker


@pytest.mark.parametrize("kind, count", [("sentences", 0), ("audio", 1)])
def test_what_cannot_be_read_is_refused(kind, count):
    with pytest.raises(ValueError, match="got"):
        real_inputs.items_of(kind, count)


def test_a_request_holds_the_items_as_bytes():
    request = real_inputs.as_request(["Zwei Hunde.", b"\xff\xd8\xff", "über"])
    assert request.dtype == object and request.shape == (3,)
    assert list(request) == [b"Zwei Hunde.", b"\xff\xd8\xff", "über".encode("utf-8")]
    assert all(type(item) is bytes for item in request)
