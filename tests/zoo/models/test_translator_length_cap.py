"""Source texts cut to what the translator can read (zoo/text/length_cap.py): before they
are tokenized, so that memory does not grow with a text, and at a cap that changes no
translation of a text the model reads whole (checked on the shipped translator)."""

from __future__ import annotations

import unicodedata
import warnings

import keras
import pytest

from tests.zoo.conftest import read_gz
from zoo.models.translator.model import Translator
from zoo.text.length_cap import MAX_PIECE_CHARACTERS, character_cap


@pytest.fixture(scope="module")
def shipped():
    import zoo

    return zoo.load("translator-multi30k-en-de")


def _joined(sentences: list[str], characters: int) -> str:
    """Real sentences joined with spaces into one text of at least `characters`."""
    text, index = "", 0
    while len(text) < characters:
        text += sentences[index % len(sentences)] + " "
        index += 1
    return text


def _texts(kind: str, folder, tokenizer, cap: int) -> str:
    """A text three times the cap long, of one kind of hard case for the cut."""
    if kind == "real English, longest sentences first":
        return _joined(sorted(read_gz(folder / "val.en.gz"), key=len, reverse=True), 3 * cap)
    if kind == "real German, accents decomposed (NFD: NFKC folds them back)":
        return unicodedata.normalize("NFD", _joined(read_gz(folder / "val.de.gz"), 3 * cap))
    # Words as long as a piece can be: the vocabulary's longest pieces, one word each.
    pieces = sorted((tokenizer.id_to_piece(i) for i in range(tokenizer.vocabulary_size)),
                    key=len)[-100:]
    return _joined([piece.lstrip("\u2581") for piece in pieces], 3 * cap)


KINDS = ["real English, longest sentences first",
         "real German, accents decomposed (NFD: NFKC folds them back)",
         "the vocabulary's longest pieces as words"]


@pytest.mark.slow  # loads the shipped translator: about 20 s on two busy cores
@pytest.mark.parametrize("kind", KINDS)
def test_the_cap_changes_no_translation_of_the_shipped_translator(kind, shipped, shared_data,
                                                                  monkeypatch):
    """The ids the model reads, and the translation, of a long text equal those of the text
    cut at the cap; the text is long enough that a cut at `max_source_length` characters
    would change them (the check can fail)."""
    tokenizer, length = shipped.tokenizer, shipped.max_source_length
    cap = shipped.source_character_cap
    assert cap == character_cap(length) >= length * MAX_PIECE_CHARACTERS
    text = _texts(kind, shared_data / "multi30k", tokenizer, cap)
    assert len(text) > 2 * cap
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tokenizer's "truncated to 64" warning
        whole = tokenizer.encode([text], max_length=length)[0]
        assert tokenizer.encode([text[:cap]], max_length=length)[0] == whole
        assert tokenizer.encode([text[:length]], max_length=length)[0] != whole
        cut = shipped.translate([text[:cap]], beam_size=1)
        # The same model without the cap: the whole text is tokenized.
        monkeypatch.setattr(Translator, "source_character_cap", property(lambda self: 10**9))
        assert shipped.translate([text], beam_size=1) == cut
    assert cut[0].strip()


@pytest.fixture(scope="module")
def tiny(small_tokenizer):
    keras.utils.set_random_seed(0)
    return Translator.from_architecture("transformer-tiny", small_tokenizer, hidden_dim=16,
                                        intermediate_dim=32, num_heads=2,
                                        max_source_length=8, max_target_length=6)


# (name, the texts as a function of the cap, how the warning names the cut ones, or None)
CUTS = [
    ("one text one character over", lambda cap: ["A dog.", "a" * (cap + 1)], "text 1 is"),
    ("a text exactly at the cap", lambda cap: ["a" * cap, "b"], None),
    ("a 1 MB text", lambda cap: ["A dog runs. " * 100_000], "text 0 is"),
    ("multi-byte characters", lambda cap: ["\u00f6" * (cap + 7), "ok"], "text 0 is"),
    ("several", lambda cap: ["x" * (cap + 1), "y", "z" * (2 * cap)], "texts 0, 2 (of 3) are"),
]


def _spy_on_encode(tokenizer, monkeypatch) -> list[int]:
    """The lengths of the source texts `tokenizer.encode` is given from now on."""
    seen: list[int] = []
    encode = type(tokenizer).encode

    def spy(self, batch, *args, **kwargs):
        if not kwargs.get("target"):
            seen.extend(len(text) for text in batch)
        return encode(self, batch, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "encode", spy)
    return seen


@pytest.mark.parametrize("name, make, named", CUTS, ids=[case[0] for case in CUTS])
@pytest.mark.parametrize("entry", ["translate", "encode_texts"])
def test_texts_are_cut_before_they_are_tokenized(name, make, named, entry, tiny,
                                                 monkeypatch):
    """The tokenizer sees each text cut to the cap; a cut text has a warning that names its
    index, and a text within the cap none."""
    cap = tiny.source_character_cap
    texts = make(cap)
    seen = _spy_on_encode(tiny.tokenizer, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if entry == "translate":
            tiny.translate(texts, beam_size=1, max_length=2)
        else:
            tiny.encode_texts(texts)
    assert sorted(seen) == sorted(min(len(text), cap) for text in texts)
    cuts = [str(w.message) for w in caught if "characters" in str(w.message)]
    if named is None:
        assert cuts == []
    else:
        assert len(cuts) == 1 and cuts[0].startswith(f"{named} longer than {cap:,} characters")


def test_cross_attention_cuts_its_sentence_too(tiny, monkeypatch):
    cap = tiny.source_character_cap
    seen = _spy_on_encode(tiny.tokenizer, monkeypatch)
    with pytest.warns(UserWarning, match=f"text 0 is longer than {cap:,} characters"):
        source, _, weights = tiny.cross_attention("A dog runs. " * 100_000, "Ein Hund.")
    assert seen == [cap] and len(source) == tiny.max_source_length == weights.shape[1]


@pytest.mark.parametrize("text, message", [
    ("ok\udcff", "input 0 is not text: it holds the lone surrogate 0xdcff at character 2"),
    (b"ok\xff", "input 0 is not valid UTF-8"),
])
def test_text_that_is_not_utf8_is_a_one_line_users_mistake(text, message, tiny):
    from zoo.training.errors import UserError

    with pytest.raises(UserError, match=message) as error:
        tiny.translate([text], beam_size=1, max_length=2)
    assert "\n" not in str(error.value)
