"""An exported translator's bounds, as the model server runs it (no XLA): a request of more
than `MAX_SENTENCES` sentences is refused before any work, and each sentence is cut to the
characters `Translator.translate` reads before it is tokenized."""

import warnings

import keras
import pytest

from tests.zoo.conftest import run_like_a_server, serve
from zoo.serving.text_endpoints import MAX_SENTENCES
from zoo.text.length_cap import character_cap

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                                reason="export runs on the TensorFlow backend")


def test_a_request_over_the_sentence_cap_is_refused_naming_it(exported_translator):
    _, _, version = exported_translator
    (result,) = run_like_a_server(
        f"model = tf.saved_model.load({str(version)!r})\n"
        "feeds = {\n"
        f"    'serving_default': {{'sentences': tf.constant(['a dog'] * {MAX_SENTENCES + 1})}},\n"
        f"    'translate_ids': {{'source_ids': tf.fill([{MAX_SENTENCES + 1}, 4], 5)}}}}\n"
        "outcome = {}\n"
        "for name, feed in feeds.items():\n"
        "    try:\n"
        "        outcome[name] = str(model.signatures[name](**feed))\n"
        "    except tf.errors.InvalidArgumentError as error:\n"
        "        outcome[name] = error.message\n"
        "print(json.dumps(outcome))\n")
    for name in ("serving_default", "translate_ids"):
        assert (f"[a request of] [{MAX_SENTENCES + 1}] [sentences is more than the limit of] "
                f"[{MAX_SENTENCES}]") in result[name], result[name]


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
