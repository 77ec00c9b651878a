//! TensorFlow's stateful random ops, with TensorFlow's exact numbers when seeded:
//! `RandomUniform`, `RandomStandardNormal`, `TruncatedNormal`, `RandomUniformInt`.
//!
//! The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
//! 1, 2, 3"): a 128-bit counter and a 64-bit key; each call encrypts the counter in ten
//! rounds and yields four 32-bit words, then increments the counter. TensorFlow seeds it
//! from the op's `seed`/`seed2` attributes (the key is `seed`, the counter's upper half
//! `seed2`; both 0 means "seed from the OS"), and each op keeps ONE generator per session:
//! a run reserves `256 × outputs` counter steps for itself and advances the generator
//! past them, so a second run of the same op draws new numbers, and a run's numbers do
//! not depend on how its work is split across threads.
//!
//! Distributions follow TensorFlow's CPU kernels bit for bit:
//! - uniform float32: 23 random mantissa bits under exponent 127 give a float in [1, 2);
//!   subtract 1. Float64: 52 bits from two words, the same way. Four (two) outputs per call.
//! - normal: Box–Muller on two uniforms (`u1` clamped to 1e-7, angle `2π·u2`), sine first.
//! - truncated normal: Box–Muller pairs, keeping values with |x| < 2, one word at a time;
//!   each group of four (float64: two) outputs starts at its own reserved counter block
//!   (256 words per output), so rejection never shifts other groups.
//! - uniform int: `lo + bits % (hi − lo)`, 32 bits (int32) or 64 bits (int64) per output.
//!
//! The per-session generators live in [`RandomStates`] (held by the session's
//! [`VariableStore`](crate::variables::VariableStore)), keyed by node name as TensorFlow's
//! `OpSegment` keys a session's stateful kernels; the executor gets a node's generator
//! from there when it prepares the kernel, so every plan of a session (any
//! feeds/fetches/targets) advances the same generator. These ops are stateful: the registry marks them so, nothing folds
//! them, and the executor runs them on every step.

use std::collections::HashMap;
use std::sync::Arc;

use autoclust_graph::{DType, Node, Tensor, TensorData};
use parking_lot::Mutex;

