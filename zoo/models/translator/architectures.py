"""Architectures of the Transformer translator (see `zoo.models.architectures`).

`Translator.from_architecture(name, tokenizer)` builds a freshly initialised model of one of
these shapes; trained translators load with `Translator.from_preset` / `zoo.load`.
"""

from __future__ import annotations

from zoo.models.architectures import register_architecture


def _translator(name: str, layers: int, d_model: int, heads: int, d_ff: int, dropout: float,
                description: str) -> None:
    """Registers a translator with `layers` blocks in each of its encoder and decoder."""
    register_architecture("Translator", name, description, hidden_dim=d_model,
                          num_encoder_layers=layers, num_decoder_layers=layers, num_heads=heads,
                          intermediate_dim=d_ff, dropout=dropout)


#           name,                  layers, d_model, heads, d_ff, dropout
_translator("transformer-base",     6, 512, 8, 2048, 0.1,
            "the paper's base model (table 3): 6+6 layers, d_model 512, 8 heads, d_ff 2048")
_translator("transformer-multi30k", 3, 256, 8, 1024, 0.1,
            "sized for Multi30k's 29,000 pairs as the smaller published baselines: 3+3 layers, "
            "d_model 256, 8 heads, d_ff 1024")
_translator("transformer-small",    4, 128, 4, 256, 0.3,
            "the Transformer-tiny of Wu et al. (ACL 2021, 41.02 BLEU on Multi30k en-de): 4+4 "
            "layers, d_model 128, 4 heads, d_ff 256, dropout 0.3; cheap enough for CPUs")
_translator("transformer-tiny",     2, 128, 4, 256, 0.1,
            "trains in minutes on a CPU (tests, the first interim model): 2+2 layers, "
            "d_model 128, 4 heads, d_ff 256")
