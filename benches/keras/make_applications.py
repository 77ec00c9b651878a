"""Exports keras.applications models as TF2 function graphs in the fixture format (run by hand,
never by CI), into benches/keras/out/ (ignored by git: ResNet50's variables alone are 100 MB):

    TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=-1 /work/tfenv/bin/python \
        benches/keras/make_applications.py [NAME...]
    /work/tfenv/bin/python benches/keras/check.py app_mobilenetv2 app_resnet50 ...
    AUTOCLUST_FIXTURE_DIR=benches/keras/out cargo test --release -p autoclust --test suite -- tf_fixtures::
        # every exported graph through the TF fixture harness: four runs each, cluster records

Real architectures autoclust was never tuned on (issue 20's "steps you have not seen"), with random
weights (`weights=None`) at small input sizes: inference (`training=False`) of MobileNetV2 (alpha 0.35),
MobileNetV3Small, EfficientNetB0, EfficientNetV2B0, ResNet50, DenseNet121, ConvNeXtTiny, NASNetMobile and
Xception, momentum-SGD training steps of MobileNetV2 and EfficientNetB0 (batch 8, 64x64, one step),
and Adam training steps of ResNet50V2, NASNetMobile, ConvNeXtTiny and DenseNet121 (batch 2, 64x64).
Session 38 (2026-11-27): every inference graph ran clustered and plain with no note and matched
TensorFlow within 5.2e-6 of each output's scale. The training steps match within 2e-4 of each
variable's scale, both modes alike; TensorFlow's own oneDNN-on and -off runs of the MobileNetV2 step
differ by 7e-3 on the first convolution's kernel and 7e-2 on some momentum slots (batch statistics of
BatchNormalization amplify rounding), so compare training steps against that spread, not check.py's
default tolerance.
"""

import os
import sys

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "testdata", "tf"))
import make_fixtures_tf2  # noqa: E402
from make_fixtures_tf2 import captured_variables, write  # noqa: E402

make_fixtures_tf2.OUT = os.path.join(HERE, "out")
os.makedirs(make_fixtures_tf2.OUT, exist_ok=True)
import keras  # noqa: E402


def infer_fixture(name, model, shape, batch=2, steps=1):
    @tf.function(input_signature=[tf.TensorSpec([None] + list(shape), tf.float32, name="x")])
    def infer(x):
        return model(x, training=False)
    cf = infer.get_concrete_function()
    variables = captured_variables(cf, model.variables)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.uniform(0, 255, [batch] + list(shape)).astype(np.float32)}
    write(name, cf, variables, feeds, steps)

def train_fixture(name, model, shape, classes, batch=2, opt=None):
    opt = opt or keras.optimizers.SGD(0.01, momentum=0.9)
    opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    @tf.function(input_signature=[tf.TensorSpec([None] + list(shape), tf.float32, name="x"), tf.TensorSpec([None], tf.int32, name="labels")])
    def train(x, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    cf = train.get_concrete_function()
    variables = captured_variables(cf, model.variables + opt.variables)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.uniform(0, 1, [batch] + list(shape)).astype(np.float32), "labels": rng.integers(0, classes, [batch]).astype(np.int32)}
    write(name, cf, variables, feeds, 1)

A = keras.applications
CASES = {
 "mobilenetv2": lambda: infer_fixture("app_mobilenetv2", A.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None), (96, 96, 3)),
 "efficientnetb0": lambda: infer_fixture("app_efficientnetb0", A.EfficientNetB0(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "resnet50": lambda: infer_fixture("app_resnet50", A.ResNet50(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "densenet121": lambda: infer_fixture("app_densenet121", A.DenseNet121(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "convnexttiny": lambda: infer_fixture("app_convnexttiny", A.ConvNeXtTiny(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "efficientnetv2b0": lambda: infer_fixture("app_efficientnetv2b0", A.EfficientNetV2B0(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "mobilenetv3small": lambda: infer_fixture("app_mobilenetv3small", A.MobileNetV3Small(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "nasnetmobile": lambda: infer_fixture("app_nasnetmobile", A.NASNetMobile(input_shape=(64, 64, 3), weights=None), (64, 64, 3)),
 "xception": lambda: infer_fixture("app_xception", A.Xception(input_shape=(71, 71, 3), weights=None), (71, 71, 3)),
 # Session 67: the two inference graphs sweep 66 found slower than TensorFlow (issue 18): many
 # 1x1 and asymmetric 1x7/7x1 convolutions over small images; ResNet50V2's pre-activation blocks.
 "inceptionv3": lambda: infer_fixture("app_inceptionv3", A.InceptionV3(input_shape=(139, 139, 3), weights=None), (139, 139, 3), batch=4),
 "resnet50v2": lambda: infer_fixture("app_resnet50v2", A.ResNet50V2(input_shape=(96, 96, 3), weights=None), (96, 96, 3), batch=4),
 "mobilenetv2_train": lambda: train_fixture("app_mobilenetv2_train", A.MobileNetV2(input_shape=(64, 64, 3), alpha=0.35, weights=None, classes=5), (64, 64, 3), 5, batch=8),
 "efficientnetb0_train": lambda: train_fixture("app_efficientnetb0_train", A.EfficientNetB0(input_shape=(64, 64, 3), weights=None, classes=5), (64, 64, 3), 5, batch=8),
 # Adam steps at batch 2 (session 44): bottlenecks of 1x1 convolutions, many small parallel
 # branches, Keras' jit_compile grouped convolutions, long concatenation chains.
 "resnet50v2_train": lambda: train_fixture("app_resnet50v2_train", A.ResNet50V2(input_shape=(64, 64, 3), weights=None, classes=10), (64, 64, 3), 10, opt=keras.optimizers.Adam(1e-3)),
 "nasnetmobile_train": lambda: train_fixture("app_nasnetmobile_train", A.NASNetMobile(input_shape=(64, 64, 3), weights=None, classes=10), (64, 64, 3), 10, opt=keras.optimizers.Adam(1e-3)),
 "convnexttiny_train": lambda: train_fixture("app_convnexttiny_train", A.ConvNeXtTiny(input_shape=(64, 64, 3), weights=None, classes=10), (64, 64, 3), 10, opt=keras.optimizers.Adam(1e-3)),
 "densenet121_train": lambda: train_fixture("app_densenet121_train", A.DenseNet121(input_shape=(64, 64, 3), weights=None, classes=10), (64, 64, 3), 10, opt=keras.optimizers.Adam(1e-3)),
}


def main():
    """Exports every case, or those named on the command line (keys of CASES)."""
    for k, f in CASES.items():
        if len(sys.argv) > 1 and k not in sys.argv[1:]:
            continue
        keras.backend.clear_session()
        keras.utils.set_random_seed(1)
        f()


if __name__ == "__main__":
    main()
