"""Architectures of the GPT-2 decoder (see `zoo.models.architectures`).

`CausalLM.from_architecture(name)` (or `GPT2Backbone.from_architecture`) builds a freshly
initialised model of one of these shapes; trained weights load by handle:
`CausalLM.from_preset("hf://gpt2")` / `zoo.load("hf://distilgpt2")`.
"""

from __future__ import annotations

from zoo.models.architectures import register_architecture

# GPT-2's byte-level BPE vocabulary and context.
_VOCABULARY, _POSITIONS = 50257, 1024


def _gpt2(name: str, layers: int, width: int, heads: int, description: str,
          vocabulary_size: int = _VOCABULARY, max_positions: int = _POSITIONS) -> None:
    register_architecture("GPT2Backbone", name, description, vocabulary_size=vocabulary_size,
                          num_layers=layers, num_heads=heads, hidden_dim=width,
                          intermediate_dim=4 * width, max_positions=max_positions,
                          dropout=0.1, attention_dropout=0.1)


#     name,          layers, width, heads
_gpt2("gpt2-small",  12, 768, 12,
      "GPT-2's 124M shape (untrained; trained weights: hf://gpt2): 12 layers, width 768, "
      "12 heads")
_gpt2("gpt2-medium", 24, 1024, 16,
      "GPT-2 medium's 355M shape (untrained; trained: hf://gpt2-medium): 24 layers, width "
      "1024, 16 heads")
_gpt2("gpt2-distil", 6, 768, 12,
      "distilgpt2's 82M shape (untrained; trained: hf://distilgpt2): 6 layers, width 768, "
      "12 heads")
_gpt2("gpt2-tiny",   2, 32, 4,
      "for tests and toy corpora: 2 layers, width 32, 4 heads, 512 pieces, 128 positions",
      vocabulary_size=512, max_positions=128)
