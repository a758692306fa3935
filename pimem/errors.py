"""Every error pimem raises on purpose derives from :class:`PimemError`; every warning from
:class:`PimemWarning`. The tree below is all of them (``tests/package/test_errors.py`` checks it
against the classes).

Most classes also derive from the built-in exception a caller would expect (in brackets: ``ValueError``
for bad input or arguments, ``KeyError`` for a missing entry, ...), so ``except ValueError`` keeps
working. A path that does not exist or cannot be read raises what ``open`` raises (an ``OSError``).
Other built-in exceptions raised as they are mean a mistake in pimem itself (a broken internal
promise), never bad input; the test lists the few places that raise one and why::

    PimemError
    ├── SessionFormatError (ValueError)         a file that cannot be read as a Pi session (file and line)
    ├── EntryNotFoundError (KeyError)           an entry id not in the session (Pi's "Entry … not found")
    ├── InvalidEntryError (ValueError)          an entry that cannot be appended (no string id, duplicate id)
    ├── SettingsError (ValueError)              a compaction setting Pi rejects
    ├── SettingsFileError (ValueError)          a settings.json that cannot be read (recorded, as Pi records it)
    ├── JavaScriptTypeError (TypeError)         a value on which Pi's own code throws a TypeError
    ├── SummarizationError (RuntimeError)       a summary request failed (Pi's message)
    ├── ConfigurationError (ValueError)         an argument pimem cannot use (unknown option, empty grid, …)
    │   ├── ArgumentTypeError (TypeError)       an argument of a type pimem cannot use
    │   ├── UnknownColumnError (KeyError)       a column a table does not have
    │   └── UnknownPriceError                   a model the price table does not know
    ├── ColumnError (ValueError)                a table's value that cannot be read (names file, row, column)
    ├── CacheCorruptError (RuntimeError)        a summary cache that cannot be read (damaged, not a cache)
    ├── CacheUnavailableError (RuntimeError)    a sound summary cache not usable now (locked, disk full)
    ├── NoRecordingError (LookupError)          a recording holds no summary for this request
    ├── SourceOverwriteError (FileExistsError)  an output path that would overwrite a source session
    ├── UserError                               a mistake of the caller's on the command line (no traceback)
    ├── ModelError (RuntimeError)               the local model could not be installed, started or reached
    ├── NotAChatModelError (TypeError)          a judge (question writer, matcher) that is not a chat model
    ├── JudgeError (RuntimeError)               a chat model's request failed or its answer could not be read
    └── LabelFormatError (ValueError)           a labelled-facts file not in the format (file and line)

    PimemWarning (UserWarning)
    ├── ReplayWarning                           a replay result to read with care (poor token calibration,
    │                                           degenerate settings, a quantity that cannot be known)
    └── SkippedFileWarning                      a file or folder left out of a batch (unreadable, a FIFO)
"""

from __future__ import annotations

__all__ = [
    "PimemError",
    "SessionFormatError",
    "EntryNotFoundError",
    "InvalidEntryError",
    "SettingsError",
    "SettingsFileError",
    "JavaScriptTypeError",
    "SummarizationError",
    "UnknownPriceError",
    "ConfigurationError",
    "ArgumentTypeError",
    "UnknownColumnError",
    "ColumnError",
    "CacheCorruptError",
    "CacheUnavailableError",
    "NoRecordingError",
    "SourceOverwriteError",
    "UserError",
    "ModelError",
    "NotAChatModelError",
    "JudgeError",
    "LabelFormatError",
    "PimemWarning",
    "ReplayWarning",
    "SkippedFileWarning",
]


class PimemError(Exception):
    """Base of every error pimem raises on purpose."""


class SessionFormatError(PimemError, ValueError):
    """A file that cannot be read as a Pi session (the message names file and line)."""


class EntryNotFoundError(PimemError, KeyError):
    """An entry id that is not in the session."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class InvalidEntryError(PimemError, ValueError):
    """An entry that cannot be appended to a session (no string id, or an id already taken)."""


class SettingsError(PimemError, ValueError):
    """A compaction setting Pi's settings manager rejects."""


class SettingsFileError(PimemError, ValueError):
    """A settings file that cannot be read (Pi records it and goes on; so does pimem)."""


class JavaScriptTypeError(PimemError, TypeError):
    """A value on which Pi's own code throws a TypeError (the message follows JavaScript's)."""


class SummarizationError(PimemError, RuntimeError):
    """A summary request failed: an error, a length stop or a tool call (the message is Pi's)."""


class ConfigurationError(PimemError, ValueError):
    """An argument pimem cannot use: an unknown option, an empty grid, an impossible setting."""


class ArgumentTypeError(ConfigurationError, TypeError):
    """An argument of a type pimem cannot use (the message names what was expected and what was given)."""


class UnknownColumnError(ConfigurationError, KeyError):
    """A column a table does not have (the message names the columns it has)."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0]) if self.args else ""


class UnknownPriceError(ConfigurationError):
    """A model the price table does not know (pass ``prices=`` to price it)."""


class ColumnError(PimemError, ValueError):
    """A table's value that cannot be read: the message names the source, the row, the table
    and the column; ``table``, ``column``, ``row`` (position in the table) and ``value`` (the value
    read, when it was read but is not of the column's dtype) say it again."""

    def __init__(self, message: str, *, table: str = "", column: str = "", row: int = -1, value: object = None) -> None:
        super().__init__(message)
        self.table, self.column, self.row, self.value = table, column, row, value


class CacheCorruptError(PimemError, RuntimeError):
    """A summary cache file that cannot be read as one."""


class CacheUnavailableError(PimemError, RuntimeError):
    """A summary cache that cannot be used now (locked by other processes past the wait, disk full,
    no permission); the file itself is not damaged and is never moved aside."""


class NoRecordingError(PimemError, LookupError):
    """A recording holds no summary for the request asked."""


class SourceOverwriteError(PimemError, FileExistsError):
    """An output path that is a source session file (sources are never written)."""


class UserError(PimemError):
    """A mistake of the caller's (bad argument, unreadable file): reported without a traceback."""


class ModelError(PimemError, RuntimeError):
    """The local model could not be installed, verified, started or reached."""


class NotAChatModelError(PimemError, TypeError):
    """A judge (or question writer, or matcher) that is not a chat model."""


class JudgeError(PimemError, RuntimeError):
    """A chat model's request failed or its answer could not be read."""


class LabelFormatError(PimemError, ValueError):
    """A labelled-facts file that does not follow the format (the message names file and line)."""


class PimemWarning(UserWarning):
    """Base of every warning pimem issues on purpose."""


class ReplayWarning(PimemWarning):
    """A replay whose result must be read with care (the message says why)."""


class SkippedFileWarning(PimemWarning):
    """A file or folder left out of a batch (unreadable, not a regular file); the rest goes on."""
