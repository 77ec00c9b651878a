"""Makes tf1_scale_translate.pbtxt and tf1_scale_translate.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_scale_translate.py

Antialiased and kernel-based image resizing, what `tf.image.resize(..., antialias=True)` and its
`lanczos3`, `lanczos5`, `gaussian` and `mitchellcubic` methods emit (ScaleAndTranslate), down-
and upsampling; every sampling kernel of the raw op (box, triangle, keyscubic, lanczos1) with a
translation and antialiasing off; a uint8 image; and a gain variable trained by SGD through the
resize (ScaleAndTranslateGrad). The JSON holds TensorFlow's fetches for the feed below and the
variable after one `train` step.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    x = tf1.placeholder(tf.float32, [2, 7, 9, 3], name="x")
    gain = tf1.get_variable("gain", initializer=tf.constant([1.0, 0.5, -0.25]), use_resource=True)
    xg = x * gain
    down = tf.image.resize(xg, [4, 5], method="lanczos3", antialias=True)
    tf.identity(down, name="lanczos3_down")
    tf.identity(tf.image.resize(x, [12, 4], method="lanczos5", antialias=True), name="lanczos5_mixed")
    tf.identity(tf.image.resize(x, [3, 3], method="gaussian", antialias=True), name="gaussian_down")
    tf.identity(tf.image.resize(x, [10, 13], method="mitchellcubic"), name="mitchell_up")
    tf.identity(tf.image.resize(x, [4, 4], method="bilinear", antialias=True), name="triangle_antialias")
    for k in ["box", "triangle", "keyscubic", "lanczos1"]:
        y = tf.raw_ops.ScaleAndTranslate(images=x, size=[5, 11], scale=[0.75, 1.3], translation=[0.4, -1.2],
                                         kernel_type=k, antialias=False)
        tf.identity(y, name=k + "_translated")
    u8 = tf.cast(tf.clip_by_value(x * 40.0 + 128.0, 0.0, 255.0), tf.uint8)
    tf.identity(tf.raw_ops.ScaleAndTranslate(images=u8, size=[4, 6], scale=[4 / 7, 6 / 9], translation=[0.0, 0.0],
                                             kernel_type="lanczos3", antialias=True), name="uint8_down")
    loss = tf.identity(tf.reduce_sum(tf.square(down - 0.1)), name="loss")
    (gg,) = tf.gradients(loss, [gain])
    train = tf1.train.GradientDescentOptimizer(0.01).apply_gradients([(gg, gain)], name="train")
    init = tf1.global_variables_initializer()
    rng = np.random.default_rng(11)
    xv = rng.standard_normal((2, 7, 9, 3)).astype(np.float32)
    names = ["lanczos3_down", "lanczos5_mixed", "gaussian_down", "mitchell_up", "triangle_antialias",
             "box_translated", "triangle_translated", "keyscubic_translated", "lanczos1_translated", "uint8_down",
             "loss"]
    with tf1.Session(graph=g) as s:
        s.run(init)
        vals = s.run([n + ":0" for n in names], {x: xv})
        out = {n: np.asarray(v).ravel().tolist() for n, v in zip(names, vals)}
        s.run(train, {x: xv})
        out["gain"] = s.run(gain).ravel().tolist()
    out["feeds"] = {"x": xv.tolist()}
    with open(os.path.join(HERE, "tf1_scale_translate.expected.json"), "w") as f:
        json.dump(out, f)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_scale_translate.pbtxt")
    print(sorted({n.op for n in g.as_graph_def().node}))
    print({k: v[:4] for k, v in out.items() if k != "feeds"})
