"""The Vision Transformer (model.py), its surgery and inference methods, architectures, image
batches and attention rollout."""
