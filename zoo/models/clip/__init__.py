"""CLIP-style dual encoders: the two towers (backbone.py: the zoo's ViT and GPT-2 backbones,
projections, temperature), the preprocessor for images and texts (preprocessor.py), the task
with its zero-shot classifier and contrastive `fit` (model.py), and its architectures."""