use super::{arity, attr_int_or, attr_type, attr_type_or, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

pub use autoclust_numeric::random::{key_counter_from_seed, word_to_f32, words_to_f64, Philox};
use autoclust_numeric::random::{
    sample_f32, sample_f64, uniform_int32, uniform_int64, Dist, Half, Precision, SampleReal, RESERVED_PER_OUTPUT,
};

/// A node's generator, shared by every plan of a session.
#[derive(Debug)]
pub struct GuardedPhilox {
    gen: Mutex<Philox>,
}

impl GuardedPhilox {
    /// TensorFlow's `GuardedPhiloxRandom::Init`: both seeds 0 means random seeds.
    pub fn new(seed: i64, seed2: i64) -> GuardedPhilox {
        let (s, s2) = if seed == 0 && seed2 == 0 {
            (rand::random::<u64>(), rand::random::<u64>())
        } else {
            (seed as u64, seed2 as u64)
        };
        GuardedPhilox { gen: Mutex::new(Philox::new(s, s2)) }
    }

    /// The generator for a run producing `outputs` values; the shared one moves past
    /// the `256 × outputs` counter steps reserved for it.
    pub fn reserve(&self, outputs: usize) -> Philox {
        let mut g = self.gen.lock();
        let local = *g;
        g.skip((outputs as u64).wrapping_mul(RESERVED_PER_OUTPUT));
        local
    }

    /// TensorFlow's `ReserveSamples128(n)`: the shared generator moves past `n` blocks.
    pub fn reserve_blocks(&self, blocks: u64) -> Philox {
        let mut g = self.gen.lock();
        let local = *g;
        g.skip(blocks);
        local
    }

    /// TensorFlow's `ReserveSamples32(n)`: the shared generator moves past the
    /// `ceil(n / 4)` blocks of `n` 32-bit words (no 256× margin; `RandomShuffle`'s).
    pub fn reserve_words(&self, words: u64) -> Philox {
        let mut g = self.gen.lock();
        let local = *g;
        g.skip(words.div_ceil(4));
        local
    }
}

/// The random generators of one session, by node name.
#[derive(Debug, Default)]
pub struct RandomStates {
    map: Mutex<HashMap<String, Arc<GuardedPhilox>>>,
}

impl RandomStates {
    pub fn new() -> RandomStates {
        RandomStates::default()
    }

    /// The generator of node `name`, created from its seeds on first use.
    fn get(&self, name: &str, seed: i64, seed2: i64) -> Arc<GuardedPhilox> {
        let mut map = self.map.lock();
        if let Some(g) = map.get(name) {
            return g.clone();
        }
        map.entry(name.to_string()).or_insert_with(|| Arc::new(GuardedPhilox::new(seed, seed2))).clone()
    }
}

/// Whether `op` is one of the random ops here.
pub fn is_random_op(op: &str) -> bool {
    matches!(
        op,
        "RandomUniform"
            | "RandomStandardNormal"
            | "TruncatedNormal"
            | "RandomUniformInt"
            | "Multinomial"
            | "RandomShuffle"
            | "LogUniformCandidateSampler"
            | "UniformCandidateSampler"
            | "RandomGamma"
            | "RandomPoissonV2"
            | "ParameterizedTruncatedNormal"
    )
}

/// Gamma or Poisson draws (computed in float64) as a tensor of `dtype`.
fn draws_as(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    Ok(match dtype {
        DType::Float32 => tensor_of(shape, v.into_iter().map(|x| x as f32).collect()),
        DType::Float64 => tensor_of(shape, v),
        DType::Int32 => tensor_of(shape, v.into_iter().map(|x| x as i32).collect()),
        DType::Int64 => tensor_of(shape, v.into_iter().map(|x| x as i64).collect()),
        other => return Err(KernelError::DType(other)),
    })
}

/// A stateless gamma or Poisson op's output shape and samples per parameter: `shape` must end
/// with the parameters' shape (TensorFlow's broadcast rule for these ops).
fn per_parameter(shape: &Tensor, params: &Tensor) -> KResult<(Vec<usize>, usize)> {
    let out = output_shape(shape)?;
    let p = &params.shape;
    if p.len() > out.len() || out[out.len() - p.len()..] != p[..] {
        return Err(KernelError::invalid(format!(
            "Shape passed in must end with broadcasted shape: shape {out:?}, parameters {p:?}"
        )));
    }
    let n = params.num_elements();
    let samples = out.iter().product::<usize>().checked_div(n).unwrap_or(0);
    Ok((out, samples))
}

/// The output shape from the `shape` operand (a vector of int32 or int64).
fn output_shape(t: &Tensor) -> KResult<Vec<usize>> {
    if t.rank() != 1 || !matches!(t.dtype, DType::Int32 | DType::Int64) {
        return Err(KernelError::invalid(format!(
            "shape must be a vector of {{int32,int64}}, got shape {}",
            super::shape_ops::debug_shape(&t.shape)
        )));
    }
    let dims = super::int_values(t, "shape")?;
    dims.iter()
        .map(|&d| usize::try_from(d).map_err(|_| KernelError::invalid(format!("Dimension {d} must be >= 0"))))
        .collect()
}

/// A binomial op's operands after TensorFlow's checks (`random_binomial_op.cc`): the
/// output shape, the samples per (count, prob) pair and the pairs broadcast to the batch
/// shape, as float64, with the parameters' precision.
pub(crate) struct BinomialOperands {
    shape: Vec<usize>,
    samples: usize,
    counts: Vec<f64>,
    probs: Vec<f64>,
    precision: Precision,
}

impl BinomialOperands {
    /// `counts` and `probs` broadcast to a batch shape that `shape` must end with.
    pub(crate) fn new(shape: &Tensor, counts: &Tensor, probs: &Tensor) -> KResult<BinomialOperands> {
        let precision = match (counts.dtype, probs.dtype) {
            (DType::Float16, DType::Float16) => Precision::Half,
            (DType::Float32, DType::Float32) => Precision::Single,
            (DType::Float64, DType::Float64) => Precision::Double,
            (DType::Float16 | DType::Float32 | DType::Float64, _) => return Err(KernelError::DType(probs.dtype)),
            (other, _) => return Err(KernelError::DType(other)),
        };
        let debug = super::shape_ops::debug_shape;
        let batch = autoclust_graph::broadcast_dims(&counts.shape, &probs.shape).ok_or_else(|| {
            KernelError::invalid(format!(
                "counts and probs must have compatible batch dimensions: {} vs. {}",
                debug(&counts.shape),
                debug(&probs.shape)
            ))
        })?;
        if shape.rank() != 1 {
            return Err(KernelError::invalid(format!(
                "Input shape should be a vector, got shape: {}",
                debug(&shape.shape)
            )));
        }
        if !matches!(shape.dtype, DType::Int32 | DType::Int64) {
            return Err(KernelError::invalid("Input shape should have dtype {int32, int64}."));
        }
        let out = output_shape(shape)?;
        if batch.len() > out.len() || out[out.len() - batch.len()..] != batch[..] {
            return Err(KernelError::invalid("Shape passed in must end with broadcasted shape."));
        }
        let pairs: usize = batch.iter().product();
        let samples = out[..out.len() - batch.len()].iter().product();
        let values = |t: &Tensor| t.to_f64_vec().ok_or(KernelError::DType(t.dtype));
        let (counts, probs) = if pairs == 0 {
            (Vec::new(), Vec::new())
        } else {
            let bc = autoclust_numeric::random::broadcast_values;
            (bc(&values(counts)?, &counts.shape, &batch), bc(&values(probs)?, &probs.shape, &batch))
        };
        Ok(BinomialOperands { shape: out, samples, counts, probs, precision })
    }

    /// The counter blocks `StatefulRandomBinomial` moves its state past, in units of 256:
    /// TensorFlow's `num_batches · 2 · 100 · (samples_per_batch + 3) / 4`.
    pub(crate) fn state_delta(&self) -> u64 {
        (self.counts.len() as u64).wrapping_mul(200).wrapping_mul(self.samples as u64 + 3) / 4
    }

    /// The draws from `gen` as a tensor of `dtype` (float16 through float32, as TensorFlow's
    /// `Eigen::half(double)` rounds; integers truncated — a NaN draw, which TensorFlow leaves
    /// undefined in an integer output, is 0 here).
    pub(crate) fn draw(&self, gen: Philox, dtype: DType) -> KResult<Tensor> {
        super::budget(dtype, &self.shape)?;
        let v = autoclust_numeric::random::binomial(gen, &self.counts, &self.probs, self.precision, self.samples);
        match dtype {
            DType::Float16 => {
                super::half::narrow(&tensor_of(self.shape.clone(), v.into_iter().map(|x| x as f32).collect()), dtype)
            }
            _ => draws_as(dtype, self.shape.clone(), v),
        }
    }
}

/// The output types TensorFlow's binomial kernels are registered for (`dtype`).
pub(crate) fn binomial_output_type(dtype: DType) -> KResult<DType> {
    match dtype {
        DType::Float16 | DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 => Ok(dtype),
        other => Err(KernelError::DType(other)),
    }
}

/// The parameterized truncated normal's draws in the float `dtype` from one running
/// generator, batch after batch (`(mean, stddev, minval, maxval)` and the number of samples
/// of each), as float64 values — TensorFlow's kernel run as one shard.
fn truncated_normal_draws(dtype: DType, gen: Philox, batches: &[([f64; 4], usize)]) -> KResult<Vec<f64>> {
    fn run<T: SampleReal>(mut gen: Philox, batches: &[([f64; 4], usize)]) -> Result<Vec<f64>, String> {
        let mut out = Vec::new();
        for &(p, count) in batches {
            let draws = autoclust_numeric::random::truncated_normal_batch(&mut gen, p.map(T::of), count)?;
            out.extend(draws.into_iter().map(T::to_f64));
        }
        Ok(out)
    }
    match dtype {
        DType::Float16 => run::<Half>(gen, batches),
        DType::Float32 => run::<f32>(gen, batches),
        DType::Float64 => run::<f64>(gen, batches),
        other => return Err(KernelError::DType(other)),
    }
    .map_err(KernelError::invalid)
}

/// Float64 values (each exactly a value of `dtype`) as a tensor of the float `dtype`.
fn float_tensor(dtype: DType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    match dtype {
        DType::Float64 => Ok(tensor_of(shape, v)),
        DType::Float32 => Ok(tensor_of(shape, v.into_iter().map(|x| x as f32).collect())),
        DType::Float16 => super::half::narrow(&tensor_of(shape, v.into_iter().map(|x| x as f32).collect()), dtype),
        other => Err(KernelError::DType(other)),
    }
}

/// `ParameterizedTruncatedNormal` (TF1's `parameterized_truncated_normal`): `shape[0]`
/// batches of the remaining dimensions' samples, each parameter a scalar or a vector of one
/// or `shape[0]` values; when every parameter is one value, TensorFlow regroups the samples
/// into batches of 100. The generator reserves `batches · 2 · 1000 · (samples + 3) / 4` blocks.
fn parameterized_truncated_normal(gen: &GuardedPhilox, dtype: DType, inp: &[Tensor]) -> KResult<Tensor> {
    let debug = super::shape_ops::debug_shape;
    if inp[0].rank() != 1 {
        return Err(KernelError::invalid(format!(
            "Input shape should be a vector, got shape: {}",
            debug(&inp[0].shape)
        )));
    }
    if inp[0].num_elements() == 0 {
        return Err(KernelError::invalid("Shape tensor must not be empty"));
    }
    let shape = output_shape(&inp[0])?;
    let n = super::budget(dtype, &shape)?;
    let names = ["means", "stddevs", "minvals", "maxvals"];
    for (t, name) in inp[1..].iter().zip(names) {
        if t.rank() > 1 {
            return Err(KernelError::invalid(format!(
                "Input {name} should be a scalar or vector, got shape: {}",
                debug(&t.shape)
            )));
        }
    }
    let one_value = |t: &Tensor| t.rank() == 0 || t.shape[0] == 1;
    let (batches, per) = if one_value(&inp[1]) && one_value(&inp[2]) && inp[3].rank() == 0 && inp[4].rank() == 0 {
        (n.div_ceil(100), 100)
    } else {
        let batches = shape[0];
        for (t, name) in inp[1..].iter().zip(names) {
            if !(one_value(t) || t.shape[0] == batches) {
                return Err(KernelError::invalid(format!(
                    "Input {name} should have length 1 or shape[0], got shape: {}",
                    debug(&t.shape)
                )));
            }
        }
        (batches, n.checked_div(batches).unwrap_or(0))
    };
    let values: Vec<Vec<f64>> =
        inp[1..].iter().map(|t| t.to_f64_vec().ok_or(KernelError::DType(t.dtype))).collect::<KResult<_>>()?;
    let at = |v: &Vec<f64>, b: usize| if v.len() == 1 { v[0] } else { v[b] };
    let plan: Vec<([f64; 4], usize)> = (0..batches)
        .map(|b| {
            let p = [at(&values[0], b), at(&values[1], b), at(&values[2], b), at(&values[3], b)];
            (p, ((b + 1) * per).min(n).saturating_sub(b * per))
        })
        .collect();
    let local = gen.reserve_blocks((batches as u64 * 2 * 1000 * (per as u64 + 3)) / 4);
    float_tensor(dtype, shape, truncated_normal_draws(dtype, local, &plan)?)
}

/// `StatelessParameterizedTruncatedNormal`: the four parameters broadcast together to a
/// batch shape that `shape` ends with; the leading dimensions are the samples of each
/// batch member, drawn batch after batch from the seed's generator.
fn stateless_parameterized_truncated_normal(dtype: DType, inp: &[Tensor]) -> KResult<Tensor> {
    let debug = super::shape_ops::debug_shape;
    let seed = &inp[1];
    if seed.rank() != 1 || seed.shape[0] != 2 {
        return Err(KernelError::invalid(format!("seed must have shape [2], not {}", debug(&seed.shape))));
    }
    let params = &inp[2..6];
    let batch =
        params[1..].iter().try_fold(params[0].shape.clone(), |acc, t| autoclust_graph::broadcast_dims(&acc, &t.shape));
    let batch = batch.ok_or_else(|| {
        let shapes: Vec<String> = params.iter().map(|t| debug(&t.shape)).collect();
        KernelError::invalid(format!(
            "means, stddevs, minvals, maxvals must have compatible batch dimensions: {}",
            shapes.join(" vs. ")
        ))
    })?;
    if inp[0].rank() != 1 {
        return Err(KernelError::invalid(format!(
            "Input shape should be a vector, got shape: {}",
            debug(&inp[0].shape)
        )));
    }
    let shape = output_shape(&inp[0])?;
    if batch.len() > shape.len() || shape[shape.len() - batch.len()..] != batch[..] {
        return Err(KernelError::invalid("Shape passed in must end with broadcasted shape."));
    }
    let n = super::budget(dtype, &shape)?;
    let batches: usize = batch.iter().product();
    let samples = n.checked_div(batches).unwrap_or(0);
    if n == 0 {
        return float_tensor(dtype, shape, Vec::new());
    }
    let values: Vec<Vec<f64>> = params
        .iter()
        .map(|t| {
            let v = t.to_f64_vec().ok_or(KernelError::DType(t.dtype))?;
            Ok(autoclust_numeric::random::broadcast_values(&v, &t.shape, &batch))
        })
        .collect::<KResult<_>>()?;
    let plan: Vec<([f64; 4], usize)> =
        (0..batches).map(|b| ([values[0][b], values[1][b], values[2][b], values[3][b]], samples)).collect();
    let drawn = truncated_normal_draws(dtype, generator_v1(seed)?, &plan)?;
    // Drawn batch after batch; laid out `[samples, batches]`.
    let mut out = vec![0.0; n];
    for (i, x) in drawn.into_iter().enumerate() {
        out[(i % samples) * batches + i / samples] = x;
    }
    float_tensor(dtype, shape, out)
}

/// The elements of an int32, int64, uint32 or uint64 tensor as C++'s `static_cast<uint64_t>`
/// gives them (signed values sign-extended).
fn u64_values(t: &Tensor) -> KResult<Vec<u64>> {
    let raw = |b: &[u8], w: usize| -> Vec<u64> {
        b.chunks_exact(w)
            .map(|c| {
                if w == 4 {
                    u64::from(u32::from_le_bytes(c.try_into().expect("4")))
                } else {
                    u64::from_le_bytes(c.try_into().expect("8"))
                }
            })
            .collect()
    };
    Ok(match (&t.data, t.dtype) {
        (TensorData::I32(v), _) => v.iter().map(|&x| x as i64 as u64).collect(),
        (TensorData::I64(v), _) => v.iter().map(|&x| x as u64).collect(),
        (TensorData::Raw(b), DType::UInt32) => raw(b, 4),
        (TensorData::Raw(b), DType::UInt64) => raw(b, 8),
        _ => return Err(KernelError::DType(t.dtype)),
    })
}

/// `RandomIndexShuffle(index, seed, max_index)`: each index's place in the permutation of
/// `0..=max_index` its seed row (`[3]` for all, or `[n, 3]`) chooses; index and max_index
/// scalars or vectors of the `n` outputs (`random_index_shuffle_ops.cc`), with TensorFlow
/// 2.21's checks `0 <= index <= max_index`.
fn random_index_shuffle(index: &Tensor, seed: &Tensor, max_index: &Tensor, rounds: usize) -> KResult<Tensor> {
    let n = index.num_elements().max(max_index.num_elements()).max(seed.num_elements() / 3);
    if !(index.rank() == 0 || (index.rank() == 1 && index.shape[0] == n)) {
        return Err(KernelError::invalid("Index bust be a scalar or vector."));
    }
    let debug = super::shape_ops::debug_shape;
    if !((seed.rank() == 1 && seed.shape[0] == 3) || (seed.rank() == 2 && seed.shape[0] == n && seed.shape[1] == 3)) {
        return Err(KernelError::invalid(format!(
            "Seed must be a vector of size [3] or a matrix of size [{n}, 3] but got {}.",
            debug(&seed.shape)
        )));
    }
    if !(max_index.rank() == 0 || (max_index.rank() == 1 && max_index.shape[0] == n)) {
        return Err(KernelError::invalid(format!(
            "Maxval must be a scalar or a vector of the same size as index but got {}",
            debug(&max_index.shape)
        )));
    }
    let (idx, seeds, max) = (u64_values(index)?, u64_values(seed)?, u64_values(max_index)?);
    let signed = matches!(index.dtype, DType::Int32 | DType::Int64);
    let out: Vec<u64> = (0..n)
        .map(|i| {
            let at = |v: &[u64], t: &Tensor| if t.rank() == 0 { v[0] } else { v[i] };
            let (x, m) = (at(&idx, index), at(&max, max_index));
            if signed && (x as i64) < 0 {
                return Err(KernelError::invalid(format!("index must be >= 0 but was {}", x as i64)));
            }
            if signed && (m as i64) < 0 {
                return Err(KernelError::invalid(format!("max_index must be >= 0 but was {}", m as i64)));
            }
            if m < x {
                return Err(KernelError::invalid(format!("max_index must be >= index, but {m} < {x}")));
            }
            let row = if seed.rank() == 1 { 0 } else { 3 * i };
            let key = [seeds[row] as u32, seeds[row + 1] as u32, seeds[row + 2] as u32];
            Ok(autoclust_numeric::random::index_shuffle(x, key, m, rounds))
        })
        .collect::<KResult<_>>()?;
    let shape = if index.rank() == 0 && seed.rank() == 1 && max_index.rank() == 0 { vec![] } else { vec![n] };
    let raw =
        |bytes: Vec<u8>| Tensor { dtype: index.dtype, shape: shape.clone(), data: TensorData::Raw(Arc::new(bytes)) };
    Ok(match index.dtype {
        DType::Int32 => tensor_of(shape.clone(), out.iter().map(|&x| x as i32).collect()),
        DType::Int64 => tensor_of(shape.clone(), out.iter().map(|&x| x as i64).collect()),
        DType::UInt32 => raw(out.iter().flat_map(|&x| (x as u32).to_le_bytes()).collect()),
        DType::UInt64 => raw(out.iter().flat_map(|&x| x.to_le_bytes()).collect()),
        other => return Err(KernelError::DType(other)),
    })
}

/// Attribute naming a random op's generator in the session's [`RandomStates`] when the node's
/// name alone would not be unique (ops in function bodies: `function/node`).
pub(crate) const RANDOM_KEY_ATTR: &str = "_autoclust_random_key";

/// `body` (an instantiated function) with its random ops keyed `function/node`, so a body op
/// never shares a generator with a main-graph op (or another function's op) of the same name;
/// every call of one function shares its ops' generators, as TensorFlow's one kernel per
/// function instantiation does.
pub(crate) fn scope_random_ops(
    body: autoclust_graph::Graph,
    function: &str,
) -> Result<autoclust_graph::Graph, autoclust_graph::GraphError> {
    let is_random = is_random_op;
    if !body.nodes().iter().any(|n| is_random(&n.op)) {
        return Ok(body);
    }
    let mut raw = body.to_raw();
    for n in raw.iter_mut().filter(|n| is_random(&n.op)) {
        let key = format!("{function}/{}", n.name);
        n.attrs.insert(RANDOM_KEY_ATTR.into(), autoclust_graph::AttrValue::S(key.into_bytes()));
    }
    autoclust_graph::Graph::from_raw(raw, body.library.clone(), body.versions.clone())
}

/// `ComputeAccidentalHits`: for each true class (row `i` of `true_classes`) that is also a
/// sampled candidate, the row, the candidate's position (the last one for a repeated
/// candidate, as TensorFlow's map keeps it) and the weight −FLT_MAX, in row-major order.
pub(crate) fn accidental_hits(true_classes: &Tensor, sampled: &Tensor, num_true: usize) -> KResult<super::Outputs> {
    let (Some(t), Some(s)) = (true_classes.as_i64(), sampled.as_i64()) else {
        return Err(KernelError::invalid("true_classes and sampled_candidates must be int64"));
    };
    if true_classes.rank() != 2 || true_classes.shape[1] != num_true || sampled.rank() != 1 {
        return Err(KernelError::invalid(format!(
            "true_classes must be a matrix with num_true = {num_true} columns and sampled_candidates a vector, got {:?} and {:?}",
            true_classes.shape, sampled.shape
        )));
    }
    let position: HashMap<i64, usize> = s.iter().enumerate().map(|(i, &k)| (k, i)).collect();
    let (mut rows, mut ids) = (Vec::new(), Vec::new());
    for (i, row) in t.chunks(num_true.max(1)).enumerate() {
        for k in row {
            if let Some(&p) = position.get(k) {
                rows.push(i as i32);
                ids.push(p as i64);
            }
        }
    }
    let n = rows.len();
    let mut o = super::Outputs::new();
    o.push(tensor_of(vec![n], rows));
    o.push(tensor_of(vec![n], ids));
    o.push(tensor_of(vec![n], vec![-f32::MAX; n]));
    Ok(o)
}

/// The outputs a seeded random op gives on its first run in a fresh session — what `run`'s
/// first step computes, so `explore` and `verify` model one step with it. An op with
/// `seed` and `seed2` both 0 draws from an operating-system-random stream, different on
/// every run: refused.
pub fn first_run(node: &Node, inputs: &[Tensor]) -> KResult<Vec<Tensor>> {
    if attr_int_or(node, "seed", 0)? == 0 && attr_int_or(node, "seed2", 0)? == 0 {
        return Err(KernelError::invalid(format!(
            "{} is unseeded (seed and seed2 are 0), so its values differ on every run; explore and verify need \
             it seeded (tf.random.set_seed, or the op's seed)",
            node.op
        )));
    }
    let f = prepare(node, &RandomStates::new())?.ok_or_else(|| KernelError::NoKernel(node.op.clone()))?;
    Ok(f(inputs.iter().cloned().collect())?.into_vec())
}

/// Prepares a random op's kernel around the node's generator in `states`, or `None` if
/// `node` is not a random op.
pub(crate) fn prepare(node: &Node, states: &RandomStates) -> KResult<Option<PureFn>> {
    let key = node.attr(RANDOM_KEY_ATTR).and_then(|a| a.as_str()).unwrap_or(&node.name).to_string();
    let dist = match node.op.as_str() {
        "RandomUniform" => Some(Dist::Uniform),
        "RandomStandardNormal" => Some(Dist::Normal),
        "TruncatedNormal" => Some(Dist::Truncated),
        "RandomUniformInt" => None,
        "RandomGamma" => {
            let gen = states.get(&key, attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let alpha = &inp[1];
                if !matches!(alpha.dtype, DType::Float32 | DType::Float64) {
                    return Err(KernelError::DType(alpha.dtype));
                }
                let mut shape = output_shape(&inp[0])?;
                let samples: usize = shape.iter().product();
                shape.extend_from_slice(&alpha.shape);
                let n = super::budget(alpha.dtype, &shape)?;
                let alphas = alpha.to_f64_vec().ok_or(KernelError::DType(alpha.dtype))?;
                let local = gen.reserve(n);
                let v = autoclust_numeric::random::gamma(local, &alphas, samples);
                one(match alpha.dtype {
                    DType::Float32 => tensor_of(shape, v.into_iter().map(|x| x as f32).collect()),
                    _ => tensor_of(shape, v),
                })
            })));
        }
        "RandomPoissonV2" => {
            let dtype = attr_type_or(node, "dtype", DType::Int64)?;
            let gen = states.get(&key, attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let rate = &inp[1];
                let rates =
                    rate.to_f64_vec().filter(|_| rate.dtype.is_float()).ok_or(KernelError::DType(rate.dtype))?;
                let mut shape = output_shape(&inp[0])?;
                let samples: usize = shape.iter().product();
                shape.extend_from_slice(&rate.shape);
                let n = super::budget(dtype, &shape)?;
                let v = autoclust_numeric::random::poisson(gen.reserve(n), &rates, samples);
                one(draws_as(dtype, shape, v)?)
            })));
        }
        "ParameterizedTruncatedNormal" => {
            let dtype = attr_type(node, "dtype")?;
            if !matches!(dtype, DType::Float16 | DType::Float32 | DType::Float64) {
                return Err(KernelError::DType(dtype));
            }
            let gen = states.get(&key, attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 5)?;
                one(parameterized_truncated_normal(&gen, dtype, &inp)?)
            })));
        }
        "RandomShuffle" => {
            let gen = states.get(&key, attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let t = &inp[0];
                if t.num_elements() <= 1 || t.shape[0] <= 1 {
                    return one(t.clone());
                }
                let rows = t.shape[0];
                let local = gen.reserve_words(rows as u64 - 1);
                let perm = autoclust_numeric::random::shuffled_indices(local, rows);
                let row = t.num_elements() / rows;
                let src: Vec<Option<usize>> = perm.iter().flat_map(|&r| (r * row..(r + 1) * row).map(Some)).collect();
                one(super::take_or(t, &src, None, t.shape.clone())?)
            })));
        }
        "LogUniformCandidateSampler" | "UniformCandidateSampler" => {
            use autoclust_numeric::random::{expected_count, sample_candidates, Candidates};
            let dist = if node.op == "UniformCandidateSampler" { Candidates::Uniform } else { Candidates::LogUniform };
            let num_true =
                usize::try_from(attr_int_or(node, "num_true", 1)?).map_err(|_| KernelError::Attr("num_true".into()))?;
            let count = usize::try_from(attr_int_or(node, "num_sampled", 1)?)
                .map_err(|_| KernelError::Attr("num_sampled".into()))?;
            let range = u64::try_from(attr_int_or(node, "range_max", 0)?).ok().filter(|&r| r > 0);
            let range = range.ok_or_else(|| KernelError::Attr("range_max".into()))?;
            let unique = super::attr_bool_or(node, "unique", false)?;
            if unique && count as u64 > range {
                return Err(KernelError::invalid("Sampler's range is too small."));
            }
            let gen = states.get(&key, attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let t = &inp[0];
                if t.dtype != DType::Int64 || t.rank() != 2 || t.shape[1] != num_true {
                    return Err(KernelError::invalid(format!(
                        "true_classes must be an int64 matrix with num_true = {num_true} columns, got {} {:?}",
                        t.dtype, t.shape
                    )));
                }
                // TensorFlow reserves 2048 words per sample (rejections past that reuse bits).
                let local = gen.reserve_words(2048 * count as u64);
                let (sampled, tries) = sample_candidates(local, dist, range, count, unique);
                let expect = |k: i64| expected_count(dist.probability(k, range), count, tries);
                let true_counts: Vec<f32> = t.as_i64().expect("checked int64").iter().map(|&k| expect(k)).collect();
                let sampled_counts: Vec<f32> = sampled.iter().map(|&k| expect(k)).collect();
                let mut o = super::Outputs::new();
                o.push(tensor_of(vec![count], sampled));
                o.push(tensor_of(t.shape.clone(), true_counts));
                o.push(tensor_of(vec![count], sampled_counts));
                Ok(o)
            })));
        }
        "Multinomial" => {
            let out = attr_type_or(node, "output_dtype", DType::Int64)?;
            let gen = states.get(&key, attr_int_or(node, "seed", 0)?, attr_int_or(node, "seed2", 0)?);
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (batch, samples) = categorical_dims(&inp[0], &inp[1])?;
                let local = gen.reserve(autoclust_numeric::random::categorical_outputs(batch, samples));
                one(categorical(&inp[0], batch, samples, out, local)?)
            })));
        }
        _ => return Ok(None),
    };
    let seed = attr_int_or(node, "seed", 0)?;
    let seed2 = attr_int_or(node, "seed2", 0)?;
    let f: PureFn = match dist {
        Some(dist) => {
            let dtype = attr_type(node, "dtype")?;
            if !matches!(dtype, DType::Float32 | DType::Float64 | DType::Float16 | DType::BFloat16) {
                return Err(KernelError::DType(dtype));
            }
            let gen = states.get(&key, seed, seed2);
            Box::new(move |inp: Inputs| {
                arity(&inp, 1)?;
                let shape = output_shape(&inp[0])?;
                let n = super::budget(dtype, &shape)?;
                let local = gen.reserve(n);
                one(float_samples(dist, local, n, dtype, shape)?)
            })
        }
        None => {
            let tout = attr_type(node, "Tout")?;
            if !matches!(tout, DType::Int32 | DType::Int64) {
                return Err(KernelError::DType(tout));
            }
            let gen = states.get(&key, seed, seed2);
            Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let shape = output_shape(&inp[0])?;
                for (t, what) in [(&inp[1], "minval"), (&inp[2], "maxval")] {
                    if t.rank() != 0 {
                        return Err(KernelError::invalid(format!(
                            "{what} must be 0-D, got shape {}",
                            super::shape_ops::debug_shape(&t.shape)
                        )));
                    }
                    if t.dtype != tout {
                        return Err(KernelError::invalid(format!("{what} must have dtype {tout}, got {}", t.dtype)));
                    }
                }
                let n = super::budget(tout, &shape)?;
                if n == 0 {
                    return one(super::int_tensor(tout, shape, Vec::new())?);
                }
                let lo = super::int_scalar(&inp[1], "minval")?;
                let hi = super::int_scalar(&inp[2], "maxval")?;
                if lo >= hi {
                    return Err(KernelError::invalid(format!("Need minval < maxval, got {lo} >= {hi}")));
                }
                let local = gen.reserve(n);
                one(match tout {
                    DType::Int32 => tensor_of(shape, uniform_int32(local, n, lo as i32, hi as i32)),
                    _ => tensor_of(shape, uniform_int64(local, n, lo, hi)),
                })
            })
        }
    };
    Ok(Some(f))
}

