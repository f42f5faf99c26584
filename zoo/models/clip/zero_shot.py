"""What a trained CLIP does with images and texts: embeddings, and zero-shot classification
with a classifier built once from label prompts and reused (open_clip's
`build_zero_shot_classifier`; Radford et al. 2021, section 3.1.4 on prompt ensembling).

`CLIP` takes these methods from `CLIPInference`. Images may be one `(height, width, channels)`
array or a batch, uint8 or float, values 0..255, of any size; texts a list of strings.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zoo.layers.validation import positive_int
from zoo.models.vit.image_batch import as_image_batch
from zoo.text.base import _as_strings
from zoo.training.errors import UserError

DEFAULT_TEMPLATE = "a photo of a {}"


def _normalized(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def _templates(template: str | Sequence[str]) -> list[str]:
    templates = [template] if isinstance(template, str) else list(template)
    if not templates or not all(isinstance(t, str) and "{}" in t for t in templates):
        raise UserError(f"template must be a string holding {{}} (or a list of them); got "
                        f"{template!r}")
    return templates


class CLIPInference:
    """`CLIP`'s methods that take images and texts and return NumPy results."""

    def encode_images(self, images: Any, batch_size: int = 32,
                      normalize: bool = False) -> np.ndarray:
        """`(images, embedding_dim)` float32 embeddings (open_clip's `encode_image`, Hugging
        Face's `get_image_features`).

        Args:
            images: one image or a batch, uint8 or float, values 0..255, any size.
            batch_size: images per forward pass.
            normalize: scale each embedding to unit length.

        Raises:
            UserError: images of the wrong rank or channel count, or non-finite pixels.
        """
        positive_int(batch_size, "batch_size", error=UserError)
        batch = as_image_batch(images, self.backbone.num_channels)
        out = []
        for start in range(0, len(batch), batch_size):
            pixels = self.preprocessor_images(batch[start:start + batch_size])
            out.append(np.asarray(self.backbone.encode_images(pixels, training=False)))
        embeddings = np.concatenate(out).astype("float32")
        return _normalized(embeddings) if normalize else embeddings

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256,
                     normalize: bool = False) -> np.ndarray:
        """`(texts, embedding_dim)` float32 embeddings (open_clip's `encode_text`, Hugging
        Face's `get_text_features`); each text cut to the context length.

        Raises:
            UserError: the model has no tokenizer, or `texts` is empty.
            TypeError: `texts` is one string.
        """
        positive_int(batch_size, "batch_size", error=UserError)
        strings = _as_strings(texts)
        if not strings:
            raise UserError("texts must hold at least one text; got an empty list")
        tokenizer = self.preprocessor.require_tokenizer() if self.preprocessor else None
        if tokenizer is None:
            raise UserError("this CLIP has no tokenizer: load one with zoo.load")
        out = []
        for start in range(0, len(strings), batch_size):
            ids = np.asarray(self.preprocessor.token_ids(strings[start:start + batch_size]))
            out.append(np.asarray(self.backbone.encode_texts(ids, training=False)))
        embeddings = np.concatenate(out).astype("float32")
        return _normalized(embeddings) if normalize else embeddings

    def zero_shot_classifier(self, labels: Sequence[str],
                             template: str | Sequence[str] = DEFAULT_TEMPLATE) -> np.ndarray:
        """`(labels, embedding_dim)` unit vectors, one per label: the mean of its prompts'
        unit embeddings (`template.format(label)` for each template), made unit again. Build
        it once and pass it to `zero_shot(..., classifier=)` for every batch of images.

        Raises:
            UserError: no labels, a label that is not a non-empty string, a template
                without "{}".
        """
        labels = list(labels) if not isinstance(labels, str) else [labels]
        if not labels or not all(isinstance(x, str) and x.strip() for x in labels):
            raise UserError(f"labels must be non-empty strings, at least one; got {labels!r}")
        templates = _templates(template)
        prompts = [t.format(label) for label in labels for t in templates]
        embeddings = self.encode_texts(prompts, normalize=True)
        per_label = embeddings.reshape(len(labels), len(templates), -1).mean(axis=1)
        return _normalized(per_label)

    def zero_shot(self, images: Any, labels: Sequence[str],
                  template: str | Sequence[str] = DEFAULT_TEMPLATE,
                  classifier: np.ndarray | None = None, batch_size: int = 32) -> np.ndarray:
        """`(images, labels)` probabilities of each label for each image: the softmax over
        labels of the scaled cosine similarities (Hugging Face's `logits_per_image`).

        Args:
            images: one image or a batch (as `encode_images`).
            labels: the candidate labels, e.g. `["cat", "dog", "ship"]`.
            template: the prompt each label is put in, or a list of them (an ensemble).
            classifier: `zero_shot_classifier(labels, template)`'s result, to reuse it;
                None builds it.
            batch_size: images per forward pass.
        """
        if classifier is None:
            classifier = self.zero_shot_classifier(labels, template)
        elif len(classifier) != len(labels):
            raise UserError(f"the classifier has {len(classifier)} rows but there are "
                            f"{len(labels)} labels")
        image_embeddings = self.encode_images(images, batch_size, normalize=True)
        scale = float(self.backbone.similarity_scale())
        logits = scale * image_embeddings.astype("float64") @ np.asarray(classifier).T
        probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return probabilities / probabilities.sum(axis=-1, keepdims=True)

    def classify(self, images: Any, labels: Sequence[str], top_k: int = 5,
                 template: str | Sequence[str] = DEFAULT_TEMPLATE,
                 batch_size: int = 32) -> list[list[tuple[str, float]]]:
        """The `top_k` most probable labels of each image, most probable first, as
        `VisionTransformer.classify` gives them: one list of `(label, probability)` per
        image."""
        positive_int(top_k, "top_k", error=UserError)
        probabilities = self.zero_shot(images, labels, template, batch_size=batch_size)
        best = np.argsort(-probabilities, axis=-1, kind="stable")[:, :top_k]
        return [[(labels[i], float(row[i])) for i in order]
                for row, order in zip(probabilities, best)]
