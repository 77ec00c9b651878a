//! Fractional max and average pooling and their gradients (`fractional_max_pool_op.cc`,
//! `fractional_avg_pool_op.cc`; Graham, "Fractional max-pooling", 2014): NHWC pooling over
//! regions of `k` or `k + 1` rows and columns whose boundaries a Philox generator seeded by
//! the node's `seed`/`seed2` draws (numeric's `pooling_sequence`), rows first, then columns.
//! TensorFlow builds a fresh generator from the seeds on every run, so with seeds set the op
//! is a pure function; with both seeds 0 a `deterministic` op picks random seeds once (here:
//! when the kernel is prepared) and any other op on every run. `overlapping` makes each
//! region take the next region's first row and column too. The sequences are the second and
//! third outputs, which the gradients take back.

use autoclust_graph::{AttrValue, DType, ListValue, Node, Tensor};
use autoclust_numeric::random::{pooling_sequence, Philox};

use super::elementwise::Num;
use super::{arity, attr_int_or, dispatch_num, tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernel of a fractional pooling op, or `None` for any other node.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let max = match node.op.as_str() {
        "FractionalMaxPool" => true,
        "FractionalAvgPool" => false,
        "FractionalMaxPoolGrad" => {
            let overlapping = super::attr_bool_or(node, "overlapping", false)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 5)?;
                let t = inp[0].dtype;
                super::one(dispatch_num!(t, max_pool_grad(&inp[0], &inp[1], &inp[2], &inp[3], &inp[4], overlapping))?)
            })));
        }
        "FractionalAvgPoolGrad" => {
            let overlapping = super::attr_bool_or(node, "overlapping", false)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let t = inp[1].dtype;
                super::one(dispatch_num!(t, avg_pool_grad(&inp[0], &inp[1], &inp[2], &inp[3], overlapping))?)
            })));
        }
        _ => return Ok(None),
    };
    let what = if max { "max" } else { "average" };
    let ratio = match node.attr("pooling_ratio") {
        Some(AttrValue::List(ListValue::F(v))) => v.clone(),
        _ => return Err(KernelError::Attr("pooling_ratio".into())),
    };
    if ratio.len() != 4 {
        return Err(KernelError::invalid("pooling_ratio field must specify 4 dimensions"));
    }
    if let Some(r) = ratio.iter().find(|&&r| r < 1.0) {
        return Err(KernelError::invalid(format!("pooling_ratio cannot be smaller than 1, got: {r}")));
    }
    // TensorFlow accepts a ratio other than 1 on one of batch and depth but cannot pool it.
    if ratio[0] != 1.0 || ratio[3] != 1.0 {
        return Err(KernelError::invalid(format!(
            "Fractional {what} pooling is not yet supported on the batch nor channel dimension."
        )));
    }
    let pseudo_random = super::attr_bool_or(node, "pseudo_random", false)?;
    let overlapping = super::attr_bool_or(node, "overlapping", false)?;
    let deterministic = super::attr_bool_or(node, "deterministic", false)?;
    let (mut seed, mut seed2) = (attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
    if deterministic && seed == 0 && seed2 == 0 {
        (seed, seed2) = (rand::random::<i64>(), rand::random::<i64>());
    } else if !deterministic && (seed != 0 || seed2 != 0) {
        return Err(KernelError::invalid("Both seed and seed2 should be 0 if deterministic is false."));
    }
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, 1)?;
        let x = &inp[0];
        if x.rank() != 4 {
            return Err(KernelError::invalid("tensor_in must be 4-dimensional"));
        }
        let mut out_shape = [0usize; 4];
        for i in 0..4 {
            // TensorFlow divides the int dimension by the float ratio in float32.
            if (x.shape[i] as f32) < ratio[i] {
                return Err(KernelError::invalid(format!(
                    "Pooling ratio is higher than input dimension size for dimension {i}. Input dim size: {} pooling ratio: {}",
                    x.shape[i], ratio[i]
                )));
            }
            out_shape[i] = (x.shape[i] as f32 / ratio[i]).floor() as usize;
        }
        // `GuardedPhiloxRandom::Init`: both seeds 0 means random seeds.
        let (s, s2) = if seed == 0 && seed2 == 0 { (rand::random(), rand::random()) } else { (seed, seed2) };
        let mut gen = Philox::new(s as u64, s2 as u64);
        let rows = pooling_sequence(x.shape[1], out_shape[1], &mut gen, pseudo_random);
        let cols = pooling_sequence(x.shape[2], out_shape[2], &mut gen, pseudo_random);
        super::budget(x.dtype, &out_shape)?;
        let pooled = if max {
            dispatch_num!(x.dtype, max_pool(x, &rows, &cols, out_shape, overlapping))?
        } else {
            dispatch_num!(x.dtype, avg_pool(x, &rows, &cols, out_shape, overlapping))?
        };
        let mut o = Outputs::new();
        o.push(pooled);
        o.push(tensor_of(vec![rows.len()], rows));
        o.push(tensor_of(vec![cols.len()], cols));
        Ok(o)
    })))
}

