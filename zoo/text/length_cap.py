"""How much of a source text a translator reads, in characters: texts are cut to
`character_cap(max_source_length)` characters before they are tokenized, so that the memory
and time of tokenizing do not grow with the input (a 50 MB line tokenized whole took 3.3 GB,
of which the model then read 64 pieces).

    cap = character_cap(model.max_source_length)   # 4,096 for the shipped translator
    text, was_cut = cut_text(text, cap)

Why the cut changes no translation of a text the model reads whole: the model reads at most
`max_source_length` pieces; a SentencePiece piece holds at most 16 characters of normalized
text (SentencePiece's default `max_sentencepiece_length`, which the zoo's tokenizers are
trained with; the longest piece of the shipped vocabulary has 16), so the pieces it reads
lie within `16 x max_source_length` normalized characters. Pieces never span a space
(`split_by_whitespace`), so the pieces of the words before the cut are the same as in the
whole text. The cap is four times that: NFKC folds up to three typed characters into one
(a Hangul syllable from its jamo, a letter and its combining accents), and the rest leaves
room for the word that the cut goes through. The cut is on characters, never inside one.

What the cap does not cover: a text whose characters collapse when normalized (a run of
thousands of spaces, which SentencePiece reads as one) or which SentencePiece reads as one
unknown piece however long the run (thousands of characters the vocabulary lacks, such as
NUL bytes or a script it was not trained on) may hold words past the cap that the model
would have read. Such a text is cut all the same, with its warning.
"""

from __future__ import annotations

from zoo.layers.validation import is_int

# The most characters of normalized text in one SentencePiece piece (its trainer's default
# `max_sentencepiece_length`).
MAX_PIECE_CHARACTERS = 16
# Typed characters kept per normalized character the pieces may need (see the module's doc).
CAP_FACTOR = 4


def character_cap(max_tokens: int) -> int:
    """The characters of a source text kept for a model that reads `max_tokens` tokens.

    Example:
        >>> character_cap(64)
        4096
    """
    if not is_int(max_tokens) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive int; got {max_tokens!r}")
    return max_tokens * MAX_PIECE_CHARACTERS * CAP_FACTOR


def cut_text(text: str, cap: int) -> tuple[str, bool]:
    """`(text cut to its first cap characters, whether it was longer)`.

    Example:
        >>> cut_text("A dog runs.", 5)
        ('A dog', True)
    """
    return (text[:cap], True) if len(text) > cap else (text, False)


def cut_warning(where: str, cap: int, max_tokens: int, many: bool = False) -> str:
    """The one-line warning for a cut text; `where` names it ("line 3 of stdin", "text 2"),
    or several (`many`: "texts 2, 5 (of 8)").

    Example:
        >>> cut_warning("argument 2", 4096, 64)  # doctest: +ELLIPSIS
        'argument 2 is longer than 4,096 characters; only its first 4,096 are translated ...'
    """
    verb, its = ("are", "their") if many else ("is", "its")
    return (f"{where} {verb} longer than {cap:,} characters; only {its} first {cap:,} are "
            f"translated (the model reads at most {max_tokens} tokens of a sentence)")
