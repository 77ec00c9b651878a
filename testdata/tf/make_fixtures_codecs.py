"""Writes the image-codec fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_codecs.py

A serving-style function: web-safe base64 text in (a string feed, as TF Serving's JSON API passes encoded
images), `DecodeBase64` -> `DecodePng`/`DecodeImage` -> a small Keras CNN, plus `DecodePng` of PNG
constants of every kind libpng reads (bit depths 1, 2, 4, 8 and 16; grey, grey+alpha, RGB, RGBA, palette;
`tRNS` keys and palette alphas; Adam7 interlacing; all five scanline filters), each decoded with channels
0, 1, 3 and 4 and as uint16, fetched as int32 so the expected values travel in safetensors. The PNG files are written
here byte by byte (TensorFlow's own `encode_png` writes only a few of these kinds). Cases in README.md.
"""

import base64
import os
import struct
import sys
import zlib

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_strings import write_string_fixture  # noqa: E402
from make_fixtures_tf2 import run_fixtures, OUT, write  # noqa: E402
from tf_harness import export  # noqa: E402

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def filtered(rows, bpp, rng):
    """Each packed row behind a random filter type (0-4), filtered as the PNG spec says."""
    out, prev = b"", None
    for row in rows:
        kind = int(rng.integers(0, 5))
        line = bytearray()
        for x, v in enumerate(row):
            a = row[x - bpp] if x >= bpp else 0
            b = prev[x] if prev is not None else 0
            c = prev[x - bpp] if prev is not None and x >= bpp else 0
            pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
            line.append((v - pred) & 0xFF)
        out += bytes([kind]) + bytes(line)
        prev = row
    return out


def pack(samples, depth):
    """One row of samples (ints) at `depth` bits, big-endian, padded to a byte."""
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    bits = "".join(format(s, f"0{depth}b") for s in samples)
    bits += "0" * (-len(bits) % 8)
    return bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))


def make_png(img, depth, color, rng, interlace=False, extra=()):
    """`img`: [h, w, stored channels] samples."""
    h, w, ch = img.shape
    bpp = max(1, ch * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    data = b""
    for x0, y0, dx, dy in passes:
        sub = img[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        rows = [pack([int(s) for s in r.reshape(-1)], depth) for r in sub]
        data += filtered(rows, bpp, rng)
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 1 if interlace else 0)
    body = b"".join(chunk(k, b) for k, b in extra)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + body + chunk(b"IDAT", zlib.compress(data)) + chunk(b"IEND", b"")


def pngs(rng):
    """(name, bytes) of every kind."""
    out = []
    for depth in (1, 2, 4, 8, 16):
        g = rng.integers(0, 1 << depth, (5, 7, 1))
        out.append((f"grey{depth}", make_png(g, depth, 0, rng)))
    key = rng.integers(0, 65536, (4, 6, 1))
    out.append(("grey16_trns", make_png(key, 16, 0, rng, extra=[(b"tRNS", struct.pack(">H", int(key[1, 2, 0])))])))
    out.append(("grey_alpha8", make_png(rng.integers(0, 256, (6, 5, 2)), 8, 4, rng)))
    out.append(("grey_alpha16_interlaced", make_png(rng.integers(0, 65536, (9, 11, 2)), 16, 4, rng, interlace=True)))
    rgb = rng.integers(0, 256, (7, 9, 3))
    rgb[2, 3] = rgb[4, 4]  # two pixels equal to the tRNS key
    out.append(("rgb8_trns", make_png(rgb, 8, 2, rng, extra=[(b"tRNS", struct.pack(">HHH", *map(int, rgb[4, 4])))])))
    out.append(("rgb16", make_png(rng.integers(0, 65536, (5, 6, 3)), 16, 2, rng)))
    out.append(("rgba8_interlaced", make_png(rng.integers(0, 256, (13, 10, 4)), 8, 6, rng, interlace=True)))
    out.append(("rgba16", make_png(rng.integers(0, 65536, (3, 4, 4)), 16, 6, rng)))
    for depth in (1, 2, 4, 8):
        n = 1 << depth
        plte = bytes(rng.integers(0, 256, 3 * n).astype(np.uint8))
        idx = rng.integers(0, n, (6, 9, 1))
        out.append((f"palette{depth}", make_png(idx, depth, 3, rng, extra=[(b"PLTE", plte)])))
    plte = bytes(rng.integers(0, 256, 3 * 16).astype(np.uint8))
    alphas = bytes(rng.integers(0, 256, 11).astype(np.uint8))  # shorter than the palette: the rest opaque
    idx = rng.integers(0, 16, (8, 8, 1))
    out.append(("palette4_trns_interlaced", make_png(idx, 4, 3, rng, interlace=True,
                                                     extra=[(b"PLTE", plte), (b"tRNS", alphas)])))
    return out


def codecs_png_kinds():
    """`DecodePng` of every kind of PNG with channels 0, 1, 3 and 4 (uint8; TensorFlow refuses 2) and 0 (uint16), fetched as int32."""
    rng = np.random.default_rng(401)
    files = pngs(rng)

    @tf.function(input_signature=[])
    def decode_all():
        outs = []
        for _, data in files:
            c = tf.constant(data)
            for ch in (0, 1, 3, 4):
                outs.append(tf.cast(tf.io.decode_png(c, channels=ch), tf.int32))
            outs.append(tf.cast(tf.io.decode_png(c, dtype=tf.uint16), tf.int32))
        return outs

    cf = decode_all.get_concrete_function()
    write("codecs_png_kinds", cf, [], {}, 1)


def codecs_base64_serving():
    """A serving signature: web-safe base64 PNG text (a string feed, as TF Serving's JSON API passes encoded
    images) -> `DecodeBase64` -> `DecodeImage` (RGB, float32 in [0, 1]) -> a convolution with fixed weights,
    ReLU, mean pooling and softmax; `DecodePng` (grey) of the same bytes; the length of their padded
    `EncodeBase64`."""
    rng = np.random.default_rng(402)
    img = rng.integers(0, 256, (8, 8, 3))
    text = base64.urlsafe_b64encode(make_png(img, 8, 2, rng)).decode().rstrip("=")
    kernel = tf.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    dense = tf.constant(rng.standard_normal((4, 3)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="image_b64")])
    def serve(image_b64):
        raw = tf.io.decode_base64(image_b64)
        x = tf.io.decode_image(raw, channels=3, dtype=tf.float32, expand_animations=False)
        h = tf.nn.relu(tf.nn.conv2d(x[None], kernel, 1, "VALID"))
        probs = tf.nn.softmax(tf.reduce_mean(h, axis=[1, 2]) @ dense)
        grey = tf.cast(tf.io.decode_png(raw, channels=1), tf.int32)
        return probs, grey, tf.strings.length(tf.io.encode_base64(raw, pad=True))

    cf = serve.get_concrete_function()
    fetch = [t.name for t in cf.outputs]
    gd = export(cf.graph.as_graph_def(), OUT, "codecs_base64_serving")
    write_string_fixture("codecs_base64_serving", gd, {}, {"image_b64": text}, fetch, [])


FIXTURES = [codecs_png_kinds, codecs_base64_serving]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
