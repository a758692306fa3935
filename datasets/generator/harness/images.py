"""Small deterministic PNG images for user messages (screenshots attached to a prompt)."""

from __future__ import annotations

import base64
import random
import struct
import zlib
from typing import Callable


def tiny_png(width: int, height: int, pixel: Callable[[int, int], tuple[int, int, int]]) -> str:
    """A valid RGB PNG, base64-encoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode("ascii")


def terminal_screenshot(rng: random.Random, width: int = 48, height: int = 28,
                        accent: tuple[int, int, int] = (220, 60, 60)) -> str:
    """A small picture of a dark terminal with a few coloured text lines."""
    lines = []
    y = 3
    while y < height - 3:
        lines.append((y, rng.randint(8, width - 4), accent if rng.random() < 0.3 else (200, 200, 200)))
        y += rng.choice((3, 4))

    def pixel(x: int, yy: int) -> tuple[int, int, int]:
        if yy < 2:
            return (60, 60, 70)
        for ly, length, colour in lines:
            if yy == ly and 2 <= x < length and (x * 7 + yy) % 5:
                return colour
        return (24, 26, 33)

    return tiny_png(width, height, pixel)
