"""sacreBLEU and chrF for translations, and a callback that logs them during training."""

from __future__ import annotations

from typing import Callable, Sequence

import keras

from zoo.training.errors import UserError


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """sacreBLEU (13a tokenization, cased, on detokenized text) and chrF of a corpus.

    Args:
        hypotheses: one system output per line.
        references: one reference per line, aligned with `hypotheses`.

    Returns:
        `{"bleu": ..., "chrf": ...}` on sacreBLEU's 0-100 scale, and `"signature"`, the
        BLEU signature string that says how it was computed.
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise UserError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; they must align")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    hypotheses, references = list(hypotheses), [list(references)]
    bleu_score = bleu.corpus_score(hypotheses, references)
    return {
        "bleu": float(bleu_score.score),
        "chrf": float(chrf.corpus_score(hypotheses, references).score),
        "signature": str(bleu.get_signature()),
    }


class TranslationMetricsCallback(keras.callbacks.Callback):
    """Translates a validation sample at the end of each epoch and logs BLEU and chrF.

    The scores go into the epoch's `logs` as `val_bleu` and `val_chrf`, so `History`,
    `TensorBoard` (placed after this callback) and checkpoints see them.

    Args:
        translate: a function from a list of sources to a list of translations.
        sources: validation sources.
        references: their references.
        every: evaluate every `every` epochs (and always after the last one).
        print_examples: how many example translations to print.
    """

    def __init__(self, translate: Callable[[list[str]], list[str]], sources: Sequence[str],
                 references: Sequence[str], every: int = 1, print_examples: int = 2) -> None:
        super().__init__()
        if len(sources) != len(references):
            raise UserError(
                f"{len(sources)} sources but {len(references)} references; they must align")
        self.translate = translate
        self.sources = list(sources)
        self.references = list(references)
        self.every = max(1, int(every))
        self.print_examples = int(print_examples)
        self.history: list[dict] = []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        last = self.params and epoch + 1 == self.params.get("epochs")
        if (epoch + 1) % self.every and not last:
            return
        hypotheses = self.translate(self.sources)
        scores = corpus_scores(hypotheses, self.references)
        if logs is not None:
            logs["val_bleu"], logs["val_chrf"] = scores["bleu"], scores["chrf"]
        self.history.append({"epoch": epoch + 1, "bleu": scores["bleu"],
                             "chrf": scores["chrf"], "signature": scores["signature"]})
        print(f"\nepoch {epoch + 1}: validation BLEU {scores['bleu']:.2f} chrF "
              f"{scores['chrf']:.2f} on {len(self.sources)} sentences")
        for source, hypothesis in list(zip(self.sources, hypotheses))[:self.print_examples]:
            print(f"  {source}\n  -> {hypothesis}")
