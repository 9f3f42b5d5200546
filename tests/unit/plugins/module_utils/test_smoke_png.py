# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import struct
import zlib

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke_png import (
    PNG_SIGNATURE, checker_pixels, png_bytes, png_data_url)


def read_png(data):
    """A strict reader for what the generator writes: checks the signature, every chunk's CRC,
    the chunk order, and decodes the pixels back into rows of RGB tuples."""
    assert data[:8] == PNG_SIGNATURE
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        pos += 12 + length
    assert pos == len(data)
    kinds = [chunk[0] for chunk in chunks]
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, colour, compression, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    rows = []
    for y in range(height):
        line = raw[y * stride:(y + 1) * stride]
        assert line[0] == 0
        rows.append([tuple(line[1 + 3 * x:4 + 3 * x]) for x in range(width)])
    return width, height, rows


def test_generated_png_is_valid_and_holds_the_pixels_given():
    rows = [[(255, 0, 0), (0, 255, 0), (0, 0, 255)], [(1, 2, 3), (4, 5, 6), (7, 8, 9)]]
    width, height, decoded = read_png(png_bytes(rows))
    assert (width, height) == (3, 2)
    assert decoded == rows


def test_a_corrupted_png_is_caught_by_the_reader():
    data = bytearray(png_bytes(checker_pixels(2)))
    data[20] ^= 0xFF  # inside IHDR's data: its CRC no longer matches
    with pytest.raises(AssertionError):
        read_png(bytes(data))


def test_data_url_is_a_base64_png_of_the_asked_size():
    url = png_data_url(8)
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    width, height, rows = read_png(base64.b64decode(url[len(prefix):]))
    assert (width, height) == (8, 8)
    assert rows[0][0] != rows[0][1]  # a checkerboard, not a flat picture
    assert len(url) < 400  # small enough for a smoke request


@pytest.mark.parametrize("size", [0, 257, -1])
def test_sizes_out_of_range_are_refused(size):
    with pytest.raises(ValueError):
        png_data_url(size)


def test_ragged_rows_are_refused():
    with pytest.raises(ValueError):
        png_bytes([[(0, 0, 0)], [(0, 0, 0), (1, 1, 1)]])
