"""The encoder-decoder Transformer translator (model.py), its text and surgery methods, and its
architectures."""
