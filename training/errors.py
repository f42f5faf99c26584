"""The zoo's error type for a user's mistake, `UserError`, and how the `zoo` command tells
one from the zoo's bug.

    try:
        zoo.load("translator-typo")
    except zoo.UserError as error:
        print(error)  # unknown model 'translator-typo'; ...

A `UserError` (a ValueError) says the user gave something wrong: a flag or argument value, a
file, a model name or kind, a hub handle or URL, an image. The `zoo` command prints its one
line and exits with status 2, as it does for the file errors in `FILE_ERRORS` (a path that is
missing, in the way or unreadable; the message names it), for a full or read-only disk
(`zoo.training.files.disk_faults`: `cannot write PATH: No space left on device`) and for a
ModuleNotFoundError that names a third-party package to install. Everything else, a plain
ValueError from inside Keras or a missing module of the zoo's own included, is the zoo's bug
and keeps its traceback.

It sits at the bottom of the training kit (tests/zoo/test_import_direction.py), below
`zoo.training.files` and the rest of `zoo.training`, which report a user's mistake (a damaged
JSON file, an unsafe archive, a bad data file) with this one class too; everything in `zoo`
above imports it from here, and users as `zoo.UserError`.
"""

from __future__ import annotations

__all__ = ["FILE_ERRORS", "UserError"]


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


# OS errors about a path the user named: one line, like a UserError.
FILE_ERRORS: tuple[type[OSError], ...] = (
    FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)
