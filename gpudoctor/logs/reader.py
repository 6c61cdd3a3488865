"""Read logs as a stream of byte chunks: files, ``-`` for stdin, gzip, UTF-16.

Chunks stay bytes: the matcher searches them as bytes and decodes (with replacement, so
non-UTF-8 bytes never fail) only the few lines it looks at. UTF-16 logs (Windows PowerShell
redirection) are transcoded to UTF-8 on the way. Nothing is split into lines here and nothing
is held beyond one chunk, so a multi-GB log costs constant memory.
"""

from __future__ import annotations

import codecs
import gzip
import io
import sys
import zlib
from typing import BinaryIO, Iterator

CHUNK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


class LogInputError(OSError):
    """A log could not be read; the message is one line, fit for the user."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, (gzip.BadGzipFile, zlib.error, EOFError)):
        return f"not a valid gzip file ({exc})" if str(exc) else "truncated or corrupt gzip file"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _open_binary(path: str) -> BinaryIO:
    if path == "-":
        stdin = sys.stdin.buffer
        # peek() is needed to sniff gzip; a test's BytesIO stand-in lacks it.
        return stdin if hasattr(stdin, "peek") else io.BufferedReader(stdin)  # type: ignore[arg-type]
    return open(path, "rb")


def _maybe_gunzip(raw: BinaryIO, path: str) -> BinaryIO:
    # Detect by content, not by name: logs are often gzipped without the suffix (and vice versa).
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if head == _GZIP_MAGIC or (not head and path.endswith(".gz")):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _utf16_decoder(first: bytes) -> codecs.IncrementalDecoder | None:
    # UTF-16 logs come from Windows PowerShell redirection (`python train.py > log.txt`). A BOM
    # alone is not proof (b"\\xff\\xfe" also starts latin-1 junk): log text is mostly ASCII, so
    # UTF-16 shows NUL high bytes.
    sample = first[2:130]
    if first.startswith(codecs.BOM_UTF16_LE):
        high = sample[1::2]
    elif first.startswith(codecs.BOM_UTF16_BE):
        high = sample[0::2]
    else:
        return None
    if high and high.count(0) * 2 >= len(high):
        return codecs.getincrementaldecoder("utf-16")(errors="replace")
    return None


def iter_byte_chunks(path: str, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """One log as UTF-8-compatible byte chunks; raises LogInputError (one line) if unreadable."""
    name = "<stdin>" if path == "-" else path
    try:
        raw = _open_binary(path)
    except OSError as exc:
        raise LogInputError(f"{name}: {_describe(exc)}") from None
    try:
        stream = _maybe_gunzip(raw, path)
        first = True
        utf16 = None
        while True:
            data = stream.read(chunk_bytes)
            if first:
                utf16, first = _utf16_decoder(data), False
            if utf16 is not None:
                if not data:
                    yield utf16.decode(b"", final=True).encode("utf-8")
                    return
                yield utf16.decode(data).encode("utf-8")
                continue
            if not data:
                return
            yield data
    except (OSError, EOFError, zlib.error) as exc:
        raise LogInputError(f"{name}: {_describe(exc)}") from None
    finally:
        if path != "-":
            raw.close()


def check_readable(path: str) -> None:
    """Fail early (before any output) for a path that cannot be opened."""
    if path == "-":
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise LogInputError(f"{path}: {_describe(exc)}") from None
