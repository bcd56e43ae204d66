#!/usr/bin/env python3
"""png_palette - rewrite an 8-bit RGB/RGBA PNG as an indexed one, to keep
committed screenshots small.

usage: png_palette.py IN.png OUT.png

The 256 most frequent colours become the palette; a pixel of any other
colour (on these pages, a few anti-aliased edge pixels: 0.1% to 0.3% of
them) takes the palette's nearest colour (squared RGB distance). Rows
are written unfiltered, compressed with zlib level 9; alpha is dropped
(headless Chromium's screenshots are opaque). Prints the sizes and the
share of pixels changed. Standard library only: the PNG is read by
tests/html/check_html.py's reader.
"""
import collections
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "html"))
from check_html import png_pixels  # noqa: E402


def chunk(kind, body):
    c = struct.pack(">I", len(body)) + kind + body
    return c + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    src, dst = sys.argv[1:]
    w, h, bpp, rows = png_pixels(src)
    count = collections.Counter()
    for r in rows:
        for x in range(0, w * bpp, bpp):
            count[r[x:x + 3]] += 1
    pal = [c for c, _ in count.most_common(256)]
    index = {c: i for i, c in enumerate(pal)}
    moved = 0
    for c, n in count.items():
        if c in index:
            continue
        index[c] = min(range(len(pal)), key=lambda i: sum(
            (pal[i][k] - c[k]) ** 2 for k in range(3)))
        moved += n
    raw = bytearray()
    for r in rows:
        raw.append(0)
        raw.extend(index[r[x:x + 3]] for x in range(0, w * bpp, bpp))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(
        ">IIBBBBB", w, h, 8, 3, 0, 0, 0)) + chunk(
        b"PLTE", b"".join(pal)) + chunk(
        b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b"")
    with open(dst, "wb") as f:
        f.write(png)
    print("%s: %dx%d, %d colours, %d -> %d bytes, %.2f%% of pixels moved "
          "to the nearest palette colour" % (dst, w, h, len(count),
                                             os.path.getsize(src), len(png),
                                             100.0 * moved / (w * h)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
