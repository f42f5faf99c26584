"""Decoder-only language models (GPT-2): the backbone (backbone.py, reused by the captioner
with cross-attention), the preprocessor for text (preprocessor.py), the task with its tied head,
`fit` on text and LoRA (causal_lm.py), its generation (generating.py) and its architectures."""