/// What a stateful generator op (`StatefulUniform`, `StatefulStandardNormalV2`,
/// `StatefulTruncatedNormal`, `StatefulUniformInt`, `StatefulUniformFullInt`) draws: the
/// stateless V2 op's samples from the same key and counter (TensorFlow fills both through
/// `FillPhiloxRandom`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Draw {
    Float(Dist),
    /// Uniform integers in `[minval, maxval)`.
    Int,
    /// Uniform over every value of the dtype.
    FullInt,
}

impl Draw {
    /// The draw of a stateful generator op, if `op` is one.
    pub(crate) fn of_stateful(op: &str) -> Option<Draw> {
        Some(match op {
            "StatefulUniform" => Draw::Float(Dist::Uniform),
            "StatefulStandardNormalV2" => Draw::Float(Dist::Normal),
            "StatefulTruncatedNormal" => Draw::Float(Dist::Truncated),
            "StatefulUniformInt" => Draw::Int,
            "StatefulUniformFullInt" => Draw::FullInt,
            _ => return None,
        })
    }

    /// The dtypes TensorFlow's CPU kernels take (`dtype`).
    pub(crate) fn takes(self, dtype: DType) -> bool {
        match self {
            Draw::Float(_) => matches!(dtype, DType::Float32 | DType::Float64 | DType::Float16 | DType::BFloat16),
            Draw::Int => matches!(dtype, DType::Int32 | DType::Int64),
            Draw::FullInt => matches!(dtype, DType::Int32 | DType::Int64 | DType::UInt32 | DType::UInt64),
        }
    }
}

/// `shape`'s samples of `draw` from `gen` (`bounds`: `Draw::Int`'s `minval`, `maxval`).
pub(crate) fn draw(
    draw: Draw,
    gen: Philox,
    dtype: DType,
    shape: Vec<usize>,
    bounds: Option<(&Tensor, &Tensor)>,
) -> KResult<Tensor> {
    let n = super::budget(dtype, &shape)?;
    Ok(match draw {
        Draw::Float(dist) => float_samples(dist, gen, n, dtype, shape)?,
        Draw::FullInt => full_int(gen, dtype, shape, n),
        Draw::Int => {
            let (lo, hi) =
                bounds.ok_or_else(|| KernelError::invalid("a uniform integer draw needs minval and maxval"))?;
            uniform_ints(gen, dtype, shape, lo, hi)?
        }
    })
}

