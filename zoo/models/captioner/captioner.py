"""The image captioner: a ViT encoder and a GPT-2 decoder that attends to the image's tokens,
as Hugging Face's `VisionEncoderDecoderModel` (Li et al. 2021's TrOCR and nlpconnect's
vit-gpt2 captioner are built so):

    z = LN(ViT(images))                        the encoder's tokens (`ViTBackbone`)
    m = z W_proj + b                           only where the widths differ (`enc_to_dec_proj`)
    h = GPT2(y_<t, cross-attending to m)       pre-norm blocks with cross-attention
    logits = h E_token^T                       the head is the token embedding (tied)

`caption` searches over the decoder's key/value cache (zoo/models/captioner/searching.py, the
translator's greedy and beam search); `fit` takes (images, captions) and trains with teacher
forcing (zoo/models/captioner/preprocessor.py).
"""

from __future__ import annotations

from typing import Any

import keras

from zoo.layers.validation import positive_int
from zoo.models.captioner import architectures as _architectures  # noqa: F401  (registers)
from zoo.models.captioner.preprocessor import CaptionerPreprocessor, is_caption_list
from zoo.models.captioner.searching import DEFAULT_MAX_LENGTH, CaptionerSearch, until_end
from zoo.models.architectures import architectures
from zoo.models.causal_lm.backbone import GPT2Backbone
from zoo.models.image_converter import ImageConverter
from zoo.models.task import Task
from zoo.models.vit.backbone import ViTBackbone
from zoo.models.vit.image_batch import as_image_batch
from zoo.text.byte_pair import BytePairTokenizer
from zoo.training.errors import UserError

# The whitespace cut from both ends of a caption (GPT-2 writes a space before most words).
ASCII_SPACE = " \t\n\v\f\r"


