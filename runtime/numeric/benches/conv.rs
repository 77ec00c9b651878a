//! Convolutions of real networks where the spatial size is small and the channels many
//! (ResNet50V2's last stage at a 32×32 input: 3×3 over [2, 3, 3, 512]; DenseNet's growth
//! convolutions late in the network) and where it is large (a CNN's first stages), forward
//! and filter gradient, on one thread and two: what decides between Winograd's F(2×2, 3×3)
//! and the direct im2col product (`conv::winograd`'s tile rule).

use autoclust_numeric::conv::{conv2d, conv2d_backprop_filter, ConvShape, Padding, WindowAttrs};
use divan::Bencher;

fn main() {
    divan::main();
}

/// (N, H, W, C, O, SAME padding).
const SHAPES: &[(usize, usize, usize, usize, usize, bool)] = &[
    (2, 3, 3, 512, 512, false),
    (2, 2, 2, 128, 32, true),
    (2, 4, 4, 256, 256, true),
    (2, 6, 6, 256, 256, true),
    (2, 8, 8, 128, 128, true),
    (2, 8, 8, 256, 256, true),
    (8, 8, 8, 64, 64, true),
    (2, 16, 16, 64, 64, true),
    (4, 16, 16, 64, 64, true),
    (2, 32, 32, 32, 32, true),
];

fn shape(&(n, h, w, c, o, same): &(usize, usize, usize, usize, usize, bool)) -> ConvShape {
    let padding = if same { Padding::Same } else { Padding::Valid };
    let attrs = WindowAttrs { strides: (1, 1), dilations: (1, 1), padding };
    let (input, filter) = ([n, h, w, c], [3, 3, c, o]);
    ConvShape { input, filter, win: attrs.conv_window(input, filter).unwrap() }
}

fn data(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 500.0).collect()
}

#[divan::bench(args = 0..SHAPES.len(), consts = [1, 2])]
fn forward<const THREADS: usize>(b: Bencher<'_, '_>, k: usize) {
    let s = shape(&SHAPES[k]);
    let x = data(s.input.iter().product());
    let f = data(s.filter.iter().product());
    b.bench(|| conv2d(&s, &x, &f, THREADS));
}

#[divan::bench(args = 0..SHAPES.len(), consts = [1, 2])]
fn filter_gradient<const THREADS: usize>(b: Bencher<'_, '_>, k: usize) {
    let s = shape(&SHAPES[k]);
    let x = data(s.input.iter().product());
    let dy = data(s.output().iter().product());
    b.bench(|| conv2d_backprop_filter(&s, &x, &dy, THREADS));
}
