"""Writes the GIF and BMP decoding fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_gif_bmp.py

Needs Pillow besides TensorFlow. GIFs come from Pillow (animated with frame optimisation: later frames cropped
to what changed, unchanged pixels transparent; interlaced; per-frame palettes; grey) and from a small writer
here for what Pillow does not write (a later frame larger than the first, frames partly off the canvas, a
first frame that does not cover the canvas, a transparent index outside the table, disposal methods, an
extension before the trailer). BMPs come from Pillow (24-bit with row padding, 32-bit, 8-bit palette and grey)
and from rewriting one's height to be negative (rows stored top-down). Cases in README.md.
"""

import io
import os
import struct
import sys

import numpy as np
import tensorflow as tf
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_tf2 import run_fixtures, write  # noqa: E402


def picture(rng, h, w):
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), (x * y * 7) % 256], -1)
    img = img + rng.normal(0, 20, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def pil_gif(frames, **kw):
    b = io.BytesIO()
    ims = [Image.fromarray(f) for f in frames]
    ims[0].save(b, "GIF", save_all=len(ims) > 1, append_images=ims[1:], **kw)
    return b.getvalue()


def lzw_plain(pixels):
    """8-bit LZW that never grows past 9 bits: a clear code before every 254 pixels."""
    codes = []
    for i in range(0, len(pixels), 254):
        codes.append(256)
        codes.extend(int(p) for p in pixels[i:i + 254])
    codes.append(257)
    acc, n, out = 0, 0, bytearray()
    for c in codes:
        acc |= c << n
        n += 9
        while n >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            n -= 8
    if n:
        out.append(acc & 0xFF)
    data = bytearray([8])
    for i in range(0, len(out), 255):
        data.append(len(out[i:i + 255]))
        data += out[i:i + 255]
    data.append(0)
    return bytes(data)


def table_flag(table):
    return 0x80 | (int(np.log2(len(table))) - 1)


def hand_gif(screen, global_table, frames, tail=b""):
    """frames: dicts with left, top, pixels (2-D indices), local (table or None), transparent, disposal."""
    out = bytearray(b"GIF89a")
    out += struct.pack("<HHBBB", screen[1], screen[0], table_flag(global_table) if global_table is not None else 0, 0, 0)
    if global_table is not None:
        out += bytes(np.asarray(global_table, np.uint8).ravel())
    for f in frames:
        t = f.get("transparent")
        disposal = f.get("disposal", 0)
        out += bytes([0x21, 0xF9, 4, (disposal << 2) | (1 if t is not None else 0), 0, 0, t or 0, 0])
        px = np.asarray(f["pixels"], np.uint8)
        local = f.get("local")
        out += bytes([0x2C]) + struct.pack("<HHHH", f["left"], f["top"], px.shape[1], px.shape[0])
        out.append(table_flag(local) if local is not None else 0)
        if local is not None:
            out += bytes(np.asarray(local, np.uint8).ravel())
        out += lzw_plain(px.ravel())
    out += tail
    out.append(0x3B)
    return bytes(out)


def gifs(rng):
    out = []
    pic = picture(rng, 21, 27)
    moving = []
    for k in range(4):
        f = pic.copy()
        f[3 + 2 * k:9 + 2 * k, 5 + 3 * k:12 + 3 * k] = [255 - 40 * k, 30 * k, 200]
        moving.append(f)
    out.append(("pil_animated_optimized", pil_gif(moving, optimize=True, duration=50, loop=0)))
    out.append(("pil_animated_disposal2", pil_gif(moving[:3], optimize=True, disposal=2, duration=50)))
    out.append(("pil_still_interlaced", pil_gif([picture(rng, 19, 16)], interlace=True)))
    out.append(("pil_still_not_interlaced", pil_gif([picture(rng, 17, 23)], interlace=False)))
    grey = np.repeat(picture(rng, 12, 14)[..., :1], 3, -1)
    out.append(("pil_grey", pil_gif([grey])))
    a = Image.fromarray(picture(rng, 15, 15)).quantize(16)
    b = Image.fromarray(255 - picture(rng, 15, 15)).quantize(8)
    buf = io.BytesIO()
    a.save(buf, "GIF", save_all=True, append_images=[b], optimize=False)
    out.append(("pil_local_palettes", buf.getvalue()))
    table = rng.integers(0, 256, (16, 3))
    local = rng.integers(0, 256, (4, 3))
    small = rng.integers(0, 16, (5, 6))
    big = rng.integers(0, 16, (9, 11))
    hand = hand_gif((6, 8), table, [
        {"left": 2, "top": 1, "pixels": small, "transparent": 3},             # frame 0 partial: black around it
        {"left": 0, "top": 0, "pixels": big, "transparent": 7, "disposal": 2},  # larger than the screen and frame 0
        {"left": 8, "top": 6, "pixels": rng.integers(0, 4, (4, 5)), "local": local, "disposal": 3},  # off the canvas
        {"left": 1, "top": 2, "pixels": np.full((3, 3), 200), "transparent": 200},  # all transparent, index > table
    ], tail=bytes([0x21, 0xFE, 3]) + b"end" + b"\x00")
    out.append(("hand_canvas_and_transparency", hand))
    return out


def codecs_gif_kinds():
    """Every GIF through `decode_gif`, `decode_image` (all frames as uint8, the first frame as float32, all
    frames as uint16) and, for stills, `decode_png` and `decode_jpeg`; `decode_gif` of a PNG and a JPEG (one
    frame). Fetched as int32 (float32 for float32)."""
    rng = np.random.default_rng(601)
    files = gifs(rng)
    png = tf.io.encode_png(picture(rng, 5, 7)).numpy()
    jpg = tf.io.encode_jpeg(picture(rng, 9, 6), quality=90).numpy()

    @tf.function(input_signature=[])
    def decode_all():
        outs = []
        for name, data in files:
            c = tf.constant(data)
            outs.append(tf.cast(tf.io.decode_gif(c), tf.int32))
            outs.append(tf.cast(tf.io.decode_image(c), tf.int32))
            outs.append(tf.io.decode_image(c, dtype=tf.float32, expand_animations=False))
            outs.append(tf.cast(tf.io.decode_image(c, dtype=tf.uint16), tf.int32))
            if name.startswith("pil_still") or name == "pil_grey":
                outs.append(tf.cast(tf.io.decode_png(c), tf.int32))
                outs.append(tf.cast(tf.io.decode_jpeg(c, channels=3), tf.int32))
        outs.append(tf.cast(tf.io.decode_gif(tf.constant(png)), tf.int32))
        outs.append(tf.cast(tf.io.decode_gif(tf.constant(jpg)), tf.int32))
        return outs

    write("codecs_gif_kinds", decode_all.get_concrete_function(), [], {}, 1)


def pil_bmp(img, mode=None):
    b = io.BytesIO()
    im = Image.fromarray(img)
    if mode == "P":
        im = im.quantize(32)
    elif mode:
        im = im.convert(mode)
    im.save(b, "BMP")
    return b.getvalue()


def top_down(data):
    """`data` with its height negated: the same rows read top to bottom."""
    b = bytearray(data)
    h = struct.unpack_from("<i", b, 22)[0]
    struct.pack_into("<i", b, 22, -h)
    return bytes(b)


def codecs_bmp_kinds():
    """BMPs (24-bit 13 wide so rows are padded, 32-bit RGBA, 8-bit palette — TensorFlow ignores the palette and
    gives the indices —, 8-bit grey, a 24-bit file rewritten top-down) through `decode_bmp` with channels 0, 3
    and 4 (3 and 4 only from colour files) and `decode_image` as uint8, uint16 and float32 (not the top-down
    file: TensorFlow's uint16/float path sizes its buffer with the signed height)."""
    rng = np.random.default_rng(602)
    rgba = np.concatenate([picture(rng, 8, 9), rng.integers(0, 256, (8, 9, 1), dtype=np.uint8)], -1)
    files = [
        ("rgb24_padded", pil_bmp(picture(rng, 7, 13))),
        ("rgba32", pil_bmp(rgba)),
        ("palette8", pil_bmp(picture(rng, 6, 10), "P")),
        ("grey8", pil_bmp(picture(rng, 5, 11), "L")),
        ("rgb24_top_down", top_down(pil_bmp(picture(rng, 6, 5)))),
    ]

    @tf.function(input_signature=[])
    def decode_all():
        outs = []
        for name, data in files:
            c = tf.constant(data)
            outs.append(tf.cast(tf.io.decode_bmp(c), tf.int32))
            outs.append(tf.cast(tf.io.decode_bmp(c, channels=3), tf.int32))
            outs.append(tf.cast(tf.io.decode_bmp(c, channels=4), tf.int32))
            outs.append(tf.cast(tf.io.decode_image(c), tf.int32))
            if name != "rgb24_top_down":
                outs.append(tf.cast(tf.io.decode_image(c, dtype=tf.uint16), tf.int32))
                outs.append(tf.io.decode_image(c, dtype=tf.float32))
        return outs

    write("codecs_bmp_kinds", decode_all.get_concrete_function(), [], {}, 1)


FIXTURES = [codecs_gif_kinds, codecs_bmp_kinds]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
