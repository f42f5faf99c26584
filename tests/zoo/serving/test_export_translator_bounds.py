"""An exported translator's bounds, as the model server runs it (no XLA): a request of more
than `MAX_TRANSLATOR_SENTENCES` sentences, or of ids wider than the model reads, is refused
before any work; an empty request is answered empty; each sentence is cut to the characters
`Translator.translate` reads before it is tokenized."""

import warnings

import keras
import pytest

from tests.zoo.conftest import serve
from tests.zoo.serving.conftest import check_request_table
from zoo.serving.text_endpoints import MAX_TRANSLATOR_SENTENCES
from zoo.text.length_cap import character_cap

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")
# The exported test translator (tests/zoo/serving/conftest.py): max_source_length 32, and
# `translate_ids` answers ids of `default_max_length(32)` columns: its max_target_length 24.
SOURCE, WIDTH = 32, 24


# (case, signature, inputs as NumPy expressions, what the answer holds: the shapes of
# "scores" and of the text output, or the refusal's message)
CAP = MAX_TRANSLATOR_SENTENCES
REQUESTS = [
    ("empty request", "serving_default",
     {"sentences": "np.array([], dtype=object)"}, {"scores": [0], "translations": [0]}),
    ("empty ids", "translate_ids",
     {"source_ids": "np.zeros([0, 5], np.int32)"}, {"scores": [0], "target_ids": [0, WIDTH]}),
    ("at the sentence cap", "serving_default",
     {"sentences": f"np.array([b'a dog'] * {CAP}, dtype=object)"},
     {"scores": [CAP], "translations": [CAP]}),
    ("over the sentence cap", "serving_default",
     {"sentences": f"np.array([b'a dog'] * {CAP + 1}, dtype=object)"},
     f"[a request of] [{CAP + 1}] [sentences is more than the limit of] [{CAP}]"),
    ("ids over the sentence cap", "translate_ids",
     {"source_ids": f"np.full([{CAP + 1}, 4], 5, np.int32)"},
     f"[a request of] [{CAP + 1}] [sentences is more than the limit of] [{CAP}]"),
    ("ids as wide as the model reads", "translate_ids",
     {"source_ids": f"np.full([2, {SOURCE}], 5, np.int32)"},
     {"scores": [2], "target_ids": [2, WIDTH]}),
    ("ids wider than the model reads", "translate_ids",
     {"source_ids": f"np.full([2, {SOURCE + 1}], 5, np.int32)"},
     f"[source_ids has rows of] [{SOURCE + 1}] [tokens, more than the limit of] [{SOURCE}]"),
]


def test_requests_within_the_caps_are_answered_and_others_refused_naming_the_cap(
        exported_translator):
    """As the model server runs them: an empty request is answered with no rows, a request
    at a cap in full, and one past a cap is refused (InvalidArgument) naming the cap."""
    _, _, version = exported_translator
    check_request_table(version, REQUESTS)


def test_served_sentences_are_cut_where_the_python_api_cuts_them(exported_translator):
    """Spaces collapse in SentencePiece, so words after thousands of them are read by a
    tokenizer that sees the whole text but not after the cut: the served translation equals
    the Python API's (which cuts) only if the graph cuts at the same character."""
    model, _, version = exported_translator
    cap = character_cap(model.max_source_length)
    head, tail = "a man", "rides a red bicycle near two dogs"
    cut_text = head + " " * (cap - len(head) + 10) + tail
    other = "é" * (cap + 5)  # cut inside a run of two-byte characters, never inside one

    def python(text: str) -> list[str]:  # the same batch, so the same output budget
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.translate([text, other], beam_size=3)

    expected = python(cut_text)
    # The test can tell the two apart: the tail changes the translation when it is read.
    assert expected[0] == python(head)[0]
    assert python(f"{head} {tail}")[0] != expected[0]
    assert serve(version, {"sentences": [cut_text, other]})["translations"] == expected
