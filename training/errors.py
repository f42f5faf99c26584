"""`UserError`: the one exception type for a mistake in what a user gave (the zoo's, defined
here because `training` may not import `zoo`; `zoo.UserError` is the same class)."""

from __future__ import annotations


class UserError(ValueError):
    """A mistake in what the user gave, not a bug: a bad flag or argument value, a missing,
    unreadable or malformed file, a model of the wrong kind, an unknown model name, a bad hub
    handle or URL, an image that cannot be decoded, a run folder from another recipe.

    The message is one line that names the bad value, file or URL and what was expected
    ("... must be ...; got ..."). The `zoo` command prints it as `zoo: error: <message>` and
    exits with status 2; any other exception reaching it is the zoo's bug and keeps its
    traceback. It subclasses ValueError, so `except ValueError` (Keras's convention for bad
    arguments) still catches it.

    Raise it where the bad input is first seen, in the function that reads or checks it; a
    ValueError raised by Keras or TensorFlow stays a ValueError (a bug of the caller that passed
    the value on unchecked).
    """