@keras.saving.register_keras_serializable(package="zoo")
class ImageCaptioner(CaptionerSearch, Task):
    """Writes a caption for an image: a `ViTBackbone` encoder, a `GPT2Backbone` decoder with
    cross-attention and its tied head, with a `CaptionerPreprocessor` (image converter and
    tokenizer).

    Args:
        encoder: the `ViTBackbone` whose tokens (all of them, after its final LayerNorm) the
            decoder attends to.
        decoder: the `GPT2Backbone`, built with `cross_attention=True`.
        preprocessor: the `CaptionerPreprocessor`; its image converter maps 0..255 images to
            the encoder's pixels (its tokenizer may be None: a captioner of ids only).
        **kwargs: base model arguments (`name`).

    Call arguments:
        inputs: a dict of `images` `(batch, height, width, channels)` 0..255, `token_ids`
            `(batch, T)` (the start token, then the caption) and `padding_mask` `(batch, T)`.
        training: whether dropout is active.

    Returns:
        float32 next-token logits `(batch, T, vocabulary_size)`.

    Example:
    >>> import numpy as np
    >>> captioner = ImageCaptioner.from_architecture("captioner-tiny")
    >>> logits = captioner({"images": np.zeros((1, 32, 32, 3)), "token_ids": np.array([[511]]),
    ...                     "padding_mask": np.ones((1, 1))})
    >>> tuple(logits.shape)
    (1, 1, 512)
    >>> ids = captioner.caption_ids(np.zeros((32, 32, 3), "uint8"), beam_size=2, max_length=5)
    >>> len(ids), len(ids[0]) <= 5
    (1, True)
    """

    _serialised_parts = ("encoder", "decoder", "preprocessor")

    def __init__(self, encoder: ViTBackbone, decoder: GPT2Backbone,
                 preprocessor: CaptionerPreprocessor, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(encoder, ViTBackbone):
            raise UserError(f"encoder must be a ViTBackbone; got {type(encoder).__name__}")
        if not isinstance(decoder, GPT2Backbone) or not decoder.cross_attention:
            raise UserError("decoder must be a GPT2Backbone with cross_attention=True; got "
                            f"{type(decoder).__name__}")
        if not isinstance(preprocessor, CaptionerPreprocessor):
            raise UserError("preprocessor must be a CaptionerPreprocessor; got "
                            f"{type(preprocessor).__name__}")
        self.encoder = encoder
        self.decoder = decoder
        self.preprocessor = preprocessor
        # Hugging Face's `enc_to_dec_proj`: the encoder's tokens to the decoder's width.
        self.encoder_projection = None
        if encoder.hidden_dim != decoder.hidden_dim:
            self.encoder_projection = keras.layers.Dense(
                decoder.hidden_dim, dtype=self.dtype_policy, name="encoder_projection")
            self.encoder_projection.build((None, None, encoder.hidden_dim))
        self._search_functions: dict = {}

    @property
    def backbone(self) -> GPT2Backbone:
        """The network under the head: the decoder (its token embedding is the head)."""
        return self.decoder

    @classmethod
    def from_architecture(cls, name: str, tokenizer: BytePairTokenizer | None = None,
                          image_size: int | None = None, **decoder_overrides: Any
                          ) -> "ImageCaptioner":
        """An untrained captioner of a registered architecture (`zoo models`).

        Args:
            name: one of `ImageCaptioner.architectures()`.
            tokenizer: the captions' `BytePairTokenizer` (the decoder's vocabulary is then
                its size); None: a captioner of ids only.
            image_size: the encoder's image side, if not the architecture's.
            **decoder_overrides: `GPT2Backbone` arguments that replace the architecture's
                (`max_positions`, `dropout`).
        """
        known = architectures("ImageCaptioner")
        if name not in known:
            raise UserError(f"unknown ImageCaptioner architecture {name!r}; expected one of: "
                            f"{', '.join(known)}")
        config = known[name].config
        encoder = dict(config["encoder"])
        if image_size is not None:
            encoder["image_size"] = image_size
        encoder = ViTBackbone(**encoder)
        if tokenizer is not None:
            decoder_overrides["vocabulary_size"] = tokenizer.vocabulary_size
        decoder = GPT2Backbone(**{**config["decoder"], **decoder_overrides},
                               cross_attention=True)
        converter = ImageConverter(encoder.image_size, scale=1 / 127.5, offset=-1.0,
                                   owner="ImageCaptioner")
        return cls(encoder, decoder, CaptionerPreprocessor(converter, tokenizer))

    @classmethod
    def architectures(cls) -> list[str]:
        """The names `from_architecture` accepts."""
        return list(architectures(cls.__name__))

    # ------------------------------------------------------------------ network
    @property
    def start_id(self) -> int:
        """The decoder's start token: GPT-2's end-of-text (`decoder_start_token_id`)."""
        return self.end_id

    @property
    def end_id(self) -> int:
        """The end-of-text id: the tokenizer's, else the vocabulary's last (GPT-2's)."""
        if self.preprocessor.tokenizer is not None:
            return self.preprocessor.tokenizer.end_id
        return self.decoder.vocabulary_size - 1

    def build(self, input_shape: Any = None) -> None:
        # The decoder (the backbone); the encoder and the projection are built already.
        if not self.backbone.built:
            self.backbone.build()

    def encode(self, images: Any, training: bool | None = None) -> Any:
        """`(batch, tokens, decoder width)`: the encoder's tokens of 0..255 images, projected
        to the decoder's width where it differs."""
        memory = self.encoder(self.preprocessor.image_converter(images), training=training)
        if self.encoder_projection is not None:
            memory = self.encoder_projection(memory)
        return memory

    def logits(self, hidden: Any) -> Any:
        """float32 logits of `(batch, T, hidden_dim)` decoder states: the tied head."""
        return self.decoder.token_embedding(hidden, reverse=True)

    def call(self, inputs: dict, training: bool | None = None) -> Any:
        if not isinstance(inputs, dict) or "images" not in inputs or "token_ids" not in inputs:
            raise UserError("ImageCaptioner takes a dict of images, token_ids and "
                            f"padding_mask; got {type(inputs).__name__}")
        memory = self.encode(inputs["images"], training=training)
        decoder_inputs = {"token_ids": inputs["token_ids"], "encoder_sequence": memory}
        if inputs.get("padding_mask") is not None:
            decoder_inputs["padding_mask"] = inputs["padding_mask"]
        return self.logits(self.decoder(decoder_inputs, training=training))

    def _lora_blocks(self) -> list[keras.layers.Layer]:
        """LoRA (`enable_lora`) adapts the encoder's and the decoder's blocks."""
        return [*self.encoder.encoder_blocks, *self.decoder.decoder_blocks]

    def _lora_prepare(self) -> None:
        self.ensure_built()
        self._search_functions = {}  # a compiled search read the kernels without factors

    # ------------------------------------------------------------------ captions
    def caption_ids(self, images: Any, beam_size: int = 4,
                    max_length: int = DEFAULT_MAX_LENGTH, alpha: float = 0.6,
                    batch_size: int = 16) -> list[list[int]]:
        """Each image's caption ids, up to (not including) the end token.

        Args: as `caption`.
        """
        positive_int(batch_size, "batch_size", error=UserError)
        batch = as_image_batch(images, self.encoder.num_channels)
        captions = []
        for start in range(0, len(batch), batch_size):
            tokens, _ = self.search(batch[start:start + batch_size], beam_size, max_length,
                                    alpha)
            captions += [until_end(row, self.end_id) for row in tokens]
        return captions

    def caption(self, images: Any, beam_size: int = 4, max_length: int = DEFAULT_MAX_LENGTH,
                alpha: float = 0.6, batch_size: int = 16) -> list[str]:
        """A caption for each image.

        Args:
            images: one image `(height, width, channels)` or a batch, uint8 or float, values
                0..255, of any size (resized to the encoder's).
            beam_size: hypotheses kept per image (1: greedy search), 1 to 64.
            max_length: most caption tokens, the end token included.
            alpha: the length-penalty exponent of beam search (GNMT's).
            batch_size: images searched at once.

        Returns:
            One string per image (a single image gives a list of one).

        Raises:
            UserError: bad images or settings (the message names them), or a captioner
                without a tokenizer (use `caption_ids`).
        """
        tokenizer = self.preprocessor.tokenizer
        if tokenizer is None:
            raise UserError("this captioner has no tokenizer; use caption_ids")
        ids = self.caption_ids(images, beam_size, max_length, alpha, batch_size)
        # ASCII whitespace, as the exported graph's `tf.strings.strip` cuts it.
        return [text.strip(ASCII_SPACE) for text in tokenizer.decode(ids)]

    # ------------------------------------------------------------------ training
    def compile(self, optimizer: Any = "auto", loss: Any = "auto", weighted_metrics: Any = "auto",
                **kwargs: Any) -> None:
        """`keras.Model.compile` with a captioner's defaults: AdamW at 5e-5, the
        cross-entropy of the logits, and accuracy over the real tokens."""
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(5e-5)
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if weighted_metrics == "auto":
            weighted_metrics = [keras.metrics.SparseCategoricalAccuracy()]
        super().compile(optimizer=optimizer, loss=loss, weighted_metrics=weighted_metrics,
                        **kwargs)

    def fit(self, x: Any = None, y: Any = None, batch_size: int | None = None,
            **kwargs: Any) -> Any:
        """`keras.Model.fit`, also on images (0..255) with their captions (strings) as `y`:
        teacher forcing, the caption's next token at every position, padding weighted 0
        (`CaptionerPreprocessor.pack_pairs`), shuffled every epoch unless `shuffle=False`.
        Compiles with `compile()`'s defaults if not
        compiled."""
        if is_caption_list(y):
            if self.preprocessor.tokenizer is None:
                raise UserError("fit on captions needs the captioner's tokenizer")
            x = self.preprocessor.pairs_dataset(x, list(y), batch_size,
                                                kwargs.get("shuffle", True))
            y = batch_size = None
            kwargs["shuffle"] = False  # the dataset shuffles itself
        if not self.compiled:
            self.compile()
        self._search_functions = {}
        return super().fit(x, y, batch_size=batch_size, **kwargs)
