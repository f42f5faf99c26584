"""Read-only views of a task's parts: the names a model had before the backbone/task split.

A task whose layers moved into its backbone (issue 60) keeps their old attribute names as
properties that read the part (`translator.encoder_blocks` is
`translator.backbone.encoder_blocks`), so that callers of the old names go on working.
"""

from __future__ import annotations

from typing import Mapping, Sequence


def part_view(part: str, name: str) -> property:
    """A read-only property that returns `getattr(getattr(model, part), name)`."""
    return property(lambda model: getattr(getattr(model, part), name),
                    doc=f"The {part}'s `{name}` (read-only).")


def add_part_views(cls: type, part: str, names: Mapping[str, str] | Sequence[str]) -> None:
    """Gives `cls` a `part_view` for each name: `{old_name: part_name}`, or names that the
    part has under the same name."""
    pairs = names.items() if isinstance(names, Mapping) else ((n, n) for n in names)
    for old, new in pairs:
        setattr(cls, old, part_view(part, new))