/// The input rows (or columns) of region `i` of a pooling sequence: from `seq[i]` to
/// `seq[i + 1] − 1` (`seq[i + 1]` when overlapping), cut at the last one.
fn region(seq: &[i64], i: usize, overlapping: bool, len: usize) -> KResult<std::ops::Range<usize>> {
    let start = seq[i];
    let end = (if overlapping { seq[i + 1] } else { seq[i + 1] - 1 }).min(len as i64 - 1);
    if start < 0 {
        return Err(KernelError::invalid(format!("pooling sequence starts a region at {start}")));
    }
    Ok(start as usize..(end + 1).max(start) as usize)
}

/// Calls `f(out_index, in_index)` for each input pixel of each output pixel's region, in
/// TensorFlow's order (batch, region row, region column, row, column), indices of pixels
/// (not of elements).
fn each_window(
    in_shape: [usize; 4],
    out_hw: (usize, usize),
    rows: &[i64],
    cols: &[i64],
    overlapping: bool,
    mut f: impl FnMut(usize, usize),
) -> KResult<()> {
    let [batch, in_h, in_w, _] = in_shape;
    if rows.len() != out_hw.0 + 1 || cols.len() != out_hw.1 + 1 {
        return Err(KernelError::invalid(format!(
            "pooling sequences of {} rows and {} columns do not fit an output of {} by {}",
            rows.len(),
            cols.len(),
            out_hw.0,
            out_hw.1
        )));
    }
    if rows.iter().chain(cols).any(|&s| s < 0) || rows.windows(2).chain(cols.windows(2)).any(|w| w[1] < w[0]) {
        return Err(KernelError::invalid("pooling sequences must be non-negative and non-decreasing"));
    }
    for b in 0..batch {
        for hs in 0..out_hw.0 {
            let hr = region(rows, hs, overlapping, in_h)?;
            for ws in 0..out_hw.1 {
                let out = (b * out_hw.0 + hs) * out_hw.1 + ws;
                let wr = region(cols, ws, overlapping, in_w)?;
                for h in hr.clone() {
                    for w in wr.clone() {
                        f(out, (b * in_h + h) * in_w + w);
                    }
                }
            }
        }
    }
    Ok(())
}

fn dims4(t: &Tensor) -> [usize; 4] {
    [t.shape[0], t.shape[1], t.shape[2], t.shape[3]]
}

/// Each region's channel-wise maximum, from the lowest value up (`std::max`: a NaN input
/// never replaces the running maximum).
fn max_pool<T: Num>(x: &Tensor, rows: &[i64], cols: &[i64], out: [usize; 4], overlapping: bool) -> KResult<Tensor> {
    let depth = out[3];
    let xs = T::slice(x);
    let mut v = vec![T::lowest(); out.iter().product()];
    each_window(dims4(x), (out[1], out[2]), rows, cols, overlapping, |o, i| {
        for d in 0..depth {
            let (acc, a) = (&mut v[o * depth + d], xs[i * depth + d]);
            if *acc < a {
                *acc = a;
            }
        }
    })?;
    Ok(tensor_of(out.to_vec(), v))
}

