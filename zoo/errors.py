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
(`zoo.training.disk_faults`: `cannot write PATH: No space left on device`) and for a
ModuleNotFoundError that names a third-party package to install. Everything else, a plain
ValueError from inside Keras or a missing module of the zoo's own included, is the zoo's bug
and keeps its traceback.

The class is defined in `zoo.training.errors` (the training kit reports bad data files too, and
may not import `zoo`); this module is its public home.
"""

from __future__ import annotations

from zoo.training.errors import UserError

# OS errors about a path the user named: one line, like a UserError.
FILE_ERRORS: tuple[type[OSError], ...] = (
    FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)

__all__ = ["FILE_ERRORS", "UserError"]
