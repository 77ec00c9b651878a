"""Writes the JPEG-decoding fixtures (run by hand, never by CI):

    TF_ENABLE_ONEDNN_OPTS=0 TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python testdata/tf/make_fixtures_jpeg.py

Needs Pillow besides TensorFlow (`pip install pillow`): TensorFlow's `encode_jpeg` writes only baseline and
progressive 4:2:0/4:4:4/grey files, Pillow adds 4:2:2, restart intervals, CMYK and RGB (Adobe) files. Two
more kinds are made by rewriting a file's frame header so that the same entropy-coded data describe another
sampling (4:4:0 from 4:2:2 with the image transposed, 4:1:1 from 4:2:0): the picture is scrambled, the file
is valid, and TensorFlow's decode of it is the reference. Cases in README.md.
"""

import base64
import io
import os
import struct
import sys

import numpy as np
import tensorflow as tf
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures_strings import write_string_fixture  # noqa: E402
from make_fixtures_tf2 import run_fixtures, OUT, write  # noqa: E402
from tf_harness import export  # noqa: E402


def picture(rng, h, w, c=3):
    """A smooth gradient with noise, an edge and a saturated patch: every coefficient range."""
    y, x = np.mgrid[0:h, 0:w]
    planes = [x * 255 / max(w - 1, 1), y * 255 / max(h - 1, 1), ((x + y) * 4) % 256, (x * y) % 256]
    base = np.stack(planes[:c], -1)
    img = base + rng.normal(0, 25, (h, w, c))
    img[: h // 3, w // 2:] = 255
    img[h // 2:, : w // 4] = 0
    return np.clip(img, 0, 255).astype(np.uint8)


def pil_jpeg(img, **kw):
    mode = {1: "L", 3: "RGB", 4: "CMYK"}[img.shape[-1]]
    b = io.BytesIO()
    Image.fromarray(img[..., 0] if img.shape[-1] == 1 else img, mode).save(b, "JPEG", **kw)
    return b.getvalue()


def tf_jpeg(img, **kw):
    return tf.io.encode_jpeg(tf.constant(img), **kw).numpy()


def resample_header(data, new_hw, new_factors):
    """`data` with its SOF0 height/width and component sampling bytes replaced."""
    i = data.index(b"\xff\xc0")
    b = bytearray(data)
    h, w = new_hw
    b[i + 5:i + 9] = struct.pack(">HH", h, w)
    for k, f in enumerate(new_factors):
        b[i + 11 + 3 * k] = f
    return bytes(b)


def jpegs(rng):
    """(name, bytes) of every kind."""
    out = []
    pic = picture(rng, 37, 45)
    out.append(("tf_420_q75", tf_jpeg(pic, quality=75)))
    out.append(("tf_444_q95", tf_jpeg(pic, quality=95, chroma_downsampling=False)))
    out.append(("tf_420_q10", tf_jpeg(pic, quality=10)))
    out.append(("tf_progressive_420", tf_jpeg(pic, quality=85, progressive=True)))
    out.append(("tf_progressive_444_optimized", tf_jpeg(pic, quality=100, progressive=True, optimize_size=True,
                                                        chroma_downsampling=False)))
    out.append(("tf_grey", tf_jpeg(picture(rng, 19, 26, 1), format="grayscale", quality=80)))
    out.append(("tf_narrow_420", tf_jpeg(picture(rng, 21, 3), quality=90)))  # chroma 2 wide: box upsampling
    out.append(("tf_one_pixel", tf_jpeg(picture(rng, 1, 1), quality=90)))
    pic2 = picture(rng, 30, 41)
    out.append(("pil_422", pil_jpeg(pic2, quality=88, subsampling=1)))
    out.append(("pil_422_restart", pil_jpeg(pic2, quality=70, subsampling=1, restart_marker_blocks=3)))
    out.append(("pil_420_progressive_restart", pil_jpeg(pic2, quality=80, progressive=True, restart_marker_rows=1)))
    out.append(("pil_grey_progressive", pil_jpeg(picture(rng, 23, 17, 1), quality=60, progressive=True)))
    out.append(("pil_cmyk_adobe", pil_jpeg(picture(rng, 14, 18, 4), quality=90)))
    out.append(("pil_rgb_adobe", pil_jpeg(pic2, quality=90, keep_rgb=True, subsampling=0)))
    # 4:4:0: a 4:2:2 file's MCU (two luma blocks side by side) read as two stacked, image transposed.
    src = pil_jpeg(picture(rng, 24, 40), quality=85, subsampling=1)
    out.append(("patched_440", resample_header(src, (40, 24), [0x12, 0x11, 0x11])))
    # 4:1:1: a 4:2:0 file's four luma blocks read as a row of four; 4 MCUs of 32x8.
    src = pil_jpeg(picture(rng, 32, 32), quality=85, subsampling=2)
    out.append(("patched_411", resample_header(src, (29, 30), [0x41, 0x11, 0x11])))
    return out


def codecs_jpeg_kinds():
    """Every kind of JPEG decoded as `tf.io.decode_jpeg` (default fast IDCT, the accurate one, no fancy
    upsampling, one channel, three), `tf.io.decode_image` (float32) and `tf.io.decode_png` (uint16) give it,
    fetched as int32 (float32 for decode_image)."""
    rng = np.random.default_rng(501)
    files = jpegs(rng)
    # Three of them also as files, for the decoder's mutation test (runtime/src/kernels/jpeg.rs).
    jpeg_dir = os.path.join(OUT, "..", "jpeg")
    os.makedirs(jpeg_dir, exist_ok=True)
    for name, data in files:
        if name in ("tf_420_q75", "pil_420_progressive_restart", "patched_440"):
            with open(os.path.join(jpeg_dir, name + ".jpg"), "wb") as fh:
                fh.write(data)

    @tf.function(input_signature=[])
    def decode_all():
        outs = []
        for name, data in files:
            c = tf.constant(data)
            cmyk = name.startswith("pil_cmyk")
            outs.append(tf.cast(tf.io.decode_jpeg(c), tf.int32))
            outs.append(tf.cast(tf.io.decode_jpeg(c, dct_method="INTEGER_ACCURATE"), tf.int32))
            outs.append(tf.cast(tf.io.decode_jpeg(c, fancy_upscaling=False), tf.int32))
            if not cmyk:
                outs.append(tf.cast(tf.io.decode_jpeg(c, channels=1), tf.int32))
            outs.append(tf.cast(tf.io.decode_jpeg(c, channels=3, dct_method="INTEGER_ACCURATE"), tf.int32))
            outs.append(tf.io.decode_image(c, dtype=tf.float32, expand_animations=False))
            outs.append(tf.cast(tf.io.decode_png(c, dtype=tf.uint16), tf.int32))
        return outs

    cf = decode_all.get_concrete_function()
    write("codecs_jpeg_kinds", cf, [], {}, 1)


def codecs_jpeg_crop():
    """`tf.image.decode_and_crop_jpeg` (`DecodeAndCropJpeg`) of several kinds with windows whose left edge is
    on an iMCU column boundary, inside one, at 0, the whole image and one pixel at the far corner; the fast
    and accurate IDCTs, with and without fancy upsampling; fetched as int32."""
    rng = np.random.default_rng(503)
    files = {name: data for name, data in jpegs(rng)}
    picked = ["tf_420_q75", "tf_444_q95", "pil_422", "tf_grey", "tf_progressive_420", "patched_440", "patched_411",
              "pil_cmyk_adobe"]
    windows = {"tf_420_q75": [[0, 0, 37, 45], [3, 16, 20, 20], [5, 19, 9, 7], [36, 44, 1, 1], [2, 1, 30, 33]],
               "pil_cmyk_adobe": [[1, 8, 10, 9], [0, 3, 14, 11]]}
    default = [[4, 8, 11, 13], [2, 5, 9, 18], [0, 17, 7, 6], [1, 0, 5, 3], [0, 16, 5, 1]]  # fit the smallest (19x24)

    @tf.function(input_signature=[])
    def crops():
        outs = []
        for name in picked:
            c = tf.constant(files[name])
            for win in windows.get(name, default):
                outs.append(tf.cast(tf.image.decode_and_crop_jpeg(c, win), tf.int32))
                outs.append(tf.cast(tf.image.decode_and_crop_jpeg(c, win, fancy_upscaling=False), tf.int32))
                outs.append(tf.cast(tf.image.decode_and_crop_jpeg(c, win, channels=3, dct_method="INTEGER_ACCURATE"),
                                    tf.int32))
        return outs

    cf = crops.get_concrete_function()
    write("codecs_jpeg_crop", cf, [], {}, 1)


def codecs_jpeg_serving():
    """An image-classifier serving signature as exported for TF Serving's JSON API: a batch of web-safe
    base64 JPEG strings of different sizes -> `tf.map_fn` (a While loop over a TensorArray) of
    `DecodeBase64` -> `DecodeJpeg` -> `convert_image_dtype` -> bilinear resize to 24x24 -> a small CNN with
    fixed weights (conv, ReLU, max pooling, conv, global mean) -> softmax and top-2."""
    rng = np.random.default_rng(502)
    sizes = [(30, 40), (24, 24), (17, 50)]
    texts = [base64.urlsafe_b64encode(tf_jpeg(picture(rng, h, w), quality=q)).decode()
             for (h, w), q in zip(sizes, (90, 75, 60))]
    # numpy values, made constants inside the function (an eager tensor would be captured as a placeholder)
    k1 = rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.3
    k2 = rng.standard_normal((3, 3, 8, 8)).astype(np.float32) * 0.2
    dense = rng.standard_normal((8, 5)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images_b64")])
    def serve(images_b64):
        def one(s):
            img = tf.io.decode_jpeg(tf.io.decode_base64(s), channels=3)
            img = tf.image.convert_image_dtype(img, tf.float32)
            return tf.image.resize(img, [24, 24])

        x = tf.map_fn(one, images_b64, fn_output_signature=tf.TensorSpec([24, 24, 3], tf.float32))
        h = tf.nn.relu(tf.nn.conv2d(x, tf.constant(k1), 1, "SAME"))
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.nn.relu(tf.nn.conv2d(h, tf.constant(k2), 1, "SAME"))
        probs = tf.nn.softmax(tf.reduce_mean(h, axis=[1, 2]) @ tf.constant(dense))
        top = tf.math.top_k(probs, 2)
        return probs, top.indices

    cf = serve.get_concrete_function()
    fetch = [t.name for t in cf.outputs]
    gd = export(cf.graph.as_graph_def(), OUT, "codecs_jpeg_serving")
    write_string_fixture("codecs_jpeg_serving", gd, {}, {"images_b64": texts}, fetch, [])


FIXTURES = [codecs_jpeg_kinds, codecs_jpeg_crop, codecs_jpeg_serving]


def main():
    run_fixtures(FIXTURES)


if __name__ == "__main__":
    main()