/// Each region's channel-wise mean: the sum in the input's type, divided by the count (an
/// integer mean truncated).
fn avg_pool<T: Num>(x: &Tensor, rows: &[i64], cols: &[i64], out: [usize; 4], overlapping: bool) -> KResult<Tensor> {
    let depth = out[3];
    let xs = T::slice(x);
    let cells = out[0] * out[1] * out[2];
    let (mut v, mut count) = (vec![T::zero(); cells * depth], vec![T::zero(); cells]);
    each_window(dims4(x), (out[1], out[2]), rows, cols, overlapping, |o, i| {
        for d in 0..depth {
            v[o * depth + d] = v[o * depth + d].add(xs[i * depth + d]);
        }
        count[o] = count[o].add(T::one());
    })?;
    for (o, c) in count.iter().enumerate() {
        for x in &mut v[o * depth..(o + 1) * depth] {
            *x = x.div(*c);
        }
    }
    Ok(tensor_of(out.to_vec(), v))
}

/// `FractionalMaxPoolGrad(orig_input, orig_output, out_backprop, rows, cols)`: each output
/// gradient added to the first input of its region holding the maximum, after TensorFlow's
/// check that the regions give `orig_output` back.
fn max_pool_grad<T: Num>(
    input: &Tensor,
    output: &Tensor,
    dy: &Tensor,
    rows: &Tensor,
    cols: &Tensor,
    overlapping: bool,
) -> KResult<Tensor> {
    let debug = super::shape_ops::debug_shape;
    for (t, what) in [(input, "orig_input"), (output, "orig_output")] {
        if t.rank() != 4 {
            return Err(KernelError::invalid(format!("{what} should be a tensor of rank 4, got {}", debug(&t.shape))));
        }
        if t.num_elements() == 0 {
            return Err(KernelError::invalid(format!("{what} must not be empty, got {}", debug(&t.shape))));
        }
        if t.dtype != T::DTYPE {
            return Err(KernelError::DType(t.dtype));
        }
    }
    if dy.shape != output.shape || dy.dtype != T::DTYPE {
        return Err(KernelError::invalid(format!(
            "out_backprop must have orig_output's shape {}, got {}",
            debug(&output.shape),
            debug(&dy.shape)
        )));
    }
    let (rows, cols) = (sequence(rows)?, sequence(cols)?);
    let out = dims4(output);
    let depth = input.shape[3];
    if out[0] != input.shape[0] || out[3] != depth {
        return Err(KernelError::invalid("orig_output must have orig_input's batch and depth"));
    }
    let xs = T::slice(input);
    let mut best = vec![T::lowest(); output.num_elements()];
    let mut arg: Vec<Option<usize>> = vec![None; output.num_elements()];
    each_window(dims4(input), (out[1], out[2]), &rows, &cols, overlapping, |o, i| {
        for d in 0..depth {
            let (k, a) = (o * depth + d, xs[i * depth + d]);
            if best[k] < a || arg[k].is_none() {
                best[k] = a;
                arg[k] = Some(i * depth + d);
            }
        }
    })?;
    if best.iter().zip(T::slice(output)).any(|(a, b)| a != b) {
        return Err(KernelError::invalid("tensor_out_dup is not the same as tensor_out"));
    }
    let mut dx = vec![T::zero(); input.num_elements()];
    for (a, &g) in arg.iter().zip(T::slice(dy)) {
        let a = a.ok_or_else(|| {
            KernelError::invalid(format!("Invalid input backprop index: -1, {}", input.num_elements()))
        })?;
        dx[a] = dx[a].add(g);
    }
    Ok(tensor_of(input.shape.clone(), dx))
}

