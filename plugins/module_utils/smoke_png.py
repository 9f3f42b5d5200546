# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""A tiny PNG for the vision smoke request, made with the standard library alone.

The smoke test sends one small picture as an ``image_url`` data URL to check that the vision
tower answers. No image library is needed on the controller: a PNG is a signature followed by
chunks (length, type, data, CRC-32), and its pixels are zlib-compressed scanlines, each prefixed
with a filter byte.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    """One PNG chunk: big-endian length, 4-byte type, data, CRC-32 over type and data."""
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def checker_pixels(size, first=(220, 40, 40), second=(40, 40, 220)):
    """Rows of RGB triples: a checkerboard of two colours, ``size`` by ``size`` pixels."""
    return [[first if (x + y) % 2 == 0 else second for x in range(size)] for y in range(size)]


def png_bytes(rows):
    """Encode rows of (r, g, b) tuples (0-255) as an 8-bit truecolour PNG."""
    if not rows or not rows[0]:
        raise ValueError("a PNG needs at least one pixel")
    height, width = len(rows), len(rows[0])
    if any(len(row) != width for row in rows):
        raise ValueError("every row needs the same number of pixels")
    raw = bytearray()
    for row in rows:
        raw.append(0)  # filter type 0 (None) for each scanline
        for red, green, blue in row:
            raw.extend((red, green, blue))
    # width, height, bit depth 8, colour type 2 (RGB), compression 0, filter 0, no interlace
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(bytes(raw), 9))
            + _chunk(b"IEND", b""))


def png_data_url(size=8):
    """A ``data:image/png;base64,...`` URL of a ``size`` by ``size`` checkerboard."""
    size = int(size)
    if not 1 <= size <= 256:
        raise ValueError("size must be from 1 to 256 pixels, not %r" % size)
    return "data:image/png;base64," + base64.b64encode(png_bytes(checker_pixels(size))).decode("ascii")
