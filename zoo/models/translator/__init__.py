"""The encoder-decoder Transformer translator and its architectures."""
