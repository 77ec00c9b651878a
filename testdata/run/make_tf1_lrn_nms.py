"""Makes tf1_lrn_nms.pbtxt and tf1_lrn_nms.expected.json with TensorFlow (by hand, never by CI):

    CUDA_VISIBLE_DEVICES=-1 TF_ENABLE_ONEDNN_OPTS=0 /work/tfenv/bin/python testdata/run/make_tf1_lrn_nms.py

A TensorFlow 1 step with older and detection-style ops: a convolution followed by local response
normalisation (LRN, and LRNGrad in the gradient), a `tf.roll`, an `xlogy` term in the loss, one
SGD step; and on the side a box head whose boxes go through hard and soft non-maximum
suppression (NonMaxSuppressionV4 padded, V5 with scores). The JSON holds TensorFlow's fetches
for the feeds below and the variables after one `train` step.
"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf1.Graph()
with g.as_default():
    x = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
    k = tf1.get_variable("k", initializer=tf.constant(np.linspace(-0.5, 0.5, 3 * 3 * 3 * 8, dtype=np.float32).reshape(3, 3, 3, 8)), use_resource=True)
    h = tf.nn.conv2d(x, k, 1, "SAME")
    h = tf.nn.local_response_normalization(h, depth_radius=2, bias=1.0, alpha=0.3, beta=0.75)
    h = tf.roll(tf.nn.relu(h), shift=[1, -2], axis=[1, 3])
    p = tf.nn.softmax(tf.reduce_mean(h, axis=[1, 2]))
    loss = tf.identity(tf.reduce_sum(tf.math.xlogy(p, p + 1e-3)), name="loss")
    train = tf1.train.GradientDescentOptimizer(0.5).minimize(loss, name="train")
    boxes = tf1.placeholder(tf.float32, [None, 4], name="boxes")
    scores = tf1.placeholder(tf.float32, [None], name="scores")
    sel, valid = tf.image.non_max_suppression_padded(boxes, scores, 4, 0.5, 0.1, pad_to_max_output_size=True)[:2] if False else tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=4, iou_threshold=0.5, score_threshold=0.1, pad_to_max_output_size=True)
    tf.identity(sel, name="hard")
    tf.identity(valid, name="valid")
    soft = tf.raw_ops.NonMaxSuppressionV5(boxes=boxes, scores=scores, max_output_size=5, iou_threshold=0.5, score_threshold=0.1, soft_nms_sigma=0.4)
    tf.identity(soft[0], name="soft")
    tf.identity(soft[1], name="soft_scores")
    init = tf1.global_variables_initializer()
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    bv = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [1, 1, 0, 0.05], [5, 5, 6, 6], [5, 5.2, 6, 6.2], [9, 9, 9.5, 9.5]], np.float32)
    sv = np.array([0.7, 0.8, 0.65, 0.4, 0.45, 0.05], np.float32)
    feed = {x: xv, boxes: bv, scores: sv}
    with tf1.Session(graph=g) as s:
        s.run(init)
        names = ["loss", "hard", "valid", "soft", "soft_scores"]
        vals = s.run([n + ":0" for n in names], feed)
        out = {n: np.asarray(v).ravel().tolist() for n, v in zip(names, vals)}
        s.run(train, feed)
        out["k"] = s.run(k).ravel().tolist()
    out["x"] = xv.tolist()
    out["boxes"] = bv.tolist()
    out["scores"] = sv.tolist()
    with open(os.path.join(HERE, "tf1_lrn_nms.expected.json"), "w") as f:
        json.dump(out, f)
    tf.io.write_graph(g.as_graph_def(), HERE, "tf1_lrn_nms.pbtxt")
    print({k: v for k, v in out.items() if k not in ("x", "k", "boxes", "scores")})
