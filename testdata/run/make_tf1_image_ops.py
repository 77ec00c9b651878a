"""Makes tf1_image_ops.pbtxt and tf1_image_ops.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_image_ops.py

An inference graph over TensorFlow's image resampling ops, as detection and vision-transformer
front ends use them: tf.image.resize with bicubic (half-pixel centers) and area methods, the
legacy align_corners bicubic, crop_and_resize (bilinear and nearest, boxes partly outside the
image), extract_patches feeding a patch embedding (MatMul), a small conv head on the crops, and the
colour ops (adjust_hue, adjust_saturation, adjust_contrast, rgb_to_hsv, hsv_to_rgb).
A `gain` variable scales the image and one SGD step trains it through the bicubic resizes and
the crops (ResizeBicubicGrad, CropAndResizeGradImage). The JSON holds TensorFlow's fetches for
the feeds below and `gain` after the step.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    img = tf1.placeholder(tf.float32, [2, 12, 10, 3], name="img")
    boxes = tf1.placeholder(tf.float32, [None, 4], name="boxes")
    box_ind = tf1.placeholder(tf.int32, [None], name="box_ind")
    gain = tf1.get_variable("gain", initializer=tf.constant([1.0, 0.9, 1.1]), use_resource=True)
    img_in = img
    img = img * gain
    up = tf.image.resize(img, [15, 17], method="bicubic")
    down = tf.image.resize(img, [5, 4], method="area")
    legacy = tf1.image.resize_bicubic(img, [7, 9], align_corners=True)
    crops = tf.image.crop_and_resize(img, boxes, box_ind, [6, 5])
    near = tf.image.crop_and_resize(up, boxes, box_ind, [4, 4], method="nearest", extrapolation_value=-2.0)
    patches = tf.image.extract_patches(up, sizes=[1, 4, 4, 1], strides=[1, 4, 4, 1], rates=[1, 1, 1, 1], padding="SAME")
    w = tf.constant(np.linspace(-0.2, 0.2, 48 * 8, dtype=np.float32).reshape(48, 8))
    emb = tf.matmul(tf.reshape(patches, [-1, 48]), w)
    k = tf.constant(np.linspace(-0.5, 0.5, 3 * 3 * 3 * 4, dtype=np.float32).reshape(3, 3, 3, 4))
    head = tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(crops, k, 1, "SAME")), axis=[1, 2])
    unit = img / 255.0
    color = tf.image.adjust_contrast(tf.image.adjust_saturation(tf.image.adjust_hue(unit, 0.2), 1.4), 0.8)
    hsv = tf.image.rgb_to_hsv(color)
    back = tf.image.hsv_to_rgb(hsv)
    loss = tf.identity(tf.reduce_mean(tf.square(up / 255.0)) + tf.reduce_mean(crops / 255.0) + tf.reduce_mean(near / 255.0)
                       + tf.reduce_mean(tf1.image.resize_bicubic(img, [5, 6], half_pixel_centers=True) / 255.0), name="loss")
    train = tf1.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")
    init = tf1.global_variables_initializer()
    for name, t in [("color", color), ("hsv", hsv), ("back", back), ("up", up), ("down", down), ("legacy", legacy), ("crops", crops), ("near", near), ("emb", emb), ("head", head)]:
        tf.identity(t, name="out_" + name)
    rng = np.random.default_rng(5)
    feed_vals = {
        "img": rng.uniform(0, 255, (2, 12, 10, 3)).astype(np.float32),
        "boxes": np.array([[0.1, 0.1, 0.8, 0.9], [-0.1, 0.3, 0.6, 1.2], [0.5, 0.5, 0.2, 0.3]], np.float32),
        "box_ind": np.array([0, 1, 1], np.int32),
    }
    feed = {g.get_tensor_by_name(n + ":0"): v for n, v in feed_vals.items()}
    feed = {(img_in if k.name == "img:0" else k): v for k, v in feed.items()}
    fetches = ["loss"] + ["out_" + n for n in ["color", "hsv", "back", "up", "down", "legacy", "crops", "near", "emb", "head"]]
    with tf1.Session(graph=g) as s:
        s.run(init)
        vals = s.run([n + ":0" for n in fetches], feed)
        out = {n: np.asarray(v).ravel().tolist() for n, v in zip(fetches, vals)}
        s.run(train, feed)
        out["gain"] = s.run(gain).tolist()
    out["feeds"] = {n: v.tolist() for n, v in feed_vals.items()}
    with open(os.path.join(HERE, "tf1_image_ops.expected.json"), "w") as f:
        json.dump(out, f)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_image_ops.pbtxt")
    print({k: len(v) for k, v in out.items() if k != "feeds"})