/// The elements of the output shape operand `shape` (TensorFlow's `MakeShape`).
pub(crate) fn shape_operand(shape: &Tensor) -> KResult<Vec<usize>> {
    output_shape(shape)
}

/// The generator of a V2 stateless op from its `key`, `counter` and `alg` operands (the
/// compiler's parsing, which compiled clusters use too).
fn generator_v2(key: &Tensor, counter: &Tensor, alg: &Tensor) -> KResult<Philox> {
    autoclust_numeric::random::generator_from_key_counter(key, counter, alg).map_err(KernelError::invalid)
}

/// The generator of a V1 stateless op from its `seed` operand (int32 or int64, 2 elements).
fn generator_v1(seed: &Tensor) -> KResult<Philox> {
    autoclust_numeric::random::generator_from_seed(seed).map_err(KernelError::invalid)
}

/// `(batch, num_samples)` after `Multinomial`'s checks of its operands.
fn categorical_dims(logits: &Tensor, num_samples: &Tensor) -> KResult<(usize, usize)> {
    let debug = super::shape_ops::debug_shape;
    if logits.rank() != 2 {
        return Err(KernelError::invalid(format!("logits should be a matrix, got shape {}", debug(&logits.shape))));
    }
    if num_samples.rank() != 0 {
        return Err(KernelError::invalid(format!(
            "num_samples should be a scalar, got shape {}",
            debug(&num_samples.shape)
        )));
    }
    let n = super::int_scalar(num_samples, "num_samples")?;
    let samples =
        usize::try_from(n).map_err(|_| KernelError::invalid(format!("num_samples should be non-negative, got {n}")))?;
    if logits.shape[1] == 0 {
        return Err(KernelError::invalid("num_classes should be positive, got 0"));
    }
    Ok((logits.shape[0], samples))
}

/// `[batch, num_samples]` class indices drawn from each row of `logits`.
fn categorical(logits: &Tensor, batch: usize, samples: usize, out: DType, gen: Philox) -> KResult<Tensor> {
    if !matches!(logits.dtype, DType::Float32 | DType::Float64) {
        return Err(KernelError::DType(logits.dtype));
    }
    super::budget(out, &[batch, samples])?;
    let l = logits.to_f64_vec().ok_or(KernelError::DType(logits.dtype))?;
    let v = autoclust_numeric::random::categorical(gen, &l, batch, logits.shape[1], samples);
    super::int_tensor(out, vec![batch, samples], v)
}

/// `lo + bits % (hi − lo)` after TensorFlow's checks of the bounds.
fn uniform_ints(gen: Philox, dtype: DType, shape: Vec<usize>, lo: &Tensor, hi: &Tensor) -> KResult<Tensor> {
    for (t, what) in [(lo, "minval"), (hi, "maxval")] {
        if t.rank() != 0 {
            return Err(KernelError::invalid(format!(
                "{what} must be 0-D, got shape {}",
                super::shape_ops::debug_shape(&t.shape)
            )));
        }
    }
    let n = super::budget(dtype, &shape)?;
    if n == 0 {
        return super::int_tensor(dtype, shape, Vec::new());
    }
    let (lo, hi) = (super::int_scalar(lo, "minval")?, super::int_scalar(hi, "maxval")?);
    if lo >= hi {
        return Err(KernelError::invalid(format!("Need minval < maxval, got {lo} >= {hi}")));
    }
    Ok(match dtype {
        DType::Int32 => tensor_of(shape, uniform_int32(gen, n, lo as i32, hi as i32)),
        _ => tensor_of(shape, uniform_int64(gen, n, lo, hi)),
    })
}

/// `n` integers of `dtype` (int32, int64, uint32 or uint64) with every bit pattern equally
/// likely, as TensorFlow's `UniformFullIntDistribution` draws them.
fn full_int(gen: Philox, dtype: DType, shape: Vec<usize>, n: usize) -> Tensor {
    let raw =
        |bytes: Vec<u8>| Tensor { dtype, shape: shape.clone(), data: TensorData::Raw(std::sync::Arc::new(bytes)) };
    match dtype {
        DType::Int32 => {
            tensor_of(shape, autoclust_numeric::random::full_int32(gen, n).into_iter().map(|x| x as i32).collect())
        }
        DType::Int64 => {
            tensor_of(shape, autoclust_numeric::random::full_int64(gen, n).into_iter().map(|x| x as i64).collect())
        }
        DType::UInt32 => {
            raw(autoclust_numeric::random::full_int32(gen, n).into_iter().flat_map(u32::to_le_bytes).collect())
        }
        _ => raw(autoclust_numeric::random::full_int64(gen, n).into_iter().flat_map(u64::to_le_bytes).collect()),
    }
}

/// The kernels of TensorFlow's stateless random ops — pure functions of their operands:
/// `StatelessRandomGetKeyCounter`, `StatelessRandomGetAlg`, the V2 samplers
/// (`StatelessRandom{Uniform,Normal}V2`, `StatelessTruncatedNormalV2`,
/// `StatelessRandomUniformIntV2`, from a key and counter: what Keras 3's dropout and
/// initializers emit) and the V1 samplers (`StatelessRandomUniform`, … from a seed). The
/// samplers are the stateful ops' distributions on a generator built from the operands,
/// so they give TensorFlow's numbers bit for bit. `None` if `node` is none of these.
pub(crate) fn prepare_stateless(node: &Node) -> KResult<Option<PureFn>> {
    let dist = match node.op.as_str() {
        "StatelessRandomGammaV2" | "StatelessRandomGammaV3" | "StatelessRandomPoisson" => {
            let (v3, gamma) = (node.op == "StatelessRandomGammaV3", node.op != "StatelessRandomPoisson");
            let dtype = if gamma { None } else { Some(attr_type(node, "dtype")?) };
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, if v3 { 5 } else { 3 })?;
                let params = &inp[inp.len() - 1];
                let values =
                    params.to_f64_vec().filter(|_| params.dtype.is_float()).ok_or(KernelError::DType(params.dtype))?;
                let gen = if v3 { generator_v2(&inp[1], &inp[2], &inp[3])? } else { generator_v1(&inp[1])? };
                let (shape, samples) = per_parameter(&inp[0], params)?;
                let dtype = dtype.unwrap_or(params.dtype);
                super::budget(dtype, &shape)?;
                let v = if gamma {
                    autoclust_numeric::random::gamma(gen, &values, samples)
                } else {
                    autoclust_numeric::random::poisson(gen, &values, samples)
                };
                one(draws_as(dtype, shape, v)?)
            })));
        }
        // `tf.random.stateless_binomial`: (shape, seed, counts, probs).
        "StatelessRandomBinomial" => {
            let dtype = binomial_output_type(attr_type_or(node, "dtype", DType::Int64)?)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 4)?;
                let seed = &inp[1];
                if seed.rank() != 1 || seed.shape[0] != 2 {
                    return Err(KernelError::invalid(format!(
                        "seed must have shape [2], not {}",
                        super::shape_ops::debug_shape(&seed.shape)
                    )));
                }
                let operands = BinomialOperands::new(&inp[0], &inp[2], &inp[3])?;
                let gen = generator_v1(seed)?;
                one(operands.draw(gen, dtype)?)
            })));
        }
        "StatelessParameterizedTruncatedNormal" => {
            let dtype = attr_type(node, "dtype")?;
            if !matches!(dtype, DType::Float16 | DType::Float32 | DType::Float64) {
                return Err(KernelError::DType(dtype));
            }
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 6)?;
                one(stateless_parameterized_truncated_normal(dtype, &inp)?)
            })));
        }
        "RandomIndexShuffle" => {
            let rounds = attr_int_or(node, "rounds", 4)?;
            let rounds = usize::try_from(rounds)
                .ok()
                .filter(|r| *r >= 4 && r % 2 == 0)
                .ok_or_else(|| KernelError::invalid(format!("rounds must be an even number >= 4, got {rounds}")))?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                one(random_index_shuffle(&inp[0], &inp[1], &inp[2], rounds)?)
            })));
        }
        "ComputeAccidentalHits" => {
            let num_true =
                usize::try_from(attr_int_or(node, "num_true", 1)?).map_err(|_| KernelError::Attr("num_true".into()))?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                accidental_hits(&inp[0], &inp[1], num_true)
            })));
        }
        "StatelessRandomGetKeyCounter" => {
            return Ok(Some(Box::new(|inp: Inputs| {
                arity(&inp, 1)?;
                let gen = generator_v1(&inp[0])?;
                let (key, counter) = autoclust_numeric::random::key_counter_tensors(&gen);
                let mut o = super::Outputs::new();
                o.push(key);
                o.push(counter);
                Ok(o)
            })));
        }
        "StatelessRandomGetAlg" => {
            return Ok(Some(Box::new(|inp: Inputs| {
                arity(&inp, 0)?;
                one(Tensor::scalar_i32(1))
            })));
        }
        // `tf.random.experimental.stateless_shuffle` (Keras 3's `random.shuffle`): the rows of
        // `value` in `RandomShuffle`'s order, drawn from the key/counter generator.
        "StatelessShuffle" => {
            return Ok(Some(Box::new(|inp: Inputs| {
                arity(&inp, 4)?;
                let gen = generator_v2(&inp[1], &inp[2], &inp[3])?;
                let t = &inp[0];
                if t.rank() == 0 || t.num_elements() <= 1 || t.shape[0] <= 1 {
                    return one(t.clone());
                }
                let rows = t.shape[0];
                let perm = autoclust_numeric::random::shuffled_indices(gen, rows);
                let row = t.num_elements() / rows;
                let src: Vec<Option<usize>> = perm.iter().flat_map(|&r| (r * row..(r + 1) * row).map(Some)).collect();
                one(super::take_or(t, &src, None, t.shape.clone())?)
            })));
        }
        "StatelessRandomUniformFullIntV2" | "StatelessRandomUniformFullInt" => {
            let dtype = attr_type_or(node, "dtype", DType::UInt64)?;
            if !matches!(dtype, DType::Int32 | DType::Int64 | DType::UInt32 | DType::UInt64) {
                return Err(KernelError::DType(dtype));
            }
            let v2 = node.op.ends_with("V2");
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, if v2 { 4 } else { 2 })?;
                let shape = output_shape(&inp[0])?;
                let gen = if v2 { generator_v2(&inp[1], &inp[2], &inp[3])? } else { generator_v1(&inp[1])? };
                let n = super::budget(dtype, &shape)?;
                one(full_int(gen, dtype, shape, n))
            })));
        }
        "StatelessRandomUniformV2" | "StatelessRandomUniform" => Some(Dist::Uniform),
        "StatelessRandomNormalV2" | "StatelessRandomNormal" => Some(Dist::Normal),
        "StatelessTruncatedNormalV2" | "StatelessTruncatedNormal" => Some(Dist::Truncated),
        "StatelessRandomUniformIntV2" | "StatelessRandomUniformInt" => None,
        "StatelessMultinomial" => {
            let out = attr_type_or(node, "output_dtype", DType::Int64)?;
            return Ok(Some(Box::new(move |inp: Inputs| {
                arity(&inp, 3)?;
                let (batch, samples) = categorical_dims(&inp[0], &inp[1])?;
                one(categorical(&inp[0], batch, samples, out, generator_v1(&inp[2])?)?)
            })));
        }
        _ => return Ok(None),
    };
    let v2 = node.op.ends_with("V2");
    let dtype = match dist {
        Some(_) => attr_type(node, "dtype").unwrap_or(DType::Float32),
        None => attr_type(node, "dtype")?,
    };
    let ok = match dist {
        Some(_) => matches!(dtype, DType::Float32 | DType::Float64 | DType::Float16 | DType::BFloat16),
        None => matches!(dtype, DType::Int32 | DType::Int64),
    };
    if !ok {
        return Err(KernelError::DType(dtype));
    }
    Ok(Some(Box::new(move |inp: Inputs| {
        let operands = match (v2, dist) {
            (true, Some(_)) => 4,
            (true, None) => 6,
            (false, Some(_)) => 2,
            (false, None) => 4,
        };
        arity(&inp, operands)?;
        let shape = output_shape(&inp[0])?;
        let gen = if v2 { generator_v2(&inp[1], &inp[2], &inp[3])? } else { generator_v1(&inp[1])? };
        let n = super::budget(dtype, &shape)?;
        match dist {
            Some(dist) => one(float_samples(dist, gen, n, dtype, shape)?),
            None => {
                let (lo, hi) = if v2 { (&inp[4], &inp[5]) } else { (&inp[2], &inp[3]) };
                one(uniform_ints(gen, dtype, shape, lo, hi)?)
            }
        }
    })))
}

