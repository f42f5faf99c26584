"""Converters from public checkpoints into zoo models.

Each converter reads a checkpoint's tensors as NumPy arrays (no PyTorch needed at run time for
safetensors files), maps the names onto a zoo model's weights and checks every shape on the way;
a tensor of the wrong shape, or one left over, is an error that names it.

    vit_from_hf(path_or_tensors, config)      Hugging Face ViTForImageClassification -> ViT
    vit_from_timm(path_or_tensors, num_heads) timm VisionTransformer -> ViT
    translator_from_marian(path_or_tensors)   Hugging Face MarianMTModel (OPUS-MT) -> Translator
    load_minilm(model_dir=None)               all-MiniLM-L6-v2 (sentence-transformers) ->
                                              SentenceEncoder
    clip_from_hf(path_or_tensors, config)     Hugging Face CLIPModel -> CLIP
                                              (zoo.converters.clip)

`zoo.hub.builders` builds ready models (image normalisation, label names,
tokenizers) from folders laid out as the hub has them, for `zoo.hub.handles`'s `hf://` handles;
`zoo.text.marian_graph` is OPUS-MT's tokenizer in a TensorFlow graph, for export.
"""

from zoo.converters.hf_vit import vit_from_hf, vit_from_timm
from zoo.converters.marian import translator_from_marian
from zoo.converters.minilm import load_minilm

__all__ = ["load_minilm", "translator_from_marian", "vit_from_hf", "vit_from_timm"]
