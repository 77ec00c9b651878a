//! GEMM shapes of real training steps, on one thread: the project's `gemm` (which takes
//! the unpacked kernels up to a moderate depth) against `matrixmultiply`'s packed
//! `sgemm` alone. `nn`: B row-major; `nt`: B transposed (a product with `Wᵀ`);
//! `tn`: A transposed (a weight gradient `xᵀ·dz`). `autoclust_gemm_2threads` runs the
//! LSTM step's shapes through `gemm(…, threads = 2)` (split across the team when large
//! enough); `team_round_trip` is one empty two-part section with the helper spinning
//! (`warm`) or parked (`parked`, after a sleep longer than its spin time).

use divan::Bencher;

fn main() {
    divan::main();
}

/// (m, k, n, A transposed, B transposed): an LSTM cell (batch 32, embedding 32, 64 units)
/// forward and backward, attention heads (32 tokens, head 16/64), a batch-64 MLP layer.
const SHAPES: &[(usize, usize, usize, bool, bool)] = &[
    (32, 64, 256, false, false),
    (32, 32, 256, false, false),
    (32, 256, 32, false, true),
    (32, 256, 64, false, true),
    (64, 32, 256, true, false),
    (32, 16, 32, false, true),
    (32, 32, 64, false, false),
    (64, 784, 256, false, false),
    (256, 64, 128, false, false),
    (784, 64, 256, true, false),
    (128, 512, 1024, false, false),
    (128, 1024, 1024, false, false),
    (128, 1024, 1024, false, true),
    (1024, 128, 1024, true, false),
];

fn operands(&(m, k, n, ta, tb): &(usize, usize, usize, bool, bool)) -> (Vec<f32>, Vec<f32>, [isize; 4]) {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.1 - 0.6).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.2 - 0.6).collect();
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    (a, b, [rsa, csa, rsb, csb])
}

#[divan::bench(args = SHAPES)]
fn autoclust_gemm(bench: Bencher<'_, '_>, shape: &(usize, usize, usize, bool, bool)) {
    let (m, k, n, ..) = *shape;
    let (a, b, [rsa, csa, rsb, csb]) = operands(shape);
    let mut c = vec![0f32; m * n];
    bench.bench_local(|| {
        // SAFETY: the vectors hold the described matrices.
        unsafe { autoclust_numeric::gemm::gemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), 1) }
    });
}

/// The Keras LSTM step's products (batch 32, embedding 32, 64 units, gates 256): forward
/// `x·W` and `h·U`, backward `dz·Wᵀ` and `dz·Uᵀ`, the weight gradient `hᵀ·dz`.
const LSTM: &[(usize, usize, usize, bool, bool)] = &[
    (32, 32, 256, false, false),
    (32, 64, 256, false, false),
    (32, 256, 32, false, true),
    (32, 256, 64, false, true),
    (64, 32, 256, true, false),
];

#[divan::bench(args = LSTM)]
fn autoclust_gemm_2threads(bench: Bencher<'_, '_>, shape: &(usize, usize, usize, bool, bool)) {
    let (m, k, n, ..) = *shape;
    let (a, b, [rsa, csa, rsb, csb]) = operands(shape);
    let mut c = vec![0f32; m * n];
    bench.bench_local(|| {
        // SAFETY: the vectors hold the described matrices.
        unsafe { autoclust_numeric::gemm::gemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), 2) }
    });
}

/// A ladder of sizes around the split threshold, each product's operands rewritten by the
/// calling thread before every call (as in a step, where the caller just produced them):
/// `threads` 1 or 2, to see from which size a split pays once a helper must fetch its
/// operands from the caller's cache.
const LADDER: &[(usize, usize, usize, bool, bool)] = &[
    (32, 256, 32, false, true),
    (32, 256, 64, false, true),
    (64, 256, 128, false, false),
    (128, 256, 128, false, false),
    (128, 256, 256, false, false),
    (64, 784, 256, false, false),
    (128, 1024, 1024, false, false),
];

fn fresh(bench: Bencher<'_, '_>, shape: &(usize, usize, usize, bool, bool), threads: usize) {
    let (m, k, n, ..) = *shape;
    let (mut a, mut b, [rsa, csa, rsb, csb]) = operands(shape);
    let mut c = vec![0f32; m * n];
    let mut round = 0f32;
    bench.bench_local(|| {
        // The caller writes the operands (one store per cache line suffices) ...
        round += 1.0;
        for x in a.iter_mut().step_by(16).chain(b.iter_mut().step_by(16)) {
            *x = round;
        }
        // SAFETY: the vectors hold the described matrices.
        unsafe {
            autoclust_numeric::gemm::gemm(m, k, n, a.as_ptr(), rsa, csa, b.as_ptr(), rsb, csb, c.as_mut_ptr(), threads)
        }
    });
}

#[divan::bench(args = LADDER)]
fn fresh_1thread(bench: Bencher<'_, '_>, shape: &(usize, usize, usize, bool, bool)) {
    fresh(bench, shape, 1);
}

#[divan::bench(args = LADDER)]
fn fresh_2threads(bench: Bencher<'_, '_>, shape: &(usize, usize, usize, bool, bool)) {
    fresh(bench, shape, 2);
}

#[divan::bench(args = ["warm", "parked"])]
fn team_round_trip(bench: Bencher<'_, '_>, helper: &str) {
    if helper == "parked" {
        bench
            .with_inputs(|| std::thread::sleep(std::time::Duration::from_millis(5)))
            .bench_local_values(|()| autoclust_numeric::gemm::team_round_trip());
    } else {
        bench.bench_local(autoclust_numeric::gemm::team_round_trip);
    }
}

#[divan::bench(args = SHAPES)]
fn matrixmultiply_packed(bench: Bencher<'_, '_>, shape: &(usize, usize, usize, bool, bool)) {
    let (m, k, n, ..) = *shape;
    let (a, b, [rsa, csa, rsb, csb]) = operands(shape);
    let mut c = vec![0f32; m * n];
    bench.bench_local(|| {
        // SAFETY: as above.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                rsa,
                csa,
                b.as_ptr(),
                rsb,
                csb,
                0.0,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    });
}