/// The samplers whose float output type may be a half type, which they draw themselves
/// (`float_samples`; the binomial and the truncated normal compute float16 parameters in float16) instead of through
/// the half kernels' float32-and-round.
pub(crate) const FLOAT_SAMPLERS: &[&str] = &[
    "StatelessRandomBinomial",
    "StatelessParameterizedTruncatedNormal",
    "RandomUniform",
    "RandomStandardNormal",
    "TruncatedNormal",
    "StatefulUniform",
    "StatefulStandardNormalV2",
    "StatefulTruncatedNormal",
    "StatelessRandomUniform",
    "StatelessRandomUniformV2",
    "StatelessRandomNormal",
    "StatelessRandomNormalV2",
    "StatelessTruncatedNormal",
    "StatelessTruncatedNormalV2",
];

/// `n` samples of `dist` as a tensor of the float `dtype`: float16/bfloat16 uniforms from
/// their own few bits (TensorFlow's `Uint16ToHalf`/`Uint16ToGfloat16`), half normals as the
/// float32 samples rounded (TensorFlow's `Eigen::half(f)`).
fn float_samples(dist: Dist, gen: Philox, n: usize, dtype: DType, shape: Vec<usize>) -> KResult<Tensor> {
    Ok(match dtype {
        DType::Float32 => tensor_of(shape, sample_f32(dist, gen, n)),
        DType::Float16 | DType::BFloat16 => {
            let dist = match dist {
                Dist::Uniform => Dist::UniformHalf { bf16: dtype == DType::BFloat16 },
                d => d,
            };
            let v = sample_f32(dist, gen, n);
            super::half::narrow(&tensor_of(shape, v), dtype)?
        }
        _ => tensor_of(shape, sample_f64(dist, gen, n)),
    })
}

#[cfg(test)]
#[allow(clippy::excessive_precision, clippy::approx_constant)] // TensorFlow's printed values
mod tests {
    use super::*;
    use crate::kernels::tests_support::node;
    use autoclust_graph::AttrValue;
    use autoclust_numeric::random::u64_words;

    // Expected values below were produced by TensorFlow 2.21 (tf.compat.v1 graph,
    // graph seed 7, op seeds 3..6, i.e. attrs seed=7, seed2=op seed), as bit patterns.

    fn shape(v: &[i32]) -> Tensor {
        Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap()
    }