/// `FractionalAvgPoolGrad(orig_input_tensor_shape, out_backprop, rows, cols)`: each output
/// gradient divided evenly over its region, summed in float64 in TensorFlow's order, then
/// cast to the gradient's type.
fn avg_pool_grad<T: Num>(
    shape: &Tensor,
    dy: &Tensor,
    rows: &Tensor,
    cols: &Tensor,
    overlapping: bool,
) -> KResult<Tensor> {
    if shape.rank() != 1 || shape.num_elements() != 4 {
        return Err(KernelError::invalid("original input tensor shape must be1-dimensional and 4 elements"));
    }
    let dims = super::int_values(shape, "orig_input_tensor_shape")?;
    let in_shape = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| KernelError::invalid(format!("Dimension {d} must be >= 0"))))
        .collect::<KResult<Vec<usize>>>()?;
    if dy.rank() != 4 || dy.shape[0] != in_shape[0] || dy.shape[3] != in_shape[3] {
        return Err(KernelError::invalid(format!(
            "out_backprop must be a rank-4 tensor with the input's batch and depth, got {}",
            super::shape_ops::debug_shape(&dy.shape)
        )));
    }
    super::budget(DType::Float64, &in_shape)?;
    let (rows, cols) = (sequence(rows)?, sequence(cols)?);
    let depth = in_shape[3];
    let [in_h, in_w] = [in_shape[1], in_shape[2]];
    let g = T::slice(dy);
    let mut acc = vec![0.0f64; in_shape.iter().product()];
    let cells = |seq: &[i64], i: usize, len: usize| region(seq, i, overlapping, len).map(|r| r.len() as f64);
    let mut counts = Vec::with_capacity(dy.shape[1] * dy.shape[2]);
    for r in 0..dy.shape[1] {
        for c in 0..dy.shape[2] {
            if r + 1 >= rows.len() || c + 1 >= cols.len() {
                return Err(KernelError::invalid("pooling sequences are shorter than out_backprop"));
            }
            counts.push(cells(&rows, r, in_h)? * cells(&cols, c, in_w)?);
        }
    }
    let out_hw = (dy.shape[1], dy.shape[2]);
    let per_image = out_hw.0 * out_hw.1;
    each_window(dims4_of(&in_shape), out_hw, &rows[..=out_hw.0], &cols[..=out_hw.1], overlapping, |o, i| {
        let n = counts[o % per_image];
        for d in 0..depth {
            acc[i * depth + d] += g[o * depth + d].to_f64() / n;
        }
    })?;
    Ok(tensor_of(in_shape, acc.into_iter().map(T::from_f64).collect()))
}

fn dims4_of(s: &[usize]) -> [usize; 4] {
    [s[0], s[1], s[2], s[3]]
}

