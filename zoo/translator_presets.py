"""Architectures of the Transformer translator (see `zoo.presets`).

`Translator.from_architecture(name, tokenizer)` builds a freshly initialised model of one of
these shapes; trained translators load with `Translator.from_preset` / `zoo.load`.
"""

from __future__ import annotations

from typing import Any

from zoo.presets import register_architecture


def _translator(name: str, description: str, **config: Any) -> None:
    register_architecture("Translator", name, description, **config)


_translator("transformer-base",
            "the paper's base model (table 3): 6+6 layers, d_model 512, 8 heads, d_ff 2048",
            hidden_dim=512, num_encoder_layers=6, num_decoder_layers=6, num_heads=8,
            intermediate_dim=2048, dropout=0.1)
_translator("transformer-multi30k",
            "sized for Multi30k's 29,000 pairs as the smaller published baselines: 3+3 layers, "
            "d_model 256, 8 heads, d_ff 1024",
            hidden_dim=256, num_encoder_layers=3, num_decoder_layers=3, num_heads=8,
            intermediate_dim=1024, dropout=0.1)
_translator("transformer-small",
            "the Transformer-tiny of Wu et al. (ACL 2021, 41.02 BLEU on Multi30k en-de): 4+4 "
            "layers, d_model 128, 4 heads, d_ff 256, dropout 0.3; cheap enough for CPUs",
            hidden_dim=128, num_encoder_layers=4, num_decoder_layers=4, num_heads=4,
            intermediate_dim=256, dropout=0.3)
_translator("transformer-tiny",
            "trains in minutes on a CPU (tests, the first interim model): 2+2 layers, "
            "d_model 128, 4 heads, d_ff 256",
            hidden_dim=128, num_encoder_layers=2, num_decoder_layers=2, num_heads=4,
            intermediate_dim=256, dropout=0.1)