    /// TensorFlow 2.21's draws: `RandomGamma` (seed 11/5; α < 1, α = 1, α > 1), `RandomPoissonV2`
    /// (seed 13/2; rate 1 and 10 by the product of uniforms and the rejection method, 30 by the
    /// rejection method), `StatelessRandomPoisson` (seed [5, 6]) and `StatelessRandomGammaV2`
    /// (seed [3, 4]) with per-column parameters.
    #[test]
    fn gamma_and_poisson_samplers_match_tensorflow() {
        let stateful = |op: &str, attrs: &[(&str, AttrValue)], inputs: Vec<Tensor>| {
            let mut all = vec![("seed", AttrValue::I(0)), ("seed2", AttrValue::I(0))];
            all.extend(attrs.iter().cloned());
            let f = prepare(&node(op, &all), &RandomStates::new()).unwrap().unwrap();
            f(inputs.into()).unwrap().remove(0).to_f64_vec().unwrap()
        };
        let stateless = |op: &str, attrs: &[(&str, AttrValue)], inputs: Vec<Tensor>| {
            let f = prepare_stateless(&node(op, attrs)).unwrap().unwrap();
            f(inputs.into()).unwrap().remove(0).to_f64_vec().unwrap()
        };
        let close = |got: Vec<f64>, want: &[f64]| {
            assert!(got.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-6 * b.abs()), "{got:?} vs {want:?}");
        };
        let f32s = |v: &[f32]| Tensor::from_f32(vec![v.len()], v.to_vec()).unwrap();
        let gamma = stateful(
            "RandomGamma",
            &[("seed", AttrValue::I(11)), ("seed2", AttrValue::I(5))],
            vec![shape(&[3]), f32s(&[0.5, 1.0, 2.5, 7.0])],
        );
        close(
            gamma,
            &[
                0.5763880014419556,
                0.4371950030326843,
                2.681577444076538,
                9.949310302734375,
                0.0829065591096878,
                0.39577504992485046,
                5.23721981048584,
                5.677224636077881,
                0.012191728688776493,
                0.6346859335899353,
                2.9969868659973145,
                3.589369058609009,
            ],
        );
        let poisson = stateful(
            "RandomPoissonV2",
            &[("seed", AttrValue::I(13)), ("seed2", AttrValue::I(2)), ("dtype", AttrValue::Type(DType::Float32))],
            vec![shape(&[3]), f32s(&[1.0, 10.0, 30.0])],
        );
        assert_eq!(poisson, [3.0, 10.0, 27.0, 4.0, 11.0, 32.0, 1.0, 14.0, 27.0]);
        let seed = |a, b| Tensor::from_i64(vec![2], vec![a, b]).unwrap();
        let p = stateless(
            "StatelessRandomPoisson",
            &[("dtype", AttrValue::Type(DType::Float32))],
            vec![shape(&[2, 3]), seed(5, 6), f32s(&[3.0, 15.0, 0.5])],
        );
        assert_eq!(p, [1.0, 16.0, 1.0, 3.0, 18.0, 0.0]);
        let g = stateless("StatelessRandomGammaV2", &[], vec![shape(&[2, 3]), seed(3, 4), f32s(&[1.5, 0.3, 1.0])]);
        close(
            g,
            &[
                1.1969660520553589,
                0.8456183075904846,
                4.8859639167785645,
                0.7541293501853943,
                0.00014861900126561522,
                2.6179914474487305,
            ],
        );
    }

    /// `tf.raw_ops.StatelessRandomBinomial` in TensorFlow 2.21 (eager), e.g. case A:
    /// `tf.raw_ops.StatelessRandomBinomial(shape=tf.constant([4], tf.int32), seed=tf.constant([1, 2],
    /// tf.int64), counts=tf.constant([10., 20., 5., 100.], tf.float32), probs=tf.constant([.5, .3, .9,
    /// .02], tf.float32), dtype=tf.int32).numpy().tolist()`, the others with the operands below.
    /// Both methods (count·p < 10: inversion, else BTRS), p > ½ through q, several samples per
    /// pair, counts `[2, 1]` against probs `[3]`, float16/32/64 parameters and every output type.
    #[test]
    fn stateless_binomial_matches_tensorflow() {
        let run = |shape_: &[i32], seed: [i64; 2], counts: Tensor, probs: Tensor, dtype: DType| {
            let f = prepare_stateless(&node("StatelessRandomBinomial", &[("dtype", AttrValue::Type(dtype))]))
                .unwrap()
                .unwrap();
            let seed = Tensor::from_i64(vec![2], seed.to_vec()).unwrap();
            f(vec![shape(shape_), seed, counts, probs].into()).map(|mut o| o.remove(0))
        };
        let f32s = |s: &[usize], v: &[f32]| Tensor::from_f32(s.to_vec(), v.to_vec()).unwrap();
        let f64s = |s: &[usize], v: &[f64]| Tensor::from_f64(s.to_vec(), v.to_vec()).unwrap();
        let f16s = |s: &[usize], v: &[f32]| super::super::half::narrow(&f32s(s, v), DType::Float16).unwrap();
        // A: float32 parameters, int32 output.
        let a =
            run(&[4], [1, 2], f32s(&[4], &[10.0, 20.0, 5.0, 100.0]), f32s(&[4], &[0.5, 0.3, 0.9, 0.02]), DType::Int32);
        assert_eq!(a.unwrap().as_i32().unwrap(), [6, 9, 4, 2]);
        // B: float64 parameters, int64 output, 3 samples of 2 pairs (both BTRS and inversion).
        let b = run(&[3, 2], [7, 11], f64s(&[2], &[4.0, 50.0]), f64s(&[2], &[0.25, 0.6]), DType::Int64).unwrap();
        assert_eq!(b.shape, [3, 2]);
        assert_eq!(b.as_i64().unwrap(), [1, 26, 1, 31, 0, 29]);
        // C: a scalar-like count [1] against 3 probs, float32 output.
        let c = run(&[2, 3], [3, 4], f32s(&[1], &[1000.0]), f32s(&[3], &[0.1, 0.7, 0.45]), DType::Float32).unwrap();
        assert_eq!(c.as_f32().unwrap(), [111.0, 726.0, 428.0, 104.0, 698.0, 478.0]);
        // D: float16 counts [2, 1] against float16 probs [3], float16 output [2, 2, 3].
        let d = run(&[2, 2, 3], [5, 6], f16s(&[2, 1], &[30.0, 7.0]), f16s(&[3], &[0.2, 0.5, 0.95]), DType::Float16)
            .unwrap();
        assert_eq!(d.dtype, DType::Float16);
        let want = [4.0, 16.0, 29.0, 0.0, 3.0, 7.0, 9.0, 17.0, 30.0, 1.0, 3.0, 6.0];
        assert_eq!(super::super::half::widen(&d).unwrap().as_f32().unwrap(), want);
        // E: count 0 and p 0 give 0, p 1 and p 1.5 give the count, count −3 and p −0.2 give 0.
        let e = run(
            &[6],
            [9, 9],
            f32s(&[6], &[0.0, 5.0, 5.0, 5.0, -3.0, 12.0]),
            f32s(&[6], &[0.5, 0.0, 1.0, 1.5, 0.5, -0.2]),
            DType::Int32,
        );
        assert_eq!(e.unwrap().as_i32().unwrap(), [0, 0, 5, 5, 0, 0]);
        // F: a NaN p is NaN in a float output (TensorFlow leaves an integer output undefined).
        let nan = run(&[3], [9, 9], f32s(&[3], &[5.0; 3]), f32s(&[3], &[f32::NAN; 3]), DType::Float64).unwrap();
        assert!(nan.as_f64().unwrap().iter().all(|x| x.is_nan()));
        // H: large counts (BTRS, p > ½ through q) from a seed with a negative half.
        let h = run(
            &[5],
            [-1, 1 << 40],
            f64s(&[5], &[1e6, 3e4, 200.0, 25.0, 40.0]),
            f64s(&[5], &[0.37, 0.999, 0.95, 0.4, 0.25]),
            DType::Int64,
        );
        assert_eq!(h.unwrap().as_i64().unwrap(), [370108, 29963, 192, 8, 8]);
        // I: float16 20·0.5 = 10 takes BTRS.
        let i = run(&[4], [1, 2], f16s(&[4], &[20.0; 4]), f16s(&[4], &[0.5; 4]), DType::Int32);
        assert_eq!(i.unwrap().as_i32().unwrap(), [13, 7, 13, 15]);
        // TensorFlow's checks, with its messages.
        let err = |r: KResult<Tensor>| r.unwrap_err().to_string();
        let one_f = || f32s(&[1], &[1.0]);
        let e = err(run(&[4], [1, 2], f32s(&[2, 1], &[1.0, 2.0]), f32s(&[2], &[0.5, 0.5]), DType::Int32));
        assert!(e.contains("Shape passed in must end with broadcasted shape."), "{e}");
        let e = err(run(&[2, 3], [1, 2], f32s(&[2], &[1.0, 2.0]), f32s(&[3], &[0.5; 3]), DType::Int32));
        assert!(e.contains("counts and probs must have compatible batch dimensions: [2] vs. [3]"), "{e}");
        let f = prepare_stateless(&node("StatelessRandomBinomial", &[("dtype", AttrValue::Type(DType::Int32))]))
            .unwrap()
            .unwrap();
        let e = f(vec![shape(&[2]), Tensor::from_i64(vec![3], vec![1, 2, 3]).unwrap(), one_f(), one_f()].into());
        assert!(e.unwrap_err().to_string().contains("seed must have shape [2], not [3]"));
        let ints = Tensor::from_i32(vec![1], vec![1]).unwrap();
        assert!(run(&[1], [1, 2], ints.clone(), ints, DType::Int32).is_err(), "no integer-parameter kernel");
    }

    /// `tf.raw_ops.StatelessParameterizedTruncatedNormal` and `ParameterizedTruncatedNormal`
    /// in TensorFlow 2.21 (eager), as bit patterns; S1 is
    /// `tf.raw_ops.StatelessParameterizedTruncatedNormal(shape=tf.constant([6], tf.int32),
    /// seed=tf.constant([1, 2], tf.int64), means=tf.constant(0.), stddevs=tf.constant(1.),
    /// minvals=tf.constant(-2.), maxvals=tf.constant(2.))`, the others alike with the operands
    /// below (`ParameterizedTruncatedNormal(..., seed=7, seed2=3)` for V1a). They cover the
    /// three samplers (normal rejection; a uniform proposal on a narrow interval; the
    /// exponential proposal for a one-sided tail, and a bound at −∞ flipped), broadcast
    /// parameters, float16/32/64, and TensorFlow's regrouping of the V1 op's one-value
    /// parameters into batches of 100 (L2, 250 samples). L1 and L2 were also drawn with
    /// `tf.config.threading.set_intra_op_parallelism_threads(1)`: the same numbers.
    #[test]
    fn parameterized_truncated_normal_matches_tensorflow() {
        let typed = |dtype: DType, s: &[usize], v: &[f64]| {
            let t = Tensor::from_f64(s.to_vec(), v.to_vec()).unwrap();
            super::super::elementwise::cast(&t, if dtype == DType::Float16 { DType::Float32 } else { dtype })
                .map(|t| if dtype == DType::Float16 { super::super::half::narrow(&t, dtype).unwrap() } else { t })
                .unwrap()
        };
        let bits = |t: Tensor| -> Vec<u64> {
            match t.dtype {
                DType::Float16 => match &t.data {
                    TensorData::Raw(b) => {
                        b.chunks_exact(2).map(|c| u64::from(u16::from_le_bytes([c[0], c[1]]))).collect()
                    }
                    _ => unreachable!(),
                },
                DType::Float32 => t.as_f32().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
                _ => t.as_f64().unwrap().iter().map(|x| x.to_bits()).collect(),
            }
        };
        type Param<'a> = (&'a [usize], &'a [f64]);
        let stateless = |dtype: DType, sh: &[i32], seed: [i64; 2], params: [Param<'_>; 4]| {
            let f =
                prepare_stateless(&node("StatelessParameterizedTruncatedNormal", &[("dtype", AttrValue::Type(dtype))]))
                    .unwrap()
                    .unwrap();
            let mut inp = vec![shape(sh), Tensor::from_i64(vec![2], seed.to_vec()).unwrap()];
            inp.extend(params.iter().map(|(s, v)| typed(dtype, s, v)));
            f(inp.into()).map(|mut o| o.remove(0))
        };
        let v1 = |dtype: DType, sh: &[i32], seeds: [i64; 2], params: [Param<'_>; 4]| {
            let attrs = [
                ("dtype", AttrValue::Type(dtype)),
                ("seed", AttrValue::I(seeds[0])),
                ("seed2", AttrValue::I(seeds[1])),
            ];
            let f = prepare(&node("ParameterizedTruncatedNormal", &attrs), &RandomStates::new()).unwrap().unwrap();
            let mut inp = vec![shape(sh)];
            inp.extend(params.iter().map(|(s, v)| typed(dtype, s, v)));
            f(inp.into()).map(|mut o| o.remove(0))
        };
        let (f16, f32_, f64_) = (DType::Float16, DType::Float32, DType::Float64);
        let sc = |v: &'static [f64]| -> Param<'static> { (&[], v) };
        let s1 = stateless(f32_, &[6], [1, 2], [sc(&[0.0]), sc(&[1.0]), sc(&[-2.0]), sc(&[2.0])]).unwrap();
        assert_eq!(bits(s1), [0x3f0b4acd, 0x3e545b81, 0x3d96a8e4, 0x3d3e3228, 0xbfa69a7f, 0xbf742ff1]);
        // Float64, [3, 2]: a wide interval (normal rejection) and a narrow one (uniform).
        let s2 = stateless(
            f64_,
            &[3, 2],
            [7, 11],
            [(&[2], &[0.0, 5.0]), (&[2], &[1.0, 2.0]), (&[2], &[-3.0, 5.5]), (&[2], &[3.0, 5.9])],
        );
        let want: [u64; 6] = [
            0x3fe24ec883bcab17,
            0x401701cf632bc3c6,
            0xbfd5d189a4679e4c,
            0x401701e34c097f6c,
            0xbfd4849010fc3db6,
            0x40164882d9b98334,
        ];
        assert_eq!(bits(s2.unwrap()), want);
        // Tails [3, ∞) and (−∞, −2.5] (flipped), and [0.5, 0.7].
        let inf = f64::INFINITY;
        let s3 = stateless(
            f32_,
            &[2, 3],
            [3, 4],
            [(&[1], &[0.0]), (&[1], &[1.0]), (&[3], &[3.0, -inf, 0.5]), (&[3], &[inf, -2.5, 0.7])],
        );
        assert_eq!(bits(s3.unwrap()), [0x405b63f9, 0xc025c164, 0x3f193170, 0x405d4db3, 0xc0206ea3, 0x3f327ebe]);
        // Float16, computed in float16.
        let s4 = stateless(
            f16,
            &[2, 2],
            [5, 6],
            [(&[2], &[1.0, -1.0]), (&[1], &[0.5]), (&[1], &[0.0]), (&[2], &[2.0, 0.1])],
        );
        assert_eq!(bits(s4.unwrap()), [0x3e0c, 0x2ca0, 0x39d8, 0x2180]);
        // Mean 10, stddev 3 in [11, 30]: the bounds on one side of the mean.
        let s5 = stateless(f64_, &[4], [8, 9], [sc(&[10.0]), sc(&[3.0]), sc(&[11.0]), sc(&[30.0])]);
        let want: [u64; 4] = [0x40309844c0f2f76b, 0x40262b2140020a8e, 0x4029114bbb5efb0a, 0x4028602099825d85];
        assert_eq!(bits(s5.unwrap()), want);
        // L1: 40 samples of 3 batch members (one of them a tail), first and last values.
        let l1 = stateless(
            f32_,
            &[40, 3],
            [1, 2],
            [(&[3], &[0.0, 1.0, 2.0]), sc(&[1.0]), (&[3], &[-2.0, 1.2, 4.0]), (&[3], &[2.0, 1.4, inf])],
        );
        let l1 = bits(l1.unwrap());
        assert_eq!(l1[..3], [0x3f0b4acd, 0x3fa1b42e, 0x4090251b]);
        assert_eq!(l1[114..], [0x3ed866e4, 0x3fa8741b, 0x409aeebe, 0x3d53930d, 0x3f9d9655, 0x408bb000]);
        // V1: per-row parameters of a [2, 3] draw.
        let a = v1(
            f32_,
            &[2, 3],
            [7, 3],
            [(&[2], &[0.0, 1.0]), (&[2], &[1.0, 2.0]), (&[2], &[-1.0, 1.5]), (&[2], &[1.0, 9.0])],
        );
        assert_eq!(bits(a.unwrap()), [0xbe4a9270, 0xbe7c3be0, 0xbec348c0, 0x40b55f3a, 0x401d160c, 0x4054c439]);
        let b = v1(f64_, &[5], [11, 5], [sc(&[0.0]), sc(&[1.0]), sc(&[-2.0]), sc(&[2.0])]);
        let want: [u64; 5] =
            [0x3fa33dd0b2c4b97a, 0xbfac393e22262287, 0xbfeb773203a9c150, 0x3ff07974fc975632, 0xbfd69a9ccb4beb10];
        assert_eq!(bits(b.unwrap()), want);
        let c = v1(f16, &[2, 2], [1, 2], [(&[1], &[0.0]), sc(&[1.0]), sc(&[1.0]), sc(&[3.0])]);
        assert_eq!(bits(c.unwrap()), [0x3ff4, 0x3c8b, 0x3e82, 0x3c49]);
        let l2 = bits(v1(f32_, &[250], [3, 4], [sc(&[0.0]), sc(&[1.0]), sc(&[-1.0]), sc(&[1.0])]).unwrap());
        assert_eq!(l2[..3], [0x3f58f404, 0xbe84ade0, 0x3f657a44]);
        assert_eq!(l2[244..], [0xbf26aba4, 0xbf4f7708, 0x3dbdf320, 0xbcbea800, 0x3eecfe88, 0x3f2d2170]);
        // TensorFlow's refusals.
        let err = |r: KResult<Tensor>| r.unwrap_err().to_string();
        let e = err(stateless(f32_, &[2], [1, 2], [sc(&[0.0]), sc(&[-1.0]), sc(&[-2.0]), sc(&[2.0])]));
        assert!(e.contains("Invalid parameters"), "{e}");
        let e = err(stateless(f32_, &[2], [1, 2], [sc(&[0.0]), sc(&[1.0]), sc(&[2.0]), sc(&[-2.0])]));
        assert!(e.contains("Invalid parameters"), "{e}");
        let e = err(stateless(f32_, &[3], [1, 2], [(&[2], &[0.0, 0.0]), sc(&[1.0]), sc(&[-2.0]), sc(&[2.0])]));
        assert!(e.contains("Shape passed in must end with broadcasted shape."), "{e}");
        let e = err(stateless(f32_, &[3], [1, 2], [(&[2], &[0.0, 0.0]), (&[3], &[1.0; 3]), sc(&[-2.0]), sc(&[2.0])]));
        assert!(e.contains("must have compatible batch dimensions: [2] vs. [3] vs. [] vs. []"), "{e}");
    }

    /// `tf.raw_ops.RandomIndexShuffle` in TensorFlow 2.21 (eager), e.g. case A:
    /// `tf.raw_ops.RandomIndexShuffle(index=tf.constant(list(range(10)), tf.int64),
    /// seed=tf.constant([1, 2, 3], tf.int64), max_index=tf.constant(9, tf.int64),
    /// rounds=4).numpy().tolist()`, the others with the operands below: every index and seed
    /// type, per-output seeds and bounds, block sizes from 16 to 64 bits, 6 and 8 rounds, and
    /// the checks. (TensorFlow also runs odd or fewer than 4 rounds, reading past its round
    /// keys; those are refused here.)
    #[test]
    fn random_index_shuffle_matches_tensorflow() {
        let run = |index: Tensor, seed: Tensor, max: Tensor, rounds: i64| {
            let f =
                prepare_stateless(&node("RandomIndexShuffle", &[("rounds", AttrValue::I(rounds))])).unwrap().unwrap();
            f(vec![index, seed, max].into()).map(|mut o| o.remove(0))
        };
        let i64s = |s: &[usize], v: &[i64]| Tensor::from_i64(s.to_vec(), v.to_vec()).unwrap();
        let i32s = |s: &[usize], v: &[i32]| Tensor::from_i32(s.to_vec(), v.to_vec()).unwrap();
        let seed_123 = || i64s(&[3], &[1, 2, 3]);
        let raw = |dtype: DType, s: &[usize], v: &[u64]| {
            let bytes: Vec<u8> = if dtype == DType::UInt32 {
                v.iter().flat_map(|&x| (x as u32).to_le_bytes()).collect()
            } else {
                v.iter().flat_map(|&x| x.to_le_bytes()).collect()
            };
            Tensor::from_raw(dtype, s.to_vec(), bytes).unwrap()
        };
        let a = run(i64s(&[10], &(0..10).collect::<Vec<_>>()), i64s(&[3], &[1, 2, 3]), i64s(&[], &[9]), 4).unwrap();
        assert_eq!(a.as_i64().unwrap(), [2, 0, 6, 4, 8, 1, 7, 9, 5, 3]);
        // B: all scalars (a scalar out), int32 with an int32 seed.
        let b = run(i32s(&[], &[5]), i32s(&[3], &[498247692, 7, 11]), i32s(&[], &[100]), 4).unwrap();
        assert_eq!((b.shape.clone(), b.as_i32().unwrap().to_vec()), (vec![], vec![63]));
        // C: uint32 indices, one uint64 seed row and bound per output (16, 20 and 32-bit blocks).
        let c = run(
            raw(DType::UInt32, &[3], &[0, 1, 2]),
            raw(DType::UInt64, &[3, 3], &[1, 2, 3, 4, 5, 6, 7, 8, 9]),
            raw(DType::UInt32, &[3], &[10, 1000, 70000]),
            4,
        )
        .unwrap();
        assert_eq!(u64_values(&c).unwrap(), [2, 909, 5665]);
        // D: uint64 up to 2^62 (a 62-bit block), seeds of negative int64 words truncated to 32 bits.
        let d = run(
            raw(DType::UInt64, &[3], &[3, 1 << 40, 12345678901]),
            i64s(&[3], &[-1, -2, (1 << 33) + 5]),
            raw(DType::UInt64, &[], &[1 << 62]),
            4,
        )
        .unwrap();
        assert_eq!(u64_values(&d).unwrap(), [4609991142926527977, 4539041826543634678, 716043742504985617]);
        // F: max_index 0 maps to 0; 65536 takes a 16-bit block. G: a 64-bit block.
        let f = run(i32s(&[2], &[0, 1]), raw(DType::UInt32, &[3], &[1, 2, 3]), i32s(&[2], &[0, 65536]), 4).unwrap();
        assert_eq!(f.as_i32().unwrap(), [0, 23762]);
        let g = run(i64s(&[], &[7]), i64s(&[3], &[1, 2, 3]), i64s(&[], &[i64::MAX]), 4).unwrap();
        assert_eq!(g.as_i64().unwrap(), [2038767287013]);
        // E: six rounds (this seed's permutation of 0..=7 is the identity), and eight rounds.
        let e = run(i64s(&[8], &(0..8).collect::<Vec<_>>()), i64s(&[3], &[9, 9, 9]), i64s(&[], &[7]), 6).unwrap();
        assert_eq!(e.as_i64().unwrap(), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(run(i64s(&[], &[4]), seed_123(), i64s(&[], &[5]), 8).unwrap().as_i64().unwrap(), [3]);
        // The documentation's example: index_shuffle(tf.range(4), [5, 9], 3), its seed padded in front.
        let doc = run(i32s(&[4], &[0, 1, 2, 3]), i32s(&[3], &[498247692, 5, 9]), i32s(&[], &[3]), 4).unwrap();
        assert_eq!(doc.as_i32().unwrap(), [2, 0, 1, 3]);
        // TensorFlow's checks.
        let err = |r: KResult<Tensor>| r.unwrap_err().to_string();
        let seed = || i64s(&[3], &[1, 2, 3]);
        let e = err(run(i64s(&[2], &[1, 2]), seed(), i64s(&[3], &[5, 6, 7]), 4));
        assert!(e.contains("Index bust be a scalar or vector."), "{e}");
        let e = err(run(i64s(&[], &[1]), i64s(&[2], &[1, 2]), i64s(&[], &[5]), 4));
        assert!(e.contains("Seed must be a vector of size [3] or a matrix of size [1, 3] but got [2]."), "{e}");
        let e = err(run(i64s(&[2], &[1, 9]), seed(), i64s(&[2], &[5, 5]), 4));
        assert!(e.contains("max_index must be >= index, but 5 < 9"), "{e}");
        let e = err(run(i64s(&[1], &[-2]), seed(), i64s(&[1], &[5]), 4));
        assert!(e.contains("index must be >= 0 but was -2"), "{e}");
        let e = err(run(i64s(&[], &[1]), seed(), i64s(&[], &[-1]), 4));
        assert!(e.contains("max_index must be >= 0 but was -1"), "{e}");
    }

    /// TensorFlow 2.21's first draws of `LogUniformCandidateSampler` (unique, seed 7/3) and
    /// `UniformCandidateSampler` (with repeats, seed 11/0), and `ComputeAccidentalHits` on a
    /// repeated candidate (its last position counts).
    #[test]
    fn candidate_samplers_match_tensorflow() {
        let sampler = |op: &str, num_true: i64, num_sampled: i64, unique: bool, range: i64, seed: i64, seed2: i64| {
            let n = node(
                op,
                &[
                    ("num_true", AttrValue::I(num_true)),
                    ("num_sampled", AttrValue::I(num_sampled)),
                    ("unique", AttrValue::B(unique)),
                    ("range_max", AttrValue::I(range)),
                    ("seed", AttrValue::I(seed)),
                    ("seed2", AttrValue::I(seed2)),
                ],
            );
            prepare(&n, &RandomStates::new()).unwrap().unwrap()
        };
        let f = sampler("LogUniformCandidateSampler", 1, 6, true, 30, 7, 3);
        let out = f(vec![Tensor::from_i64(vec![3, 1], vec![1, 5, 29]).unwrap()].into()).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), [1, 4, 26, 0, 2, 12]);
        let close = |t: &Tensor, want: &[f32]| {
            let got = t.to_f64_vec().unwrap();
            assert!(got.iter().zip(want).all(|(a, &b)| (a - f64::from(b)).abs() <= 1e-6 * f64::from(b)), "{got:?}");
        };
        close(&out[1], &[0.708_444_9, 0.269_338_25, 0.057_291_694]);
        close(&out[2], &[0.708_444_9, 0.318_559_53, 0.063_543, 1.211_094_5, 0.502_649_66, 0.129_484_42]);
        let f = sampler("UniformCandidateSampler", 2, 5, false, 10, 11, 0);
        let out = f(vec![Tensor::from_i64(vec![1, 2], vec![1, 2]).unwrap()].into()).unwrap();
        assert_eq!(out[0].as_i64().unwrap(), [6, 2, 8, 8, 8]);
        close(&out[1], &[0.5, 0.5]);
        let hits = accidental_hits(
            &Tensor::from_i64(vec![2, 2], vec![1, 2, 3, 4]).unwrap(),
            &Tensor::from_i64(vec![4], vec![4, 1, 9, 1]).unwrap(),
            2,
        )
        .unwrap();
        assert_eq!(hits[0].to_i64_vec().unwrap(), [0, 1]);
        assert_eq!(hits[1].as_i64().unwrap(), [3, 0]);
        assert_eq!(hits[2].to_f64_vec().unwrap(), [-f64::from(f32::MAX); 2]);
    }

    fn random_node(op: &str, dtype: DType, seed2: i64) -> Node {
        let tattr = if op == "RandomUniformInt" { "Tout" } else { "dtype" };
        node(
            op,
            &[
                (tattr, AttrValue::Type(dtype)),
                ("T", AttrValue::Type(DType::Int32)),
                ("seed", AttrValue::I(7)),
                ("seed2", AttrValue::I(seed2)),
            ],
        )
    }

    fn run_twice(op: &str, dtype: DType, seed2: i64, inputs: &[Tensor]) -> (Tensor, Tensor) {
        let states = RandomStates::new();
        let f = prepare(&random_node(op, dtype, seed2), &states).unwrap().unwrap();
        let a = f(inputs.iter().cloned().collect()).unwrap().remove(0);
        // A second kernel of the same node (another plan) shares the generator.
        let g = prepare(&random_node(op, dtype, seed2), &states).unwrap().unwrap();
        let b = g(inputs.iter().cloned().collect()).unwrap().remove(0);
        (a, b)
    }

    /// `(op, dtype, seed2, shape, first run, second run)`; floats as bit patterns.
    type Case = (&'static str, DType, i64, i32, [u64; 7], [u64; 7]);

    const CASES: &[Case] = &[
        (
            "RandomUniform",
            DType::Float32,
            3,
            5,
            [1053645668, 1052832008, 1050565536, 1035231488, 1061092764, 0, 0],
            [1055928740, 1044598520, 1061430796, 1021176128, 1063211500, 0, 0],
        ),
        (
            "RandomUniform",
            DType::Float64,
            3,
            3,
            [4596687344047874576, 4602216622276286528, 4606898319253596080, 0, 0, 0, 0],
            [4603272840523052336, 4594733534830869152, 4605020084297597890, 0, 0, 0, 0],
        ),
        (
            "RandomStandardNormal",
            DType::Float32,
            4,
            6,
            [3202364565, 3219157289, 3222094803, 3213793186, 1075017385, 3216845074, 0],
            [1048559198, 3209996794, 1070569230, 3172735962, 3210961136, 1062877015, 0],
        ),
        (
            "RandomStandardNormal",
            DType::Float64,
            4,
            3,
            [4604946832858803012, 13828440293562453470, 13833112373995119007, 0, 0, 0, 0],
            [4605575790202803253, 13825308410063261894, 13828464202052376722, 0, 0, 0, 0],
        ),
        (
            "TruncatedNormal",
            DType::Float32,
            5,
            7,
            [1005485229, 1057541042, 1044115497, 3199966370, 3199441665, 1016312941, 3216773343],
            [3190902926, 3208639029, 1052679371, 1056637547, 3204743216, 3203641444, 3214512563],
        ),
        (
            "TruncatedNormal",
            DType::Float64,
            5,
            3,
            [4598855945141382698, 13820647288128893456, 4600361535087476682, 0, 0, 0, 0],
            [13826718350002223550, 13831590818928542122, 4596482798857445864, 0, 0, 0, 0],
        ),
    ];

    fn bits(t: &Tensor) -> Vec<u64> {
        match t.dtype {
            DType::Float32 => t.as_f32().unwrap().iter().map(|x| u64::from(x.to_bits())).collect(),
            _ => t.as_f64().unwrap().iter().map(|x| x.to_bits()).collect(),
        }
    }

    #[test]
    fn float_distributions_match_tensorflow_bit_for_bit() {
        for &(op, dtype, seed2, n, first, second) in CASES {
            let (a, b) = run_twice(op, dtype, seed2, &[shape(&[n])]);
            assert_eq!(bits(&a), first[..n as usize], "{op} {dtype} first run");
            assert_eq!(bits(&b), second[..n as usize], "{op} {dtype} second run");
        }
    }

    #[test]
    fn uniform_int_matches_tensorflow() {
        let (a, b) = run_twice(
            "RandomUniformInt",
            DType::Int32,
            6,
            &[shape(&[5]), Tensor::scalar_i32(-3), Tensor::scalar_i32(10)],
        );
        assert_eq!(a.as_i32().unwrap(), &[3, 3, 2, -2, -3]);
        assert_eq!(b.as_i32().unwrap(), &[-1, 9, 3, -2, 7]);
        let (a, b) = run_twice(
            "RandomUniformInt",
            DType::Int64,
            6,
            &[shape(&[3]), Tensor::scalar_i64(-3), Tensor::scalar_i64(1_000_000_000_000)],
        );
        assert_eq!(a.to_i64_vec().unwrap(), [977468329344, 814483544156, 467393330372]);
        assert_eq!(b.to_i64_vec().unwrap(), [815446418110, 148019594750, 635762995954]);
    }

    #[test]
    fn uniform_full_int_matches_tensorflow() {
        // TensorFlow 2.21: StatelessRandomUniformFullInt(shape=[5], seed=[1, 2]) per dtype, and
        // the V2 op on StatelessRandomGetKeyCounter(seed=[7, 9]) with int64.
        let seed = Tensor::from_i64(vec![2], vec![1, 2]).unwrap();
        let run = |dtype: DType| {
            let f = prepare_stateless(&node("StatelessRandomUniformFullInt", &[("dtype", AttrValue::Type(dtype))]))
                .unwrap()
                .unwrap();
            f([shape(&[5]), seed.clone()].into_iter().collect()).unwrap().remove(0)
        };
        assert_eq!(run(DType::Int32).as_i32().unwrap(), &[1105988140, 1738052849, -335576002, 370444179, 10670227]);
        let i64s =
            [7464880146280614444, 1591045637757961278, -1057468755545501549, 2524363516007002203, 6884554327646026923];
        assert_eq!(run(DType::Int64).as_i64().unwrap(), &i64s);
        let bytes = |t: Tensor| match t.data {
            TensorData::Raw(b) => b.to_vec(),
            _ => panic!("unsigned ints are raw bytes"),
        };
        let u32s: Vec<u8> =
            [1105988140u32, 1738052849, 3959391294, 370444179, 10670227].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(bytes(run(DType::UInt32)), u32s);
        let u64s: Vec<u8> = i64s.iter().flat_map(|&x| (x as u64).to_le_bytes()).collect();
        assert_eq!(bytes(run(DType::UInt64)), u64s);
        let kc = prepare_stateless(&node("StatelessRandomGetKeyCounter", &[])).unwrap().unwrap();
        let kcv = kc([Tensor::from_i64(vec![2], vec![7, 9]).unwrap()].into_iter().collect()).unwrap();
        let v2 =
            prepare_stateless(&node("StatelessRandomUniformFullIntV2", &[("dtype", AttrValue::Type(DType::Int64))]))
                .unwrap()
                .unwrap();
        let got =
            v2([shape(&[3]), kcv[0].clone(), kcv[1].clone(), Tensor::scalar_i32(1)].into_iter().collect()).unwrap();
        assert_eq!(got[0].as_i64().unwrap(), &[3446757168288027501, -5098880161461899338, -2091296966977614753]);
        let float =
            prepare_stateless(&node("StatelessRandomUniformFullInt", &[("dtype", AttrValue::Type(DType::Float32))]));
        assert!(float.is_err());
    }

    #[test]
    fn multinomial_draws_tensorflows_classes() {
        // TensorFlow 2.21: Multinomial(seed=7, seed2=3) run twice in one session, a float64
        // one (seed 5, 9) with int32 output, and StatelessMultinomial(seed=[11, 42]); a −∞
        // logit is never drawn.
        let logits =
            Tensor::from_f32(vec![2, 5], vec![0.0, 1.0, -1.0, 2.0, f32::NEG_INFINITY, 3.0, 0.5, 0.5, 0.0, 1.0])
                .unwrap();
        // One session per op: the test nodes share a name, which keys a session's generators.
        let seeded = |seed: i64, seed2: i64, out: DType| {
            let states = RandomStates::new();
            let attrs = [
                ("seed", AttrValue::I(seed)),
                ("seed2", AttrValue::I(seed2)),
                ("output_dtype", AttrValue::Type(out)),
                ("T", AttrValue::Type(DType::Float32)),
            ];
            prepare(&node("Multinomial", &attrs), &states).unwrap().unwrap()
        };
        let m = seeded(7, 3, DType::Int64);
        let run = |f: &PureFn, l: &Tensor, n: i32| f([l.clone(), Tensor::scalar_i32(n)].into_iter().collect()).unwrap();
        let a = run(&m, &logits, 7);
        assert_eq!(a[0].shape, vec![2, 7]);
        assert_eq!(a[0].as_i64().unwrap(), &[1, 3, 3, 0, 3, 3, 3, 2, 4, 0, 0, 1, 2, 2]);
        assert_eq!(run(&m, &logits, 7)[0].as_i64().unwrap(), &[1, 1, 3, 3, 1, 3, 3, 2, 0, 0, 0, 0, 1, 0]);
        let l64 = super::super::elementwise::cast(&logits, DType::Float64).unwrap();
        let c = run(&seeded(5, 9, DType::Int32), &l64, 3);
        assert_eq!(c[0].as_i32().unwrap(), &[3, 3, 3, 0, 0, 0]);
        let s = prepare_stateless(&node("StatelessMultinomial", &[])).unwrap().unwrap();
        let seed = Tensor::from_i64(vec![2], vec![11, 42]).unwrap();
        let d = s([logits.clone(), Tensor::scalar_i32(6), seed].into_iter().collect()).unwrap();
        assert_eq!(d[0].as_i64().unwrap(), &[0, 3, 1, 3, 1, 3, 0, 0, 0, 0, 0, 2]);
        let e = m([Tensor::from_f32(vec![3], vec![0.0; 3]).unwrap(), Tensor::scalar_i32(1)].into_iter().collect());
        assert_eq!(e.unwrap_err().to_string(), "logits should be a matrix, got shape [3]");
        let e = m([logits, Tensor::scalar_i32(-1)].into_iter().collect()).unwrap_err();
        assert_eq!(e.to_string(), "num_samples should be non-negative, got -1");
    }

    #[test]
    fn random_shuffle_draws_tensorflows_permutations() {
        // TensorFlow 2.21: stateless_shuffle(range(10), seed=[7, 3]) and of 6 rows of 2, seed [1, 2].
        {
            let shuffle = |x: Tensor, seed: [i64; 2]| {
                let kc = prepare_stateless(&node("StatelessRandomGetKeyCounter", &[])).unwrap().unwrap();
                let o = kc(smallvec::smallvec![Tensor::from_i64(vec![2], seed.to_vec()).unwrap()]).unwrap();
                let f = prepare_stateless(&node("StatelessShuffle", &[])).unwrap().unwrap();
                f(smallvec::smallvec![x, o[0].clone(), o[1].clone(), Tensor::scalar_i32(1)]).unwrap()[0].clone()
            };
            let r = shuffle(Tensor::from_i32(vec![10], (0..10).collect()).unwrap(), [7, 3]);
            assert_eq!(r.as_i32().unwrap(), [0, 5, 3, 1, 4, 2, 7, 8, 9, 6]);
            let r = shuffle(Tensor::from_i32(vec![6, 2], (0..12).collect()).unwrap(), [1, 2]);
            assert_eq!(r.as_i32().unwrap(), [8, 9, 10, 11, 0, 1, 6, 7, 2, 3, 4, 5]);
        }
        // TensorFlow 2.21: RandomShuffle(range(10), seed=7, seed2=3) run twice in a session
        // (its generator moves on by ceil(9 / 4) blocks), and rows of a [6, 2] matrix with
        // seeds 5, 9.
        let shuffle = |seed: i64, seed2: i64| {
            let attrs = [("seed", AttrValue::I(seed)), ("seed2", AttrValue::I(seed2))];
            let states = RandomStates::new();
            let f = prepare(&node("RandomShuffle", &attrs), &states).unwrap().unwrap();
            (f, states)
        };
        let (f, _states) = shuffle(7, 3);
        let v = Tensor::from_i32(vec![10], (0..10).collect()).unwrap();
        assert_eq!(f([v.clone()].into_iter().collect()).unwrap()[0].as_i32().unwrap(), &[3, 4, 2, 9, 8, 5, 1, 6, 7, 0]);
        assert_eq!(f([v].into_iter().collect()).unwrap()[0].as_i32().unwrap(), &[2, 9, 6, 7, 1, 0, 8, 5, 3, 4]);
        let (g, _states) = shuffle(5, 9);
        let m = Tensor::from_f32(vec![6, 2], (0..12).map(|x| x as f32).collect()).unwrap();
        let r = g([m].into_iter().collect()).unwrap();
        assert_eq!(r[0].as_f32().unwrap(), &[4., 5., 8., 9., 10., 11., 0., 1., 2., 3., 6., 7.]);
    }

    #[test]
    fn unseeded_ops_differ_between_sessions() {
        let n = node("RandomUniform", &[("dtype", AttrValue::Type(DType::Float32))]);
        let draw = || prepare(&n, &RandomStates::new()).unwrap().unwrap()([shape(&[8])].into_iter().collect()).unwrap();
        assert_ne!(bits(&draw()[0]), bits(&draw()[0]));
    }

    #[test]
    fn philox_skip_carries_across_words() {
        let mut p = Philox { counter: [u32::MAX, u32::MAX, u32::MAX, 0], key: [1, 2] };
        p.skip(1);
        assert_eq!(p.counter, [0, 0, 0, 1]);
        let mut q = Philox::new(1, 2);
        q.skip(1 << 32);
        assert_eq!(q.counter, [0, 1, 2, 0]);
    }

    #[test]
    fn bad_operands_are_errors() {
        let states = RandomStates::new();
        let f = prepare(&random_node("RandomUniformInt", DType::Int32, 1), &states).unwrap().unwrap();
        let e = f([shape(&[2]), Tensor::scalar_i32(3), Tensor::scalar_i32(3)].into_iter().collect()).unwrap_err();
        assert_eq!(e.to_string(), "Need minval < maxval, got 3 >= 3");
        let g = prepare(&random_node("RandomUniform", DType::Float32, 1), &states).unwrap().unwrap();
        assert!(g([Tensor::scalar_i32(3)].into_iter().collect()).unwrap_err().to_string().contains("vector"));
        // Huge shapes are refused before the generator reserves or anything is allocated.
        let e = g([shape(&[1_000_000, 1_000_000])].into_iter().collect()).unwrap_err();
        assert!(matches!(e, KernelError::TooLarge(_)), "{e}");
        let e = f([shape(&[1 << 30, 1 << 30]), Tensor::scalar_i32(0), Tensor::scalar_i32(3)].into_iter().collect());
        assert!(matches!(e.unwrap_err(), KernelError::TooLarge(_)));
        let s = prepare_stateless(&node("StatelessRandomUniform", &[])).unwrap().unwrap();
        let e = s([shape(&[1 << 30, 1 << 30]), Tensor::from_i32(vec![2], vec![1, 2]).unwrap()].into_iter().collect());
        assert!(matches!(e.unwrap_err(), KernelError::TooLarge(_)));
    }

    /// `tf.raw_ops.StatelessRandomGetKeyCounter(seed=[1, 2])` and
    /// `StatelessRandomUniformV2` on its key and counter, from TensorFlow 2.21 (the fixture
    /// `tf2_keras_dropout` covers every sampler end to end).
    #[test]
    fn stateless_ops_match_tensorflow() {
        let kc = prepare_stateless(&node("StatelessRandomGetKeyCounter", &[])).unwrap().unwrap();
        let seed = Tensor::from_i64(vec![2], vec![1, 2]).unwrap();
        let out = kc([seed.clone()].into_iter().collect()).unwrap();
        assert_eq!(u64_words(&out[0], "key", 1).unwrap(), vec![0x9085_02c9_6d2f_7fba]);
        assert_eq!(u64_words(&out[1], "counter", 2).unwrap(), vec![0, 0xf773_4320_619c_b60b]);
        let uniform = prepare_stateless(&node("StatelessRandomUniformV2", &[])).unwrap().unwrap();
        let u = uniform([shape(&[6]), out[0].clone(), out[1].clone(), Tensor::scalar_i32(1)].into_iter().collect())
            .unwrap();
        let want = [0.844_060_4f32, 0.192_045_33, 0.996_223_2, 0.160_387_4, 0.271_990_18, 0.649_346];
        assert_eq!(u[0].as_f32().unwrap(), &want);
        // V1 from the same seed: the same numbers.
        let v1 = prepare_stateless(&node("StatelessRandomUniform", &[])).unwrap().unwrap();
        let u1 = v1([shape(&[4]), seed.clone()].into_iter().collect()).unwrap();
        assert_eq!(u1[0].as_f32().unwrap(), &want[..4]);
        // Errors: a seed of the wrong length, an unsupported algorithm.
        let bad = Tensor::from_i64(vec![3], vec![1, 2, 3]).unwrap();
        assert!(kc([bad].into_iter().collect()).unwrap_err().to_string().contains("shape [2]"));
        let e = uniform([shape(&[2]), out[0].clone(), out[1].clone(), Tensor::scalar_i32(2)].into_iter().collect());
        assert!(e.unwrap_err().to_string().contains("unsupported random algorithm 2"));
    }
}