/// A pooling sequence operand (int64 vector).
fn sequence(t: &Tensor) -> KResult<Vec<i64>> {
    match t.as_i64() {
        Some(v) if t.rank() == 1 => Ok(v.to_vec()),
        _ => Err(KernelError::invalid(format!(
            "a pooling sequence must be an int64 vector, got {} {}",
            t.dtype,
            super::shape_ops::debug_shape(&t.shape)
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::unreadable_literal)] // TensorFlow's printed values
mod tests {
    use super::*;
    use crate::kernels::tests_support::node;

    fn pool(op: &str, x: Tensor, ratio: [f32; 4], random: [bool; 2], seeds: [i64; 2]) -> Vec<Tensor> {
        let attrs = [
            ("pooling_ratio", AttrValue::List(ListValue::F(ratio.to_vec()))),
            ("pseudo_random", AttrValue::B(random[0])),
            ("overlapping", AttrValue::B(random[1])),
            ("deterministic", AttrValue::B(true)),
            ("seed", AttrValue::I(seeds[0])),
            ("seed2", AttrValue::I(seeds[1])),
        ];
        let f = prepare(&node(op, &attrs)).unwrap().unwrap();
        f(vec![x].into()).unwrap().into_iter().collect()
    }

    fn grad(op: &str, overlapping: bool, inputs: Vec<Tensor>) -> KResult<Tensor> {
        let f = prepare(&node(op, &[("overlapping", AttrValue::B(overlapping))])).unwrap().unwrap();
        f(inputs.into()).map(|mut o| o.remove(0))
    }

    fn f32_bits(t: &Tensor) -> Vec<u32> {
        t.as_f32().unwrap().iter().map(|x| x.to_bits()).collect()
    }

    /// `(i * a % m) / d - c` for `i` in `0..n`, as numpy computes it in float64.
    fn ramp(n: i64, a: i64, m: i64, d: f64, c: f64) -> Vec<f64> {
        (0..n).map(|i| (i * a % m) as f64 / d - c).collect()
    }

    /// `tf.raw_ops.FractionalMaxPool`/`FractionalAvgPool` (deterministic, seeded) and their
    /// gradients in TensorFlow 2.21 (eager); M1 is `tf.raw_ops.FractionalMaxPool(value=
    /// tf.reshape(tf.range(36, dtype=tf.float32), [1, 6, 6, 1]), pooling_ratio=[1., 1.5, 1.5, 1.],
    /// pseudo_random=True, overlapping=True, deterministic=True, seed=7, seed2=3)`, the others
    /// alike on the inputs below (the numpy expressions in the comments). Pseudo-random and
    /// random sequences, overlapping or not, every type, int32 means truncated, each gradient.
    #[test]
    fn fractional_pooling_matches_tensorflow() {
        let range36 = Tensor::from_f32(vec![1, 6, 6, 1], (0..36).map(|x| x as f32).collect()).unwrap();
        let m1 = pool("FractionalMaxPool", range36.clone(), [1.0, 1.5, 1.5, 1.0], [true, true], [7, 3]);
        let want: &[f32] = M1_0;
        assert_eq!(m1[0].as_f32().unwrap(), want);
        assert_eq!(m1[1].as_i64().unwrap(), M1_1);
        assert_eq!(m1[2].as_i64().unwrap(), M1_2);
        // GM1: FractionalMaxPoolGrad(x, m1, 2 * ones, rows, cols, overlapping=True).
        let dy = Tensor::from_f32(vec![1, 4, 4, 1], vec![2.0; 16]).unwrap();
        let g1 = grad("FractionalMaxPoolGrad", true, vec![range36, m1[0].clone(), dy, m1[1].clone(), m1[2].clone()]);
        let want: &[f32] = GM1;
        assert_eq!(g1.unwrap().as_f32().unwrap(), want);
        // M2: (np.arange(140) * 37 % 101) / 7.0 - 6.0 as [2, 7, 5, 2] float64, random sequences.
        let x2 = Tensor::from_f64(vec![2, 7, 5, 2], ramp(140, 37, 101, 7.0, 6.0)).unwrap();
        let m2 = pool("FractionalMaxPool", x2.clone(), [1.0, 1.44, 1.7, 1.0], [false, false], [11, 5]);
        assert_eq!(m2[0].shape, [2, 4, 2, 2]);
        let want: &[f64] = M2_0;
        assert_eq!(m2[0].as_f64().unwrap(), want);
        assert_eq!(m2[1].as_i64().unwrap(), M2_1);
        assert_eq!(m2[2].as_i64().unwrap(), M2_2);
        // GM2: out_backprop = np.arange(32) + 0.5.
        let dy2 = Tensor::from_f64(vec![2, 4, 2, 2], (0..32).map(|i| f64::from(i) + 0.5).collect()).unwrap();
        let g2 = grad("FractionalMaxPoolGrad", false, vec![x2, m2[0].clone(), dy2, m2[1].clone(), m2[2].clone()]);
        let want: &[f64] = GM2;
        assert_eq!(g2.unwrap().as_f64().unwrap(), want);
        // A3: (np.arange(35) * 7 % 23 - 9) as [1, 5, 7, 1] int32: truncated means.
        let x3 = Tensor::from_i32(vec![1, 5, 7, 1], (0..35).map(|i| i * 7 % 23 - 9).collect()).unwrap();
        let a3 = pool("FractionalAvgPool", x3, [1.0, 1.3, 2.2, 1.0], [true, true], [2, 9]);
        assert_eq!(a3[0].as_i32().unwrap(), A3_0);
        assert_eq!(a3[1].as_i64().unwrap(), A3_1);
        assert_eq!(a3[2].as_i64().unwrap(), A3_2);
        // GA3: out_backprop = np.arange(9) * 5 - 7 (int32), overlapping.
        let shape = Tensor::from_i64(vec![4], vec![1, 5, 7, 1]).unwrap();
        let dy3 = Tensor::from_i32(vec![1, 3, 3, 1], (0..9).map(|i| i * 5 - 7).collect()).unwrap();
        let g3 = grad("FractionalAvgPoolGrad", true, vec![shape, dy3, a3[1].clone(), a3[2].clone()]).unwrap();
        assert_eq!(g3.as_i32().unwrap(), GA3);
        // A4: (np.arange(144) * 53 % 97) / 13.0 - 3.5 as [1, 6, 8, 3] float32; ratio 2, random.
        let x4 = Tensor::from_f32(vec![1, 6, 8, 3], ramp(144, 53, 97, 13.0, 3.5).iter().map(|&x| x as f32).collect());
        let a4 = pool("FractionalAvgPool", x4.unwrap(), [1.0, 2.0, 2.0, 1.0], [false, true], [4, 4]);
        assert_eq!(f32_bits(&a4[0]), A4BITS);
        assert_eq!(a4[1].as_i64().unwrap(), A4_1);
        assert_eq!(a4[2].as_i64().unwrap(), A4_2);
        // GA4: out_backprop = (np.arange(36) * 29 % 31) / 9.0 - 1.5 (float32), overlapping.
        let shape = Tensor::from_i64(vec![4], vec![1, 6, 8, 3]).unwrap();
        let dy4 = Tensor::from_f32(vec![1, 3, 4, 3], ramp(36, 29, 31, 9.0, 1.5).iter().map(|&x| x as f32).collect());
        let g4 = grad("FractionalAvgPoolGrad", true, vec![shape, dy4.unwrap(), a4[1].clone(), a4[2].clone()]);
        assert_eq!(f32_bits(&g4.unwrap()), GA4BITS);
        // M5: (np.arange(32) * 5 % 11) as [2, 4, 4, 1] int64.
        let x5 = Tensor::from_i64(vec![2, 4, 4, 1], (0..32).map(|i| i * 5 % 11).collect()).unwrap();
        let m5 = pool("FractionalMaxPool", x5, [1.0, 1.5, 1.2, 1.0], [true, false], [1, 1]);
        assert_eq!(m5[0].as_i64().unwrap(), M5_0);
        assert_eq!(m5[1].as_i64().unwrap(), M5_1);
        assert_eq!(m5[2].as_i64().unwrap(), M5_2);
    }

    #[test]
    fn fractional_pooling_refuses_what_tensorflow_refuses() {
        let attrs = |ratio: Vec<f32>, det: bool, seed: i64| {
            vec![
                ("pooling_ratio", AttrValue::List(ListValue::F(ratio))),
                ("deterministic", AttrValue::B(det)),
                ("seed", AttrValue::I(seed)),
            ]
        };
        let err = |a: Vec<(&str, AttrValue)>| prepare(&node("FractionalMaxPool", &a)).err().unwrap().to_string();
        assert!(err(attrs(vec![1.0, 1.5, 1.5], true, 1)).contains("pooling_ratio field must specify 4 dimensions"));
        assert!(
            err(attrs(vec![1.0, 0.5, 1.5, 1.0], true, 1)).contains("pooling_ratio cannot be smaller than 1, got: 0.5")
        );
        assert!(err(attrs(vec![1.0, 1.5, 1.5, 1.0], false, 3)).contains("Both seed and seed2 should be 0"));
        let f = prepare(&node("FractionalMaxPool", &attrs(vec![1.0, 1.5, 3.0, 1.0], true, 1))).unwrap().unwrap();
        let small = Tensor::from_f32(vec![1, 4, 2, 1], vec![0.0; 8]).unwrap();
        let e = f(vec![small].into()).err().unwrap().to_string();
        assert!(e.contains("Pooling ratio is higher than input dimension size for dimension 2"), "{e}");
        // Unseeded but deterministic: one random sequence, the same on every run.
        let f = prepare(&node("FractionalAvgPool", &attrs(vec![1.0, 1.5, 1.5, 1.0], true, 0))).unwrap().unwrap();
        let x = Tensor::from_f32(vec![1, 9, 9, 1], (0..81).map(|x| x as f32).collect()).unwrap();
        let (a, b) = (f(vec![x.clone()].into()).unwrap(), f(vec![x].into()).unwrap());
        assert_eq!((&a[1], &a[2]), (&b[1], &b[2]));
    }

    // TensorFlow 2.21's outputs for the cases above.
    const M1_0: &[f32] =
        &[8.0, 10.0, 11.0, 11.0, 20.0, 22.0, 23.0, 23.0, 26.0, 28.0, 29.0, 29.0, 32.0, 34.0, 35.0, 35.0];
    const M1_1: &[i64] = &[0, 1, 3, 4, 6];
    const M1_2: &[i64] = &[0, 2, 4, 5, 6];
    const GM1: &[f32] = &[
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 2.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0,
        2.0, 4.0, 0.0, 0.0, 2.0, 0.0, 2.0, 4.0, 0.0, 0.0, 2.0, 0.0, 2.0, 4.0,
    ];
    const M2_0: &[f64] = &[
        4.571428571428571,
        -0.7142857142857144,
        7.428571428571429,
        6.0,
        3.571428571428571,
        5.0,
        6.428571428571429,
        7.857142857142858,
        8.285714285714286,
        4.857142857142858,
        7.2857142857142865,
        7.7142857142857135,
        8.142857142857142,
        3.8571428571428577,
        7.142857142857142,
        6.7142857142857135,
        3.2857142857142865,
        4.7142857142857135,
        6.142857142857142,
        7.571428571428571,
        8.0,
        3.7142857142857135,
        7.0,
        6.571428571428571,
        3.1428571428571423,
        4.571428571428571,
        6.0,
        7.428571428571429,
        7.857142857142858,
        8.285714285714286,
        6.857142857142858,
        7.2857142857142865,
    ];
    const M2_1: &[i64] = &[0, 1, 3, 5, 7];
    const M2_2: &[i64] = &[0, 2, 5];
    const GM2: &[f64] = &[
        0.0, 1.5, 0.5, 0.0, 0.0, 3.5, 0.0, 0.0, 2.5, 0.0, 4.5, 0.0, 0.0, 5.5, 0.0, 0.0, 6.5, 0.0, 0.0, 7.5, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 8.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.5, 0.0, 0.0, 0.0, 0.0, 9.5,
        0.0, 0.0, 0.0, 0.0, 0.0, 11.5, 0.0, 13.5, 0.0, 0.0, 0.0, 0.0, 0.0, 15.5, 0.0, 0.0, 12.5, 0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 14.5, 0.0, 16.5, 0.0, 0.0, 17.5, 0.0, 0.0, 18.5, 0.0, 0.0, 19.5, 0.0, 21.5, 0.0, 0.0, 0.0, 0.0,
        0.0, 23.5, 0.0, 0.0, 20.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 22.5, 0.0, 24.5, 0.0, 0.0, 25.5, 0.0, 0.0, 26.5,
        0.0, 0.0, 27.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 28.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        30.5, 0.0, 0.0, 29.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 31.5,
    ];
    const A3_0: &[i32] = &[1, 3, 5, 1, 1, 0, 2, -1, -4];
    const A3_1: &[i64] = &[0, 2, 4, 5];
    const A3_2: &[i64] = &[0, 2, 5, 7];
    const GA3: &[i32] =
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 4, 3, 0, 0, 1, 1, 1, 4, 3, 8, 8, 16, 8, 8, 27, 19];
    const A4BITS: &[u32] = &[
        0xbebe5be6, 0x3ec71c72, 0x3ea41a42, 0x3d408c00, 0xbcaf0ae4, 0xbdb7cb7c, 0x3eee7ee7, 0x3ecb7cb9, 0x3ea87a87,
        0x3f7cb7cb, 0xbf93b13b, 0x3edf2df4, 0x3efb9fbb, 0xbecfdcfd, 0x3eb59b5a, 0x3da64a67, 0x3c520d0e, 0x3f460460,
        0xbea87a87, 0x3edcfdcf, 0x3eb9fba2, 0x3e44ec4d, 0x3f09d89d, 0xbeb7cb7b, 0x3dd20d20, 0xbf4b7cb8, 0x3f4b7cb8,
        0xbe9d89d9, 0x3d1d89cb, 0x3ec4ec50, 0xbf37cb7d, 0x3f5f2df3, 0xbcd20d17, 0xbecec4ee, 0x3fe76276, 0xbfc9d89e,
    ];
    const A4_1: &[i64] = &[0, 2, 4, 6];
    const A4_2: &[i64] = &[0, 2, 4, 6, 8];
    const GA4BITS: &[u32] = &[
        0xbe2aaaab, 0x3e43f35c, 0x3e2aaaab, 0xbe2aaaab, 0x3e43f35c, 0x3e2aaaab, 0xbcca4587, 0x3e9e0652, 0x3e84bda1,
        0x3e1161fa, 0x3df03292, 0x3dbda12f, 0x3e56e9e0, 0x3e24587f, 0x3de38e39, 0x3d8b0fcd, 0x3d30fcd7, 0x3c97b426,
        0x3d703291, 0xbb4a458e, 0xbd84bda1, 0xbc17b426, 0xbd3da130, 0xbdaaaaab, 0xbe2aaaab, 0x3e43f35c, 0x3e2aaaab,
        0xbe2aaaab, 0x3e43f35c, 0x3e2aaaab, 0xbcca4587, 0x3e9e0652, 0x3e84bda1, 0x3e1161fa, 0x3df03292, 0x3dbda12f,
        0x3e56e9e0, 0x3e24587f, 0x3de38e39, 0x3d8b0fcd, 0x3d30fcd7, 0x3c97b426, 0x3d703291, 0xbb4a458e, 0xbd84bda1,
        0xbc17b426, 0xbd3da130, 0xbdaaaaab, 0xbe7cd6ea, 0x3db0fcd7, 0x3d17b427, 0xbe7cd6ea, 0x3db0fcd7, 0x3d17b427,
        0xbe84bda1, 0x3ed097b4, 0x3e9e0652, 0xbc4a4580, 0x3ea4587f, 0x3e8b0fce, 0x3e56e9e0, 0x3efcd6ea, 0x3eca4588,
        0x3e638e38, 0x3e30fcd7, 0x3dfcd6ea, 0x3eaaaaaa, 0x3e56e9e0, 0x3db0fcd7, 0x3de38e39, 0x3d17b425, 0xbd17b425,
        0xbda4587e, 0xbdd6e9e0, 0xbe04bda1, 0xbda4587e, 0xbdd6e9e0, 0xbe04bda1, 0xbe703291, 0x3dca4589, 0x3d4a458b,
        0xbe1e0652, 0x3e5097b4, 0x3e374f04, 0x0, 0x3eaaaaab, 0x3e9161fa, 0x3e1e0652, 0x3e04bda1, 0x3dd6e9e0,
        0x3e8ca458, 0x3e5a12f6, 0x3e1add3c, 0x3df684bd, 0x3daaaaab, 0x3d3da130, 0xbd9161f9, 0xbe07e6b7, 0xbe471c72,
        0xbd9161f9, 0xbe07e6b7, 0xbe471c72, 0xbea78194, 0xbd8b0fcc, 0xbe43f35b, 0xbe832916, 0x3d84bda2, 0x3b4a458e,
        0xbea12f68, 0xbd638e38, 0x3eca4588, 0xbd703294, 0xbdf684be, 0x3ec8b0fd, 0x3edf9add, 0x3e9097b4, 0x3f33c0ca,
        0x3efda12f, 0x3ece38e4, 0x3e9ed098, 0x3c17b426, 0xbce38e39, 0xbd84bda1, 0x3c17b426, 0xbce38e39, 0xbd84bda1,
        0xbdbda12f, 0xbe2aaaaa, 0xbe7684be, 0xbdd097b4, 0xbe0e38e3, 0xbe3425ed, 0xbea12f68, 0xbec71c72, 0x3de38e38,
        0xbe5a12f7, 0xbe800000, 0x3e92f685, 0x3e25ed09, 0x3d8e38e4, 0x3f0d097b, 0x3ec00000, 0x3ea38e39, 0x3e871c72,
    ];
    const M5_0: &[i64] = &[9, 5, 10, 7, 10, 9, 3, 8, 7, 10, 4, 9];
    const M5_1: &[i64] = &[0, 2, 4];
    const M5_2: &[i64] = &[0, 1, 2, 4];
}
