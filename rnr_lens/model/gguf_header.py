"""A GGUF file from outside: its header walked and bounded before transformers reads it.

transformers' GGUF reader (``gguf.GGUFReader``) builds a Python object for every entry of every
metadata array, so a file of a few hundred bytes whose token array claims 10**8 entries took
gigabytes (issue 73). :func:`check_gguf` walks the header with seeks alone, holding nothing, and
refuses in one line a file that is not GGUF, ends inside its header, or holds more keys, arrays
entries, tensors or numbers than :data:`CAPS` allow; every model that ships as GGUF passes
(Gemma 3's vocabulary, the largest, has 262,144 tokens).

Example:
    >>> import tempfile, struct, pathlib
    >>> bomb = pathlib.Path(tempfile.mkdtemp()) / "bomb.gguf"
    >>> key = b"tokenizer.ggml.tokens"
    >>> bomb.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, 10**8))
    69
    >>> check_gguf(bomb)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    rnr_lens.errors.RnrLensError: .../bomb.gguf: its metadata array 'tokenizer.ggml.tokens' has 100,000,000 entries, over the cap of 4,000,000; ...
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import BinaryIO

from rnr_lens.core.untrusted import quoted
from rnr_lens.errors import RnrLensError

CAPS = {"keys": 10_000, "array entries": 4_000_000, "tensors": 100_000, "string bytes": 1 << 20, "dimensions": 8}
"""The most a GGUF header may hold: metadata keys, entries of one array, tensors, bytes of one
string (a key, a token, a chat template) and dimensions of one tensor."""
NUMBERS_PER_BYTE = 8
"""A tensor's numbers per byte of the file at most (the densest quantization packs about 1.6
bits a number; a header claiming more numbers than that describes data the file does not hold)."""
_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
"""GGUF's fixed-size value types by their type number (8 is a string, 9 an array)."""
_STRING, _ARRAY = 8, 9


class _Header:
    def __init__(self, f: BinaryIO, path: Path, size: int) -> None:
        self.f, self.path, self.size = f, path, size

    def refuse(self, why: str) -> RnrLensError:
        return RnrLensError(f"{self.path}: {why}; it is not a GGUF file rnr_lens reads (re-download it, or pass a Hugging Face folder)")

    def unpack(self, fmt: str) -> tuple[int, ...]:
        raw = self.f.read(struct.calcsize(fmt))
        if len(raw) < struct.calcsize(fmt):
            raise self.refuse("it ends inside its header (truncated)")
        return struct.unpack(fmt, raw)

    def skip(self, n: int) -> None:
        if self.f.tell() + n > self.size:
            raise self.refuse("it ends inside its header (truncated)")
        self.f.seek(n, 1)

    def string(self, what: str, keep: bool = False) -> str:
        (n,) = self.unpack("<Q")
        if n > CAPS["string bytes"]:
            raise self.refuse(f"{what} is a string of {n:,} bytes, over the cap of {CAPS['string bytes']:,}")
        if keep:
            raw = self.f.read(n)
            if len(raw) < n:
                raise self.refuse("it ends inside its header (truncated)")
            return raw.decode("utf-8", errors="replace")
        self.skip(n)
        return ""

    def value(self, kind: int, key: str, depth: int = 0) -> None:
        if kind in _SCALAR_BYTES:
            self.skip(_SCALAR_BYTES[kind])
        elif kind == _STRING:
            self.string(f"the value of {quoted(key)}")
        elif kind == _ARRAY and depth == 0:
            item, n = self.unpack("<IQ")
            if n > CAPS["array entries"]:
                raise self.refuse(f"its metadata array {quoted(key)} has {n:,} entries, over the cap of {CAPS['array entries']:,}")
            if item in _SCALAR_BYTES:
                self.skip(_SCALAR_BYTES[item] * n)
            else:
                for _ in range(n):
                    self.value(item, key, depth + 1)
        else:
            raise self.refuse(f"the value of {quoted(key)} has type {kind}, which GGUF metadata does not")


def check_gguf(path: str | Path) -> None:
    """Refuse, in one line, a GGUF file whose header passes :data:`CAPS` (see the module)."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        header = _Header(f, path, size)
        if f.read(4) != b"GGUF":
            raise header.refuse("it does not begin with GGUF's magic bytes")
        version, tensors, keys = header.unpack("<IQQ")
        if version not in (2, 3):
            raise header.refuse(f"it is GGUF version {version}; rnr_lens reads versions 2 and 3")
        for count, what in ((keys, "keys"), (tensors, "tensors")):
            if count > CAPS[what]:
                raise header.refuse(f"it has {count:,} metadata {what}, over the cap of {CAPS[what]:,}")
        for _ in range(keys):
            key = header.string("a metadata key", keep=True)
            (kind,) = header.unpack("<I")
            header.value(kind, key)
        numbers = 0
        for _ in range(tensors):
            name = header.string("a tensor's name", keep=True)
            (dims,) = header.unpack("<I")
            if dims > CAPS["dimensions"]:
                raise header.refuse(f"tensor {quoted(name)} has {dims} dimensions, over the cap of {CAPS['dimensions']}")
            numbers += math.prod(header.unpack(f"<{dims}Q"))
            header.skip(12)  # its type (4 bytes) and data offset (8)
    if numbers > NUMBERS_PER_BYTE * size:
        raise header.refuse(f"its tensors claim {numbers:,} numbers, more than a file of {size:,} bytes can hold")
