"""Writing outputs atomically: a temporary file in the target folder, then a rename."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator

from pimem.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success it replaces ``path`` in one rename.

    If the block raises, the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a DataFrame as CSV or Parquet (by suffix), atomically."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".csv":
        with atomic_open(target, "w") as f:
            df.to_csv(f, index=False)
    elif suffix == ".parquet":
        with atomic_open(target, "wb") as f:
            _for_parquet(df).to_parquet(f, index=False)
    else:
        raise ConfigurationError(f"unsupported table format {suffix!r} for {target} (use .csv or .parquet)")


def _for_parquet(df: pd.DataFrame) -> pd.DataFrame:
    """Parquet needs one type per column: turn mixed object columns into strings."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            kinds = {type(v) for v in out[col].dropna()}
            if len(kinds) > 1 or kinds & {dict, list, tuple}:
                out[col] = out[col].map(lambda v: None if v is None else str(v))
    return out
