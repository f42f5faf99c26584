"""Image captioning (a ViT encoder with a GPT-2 decoder that attends to the image's tokens):
the task with its tied head, `caption` and `fit` on (image, caption) pairs (captioner.py), its
searches over the decoder's cache (searching.py), its preprocessor (preprocessor.py) and its
architectures."""
