"""What a model's arguments may be, checked before its layers are made: sizes whose weights
fit in the machine's memory, and class names that are distinct fields of one line.

Sizes: one function per family adds up the weights its arguments imply, part by part, and
hands them to `zoo.training.memory_bounds.check_allocation`, which refuses in one line a total
above the machine's memory. The family's constructor calls it, so every route to a model
meets it: a hub config (`image_size: 1000000`), `with_new_head`/`reset_classifier(num_classes=
10**9)`, `zoo.load` of a saved config, `from_preset(..., num_classes=...)`.

Names: `zoo classify` prints `path<TAB>label<TAB>probability` lines and the pipelines write
them to TSV files; a label holding a tab or a line end breaks those lines, and two classes of
one name make a label that does not say which class won. `check_class_names` refuses them in
one line; `distinct_class_names` makes a converted checkpoint's labels distinct (ImageNet's
`crane` names a bird and a machine) by adding the class id to each repeat.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from zoo.training.errors import UserError
from zoo.training.memory_bounds import check_allocation

FLOAT32 = 4


def check_vit_size(image_shape: tuple[int, int], patch_size: int, num_classes: int,
                   hidden_dim: int, num_layers: int, intermediate_dim: int,
                   num_channels: int = 3, distillation_token: bool = False,
                   representation_size: int | None = None) -> int:
    """Refuses a Vision Transformer whose float32 weights would not fit in memory.

    Args:
        image_shape: `(height, width)`, the image size the model computes on.
        patch_size, num_classes, hidden_dim, num_layers, intermediate_dim, num_channels,
            distillation_token, representation_size: as `VisionTransformer`'s.

    Returns:
        The bytes of the weights (estimated: the encoder's, the embeddings' and the head's).

    Raises:
        zoo.UserError: more than the machine's memory; names the largest part's sizes.

    Example:
        >>> check_vit_size((224, 224), 16, 1000, 768, 12, 3072) // 10**6  # ViT-B/16
        345
    """
    height, width = image_shape
    tokens = (math.ceil(height / patch_size) * math.ceil(width / patch_size) + 1
              + int(bool(distillation_token)))
    head_input = representation_size or hidden_dim
    parts = {
        f"the position embedding (image_size=({height}, {width}) / patch_size={patch_size} "
        f"= {tokens} tokens x hidden_dim={hidden_dim})": tokens * hidden_dim,
        f"the patch embedding (patch_size={patch_size} squared x num_channels="
        f"{num_channels} x hidden_dim={hidden_dim})":
            patch_size * patch_size * num_channels * hidden_dim,
        f"the encoder (num_layers={num_layers} x hidden_dim={hidden_dim}, "
        f"intermediate_dim={intermediate_dim})":
            num_layers * (4 * hidden_dim * hidden_dim + 2 * hidden_dim * intermediate_dim),
        f"the classifier head (num_classes={num_classes} x {head_input} inputs)":
            num_classes * head_input + (representation_size or 0) * hidden_dim,
    }
    return check_allocation({name: FLOAT32 * n for name, n in parts.items()},
                            "the Vision Transformer")


# Characters that would break a `path<TAB>label<TAB>probability` line.
FORBIDDEN = {"\t": "a tab", "\n": "a line end", "\r": "a line end"}


def check_class_names(names: Sequence[str] | None, num_classes: int,
                      what: str = "class_names") -> None:
    """Refuses names (None passes) that are not `num_classes` names, that repeat, or that
    hold a tab or a line end (or are empty).

    Raises:
        zoo.UserError: one line naming `what`, the name and its index.

    Example:
        >>> check_class_names(["cat", "dog"], 2)
    """
    if names is None:
        return
    if len(names) != num_classes:
        raise UserError(f"{what} has {len(names)} names but num_classes is {num_classes}")
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        name = str(name)
        if not name:
            raise UserError(f"{what}[{index}] is empty; every class needs a name")
        for char, said in FORBIDDEN.items():
            if char in name:
                raise UserError(f"{what}[{index}] {name!r} holds {said}, which would break "
                                "the label lines (path<TAB>label<TAB>probability); rename it")
        if name in seen:
            raise UserError(f"{what} names {name!r} twice (classes {seen[name]} and {index}); "
                            "every class needs its own name")
        seen[name] = index


def distinct_class_names(names: Sequence[str]) -> list[str]:
    """`names` with each repeat given its class id, `crane (517)`; tabs and line ends become
    spaces.

    Example:
        >>> distinct_class_names(["crane", "cat", "crane"])
        ['crane', 'cat', 'crane (2)']
    """
    out: list[str] = []
    seen: set[str] = set()
    for index, name in enumerate(names):
        name = " ".join(str(name).replace("\t", " ").splitlines()) or f"class_{index}"
        if name in seen:
            name = f"{name} ({index})"
        seen.add(name)
        out.append(name)
    return out
