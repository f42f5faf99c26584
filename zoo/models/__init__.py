"""The models: the architecture registry, the translator, the Vision Transformer, the sentence encoder."""
