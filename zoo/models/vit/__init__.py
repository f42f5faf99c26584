"""The Vision Transformer, its architectures, image batches and attention rollout."""
