//! Data movement and bit-level kernels shared by the compiled code and the interpreter:
//! `SpaceToBatchND`/`BatchToSpaceND` (what `tf.nn.convolution` wraps around a dilated
//! convolution, e.g. a Keras `Conv1D(dilation_rate=2)`), `Bitcast` and the integer bitwise
//! ops (Keras 3's `argmax` tests the sign bit of a float with them, so every Keras
//! accuracy metric has one). Every function checks its operands as TensorFlow's CPU kernel
//! does and returns its error message otherwise.

use std::sync::Arc;

use autoclust_graph::{DType, Tensor, TensorData};

/// The geometry of a `SpaceToBatchND` (`to_batch`) or `BatchToSpaceND`: block shape
/// `[M]` and, per spatial dimension, the padding (or crop) before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceBatch {
    pub to_batch: bool,
    pub block: Vec<usize>,
    pub pads: Vec<(usize, usize)>,
}

impl SpaceBatch {
    /// From the `block_shape` and `paddings`/`crops` operand values, checked as TensorFlow's
    /// kernels check them.
    pub fn new(to_batch: bool, block: &[i64], pads: &[i64]) -> Result<SpaceBatch, String> {
        let what = if to_batch { "paddings" } else { "crops" };
        if pads.len() != 2 * block.len() {
            return Err(format!("{what} should have shape [{}, 2], has {} elements", block.len(), pads.len()));
        }
        if let Some(b) = block.iter().find(|&&b| b < 1) {
            return Err(format!("block_shape must be positive, got {b}"));
        }
        if let Some(p) = pads.iter().find(|&&p| p < 0) {
            return Err(format!("{what} must be non-negative, got {p}"));
        }
        Ok(SpaceBatch {
            to_batch,
            block: block.iter().map(|&b| b as usize).collect(),
            pads: pads.chunks(2).map(|p| (p[0] as usize, p[1] as usize)).collect(),
        })
    }

    /// The output shape for `input`, or TensorFlow's error.
    pub fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>, String> {
        let m = self.block.len();
        if input.len() < m + 1 {
            return Err(format!("input rank should be > {m} (the block rank), got shape {input:?}"));
        }
        let prod = self.block.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).ok_or("block too large")?;
        let mut out = Vec::with_capacity(input.len());
        if self.to_batch {
            out.push(input[0].checked_mul(prod).ok_or("batch too large")?);
        } else {
            if !input[0].is_multiple_of(prod) {
                return Err(format!(
                    "Input batch dimension ({}) is not divisible by the product of block sizes ({prod})",
                    input[0]
                ));
            }
            out.push(input[0] / prod);
        }
        for k in 0..m {
            let (s, b, (lo, hi)) = (input[1 + k], self.block[k], self.pads[k]);
            if self.to_batch {
                let padded = s + lo + hi;
                if !padded.is_multiple_of(b) {
                    return Err(format!("padded_shape[{k}]={padded} is not divisible by block_shape[{k}]={b}"));
                }
                out.push(padded / b);
            } else {
                let full = s * b;
                if lo + hi > full {
                    return Err(format!("crops must be less than or equal to the cropped size: {lo} + {hi} > {full}"));
                }
                out.push(full - lo - hi);
            }
        }
        out.extend_from_slice(&input[m + 1..]);
        Ok(out)
    }

    /// Moves `x` (shape `input`) into a new buffer of shape `out` (from
    /// [`SpaceBatch::output_shape`]); padding is zero (`T::default()`).
    pub fn copy<T: Copy + Default>(&self, x: &[T], input: &[usize], out: &[usize]) -> Vec<T> {
        let m = self.block.len();
        let rest: usize = input[m + 1..].iter().product();
        let total: usize = out.iter().product();
        let mut o = vec![T::default(); total];
        if total == 0 {
            return o;
        }
        let in_strides = crate::layout::strides_of(&input[..m + 1]);
        let spatial = &out[1..=m];
        let per_batch: usize = spatial.iter().product();
        let mut pos = vec![0usize; m];
        // The smaller batch: the input's for SpaceToBatchND, the output's for BatchToSpaceND.
        let small = if self.to_batch { input[0] } else { out[0] };
        let mut dst = 0usize;
        for ob in 0..out[0] {
            pos.iter_mut().for_each(|p| *p = 0);
            for _ in 0..per_batch {
                // The source row of output row (ob, pos), or None for padding.
                let src = if self.to_batch {
                    let (b, mut bi) = (ob % small, ob / small);
                    let mut offs = vec![0usize; m];
                    for k in (0..m).rev() {
                        offs[k] = bi % self.block[k];
                        bi /= self.block[k];
                    }
                    let mut at = b * in_strides[0];
                    let mut inside = true;
                    for k in 0..m {
                        let p = pos[k] * self.block[k] + offs[k];
                        let (lo, s) = (self.pads[k].0, input[1 + k]);
                        if p < lo || p - lo >= s {
                            inside = false;
                            break;
                        }
                        at += (p - lo) * in_strides[1 + k];
                    }
                    inside.then_some(at)
                } else {
                    let mut bi = 0usize;
                    let mut at = 0usize;
                    for k in 0..m {
                        let p = pos[k] + self.pads[k].0;
                        bi = bi * self.block[k] + p % self.block[k];
                        at += (p / self.block[k]) * in_strides[1 + k];
                    }
                    Some(at + (bi * small + ob) * in_strides[0])
                };
                if let Some(s) = src {
                    o[dst..dst + rest].copy_from_slice(&x[s * rest..][..rest]);
                }
                dst += rest;
                crate::layout::next_index(&mut pos, spatial);
            }
        }
        o
    }

    /// [`SpaceBatch::copy`] over any tensor dtype.
    pub fn run(&self, x: &Tensor) -> Result<Tensor, String> {
        let shape = self.output_shape(&x.shape)?;
        autoclust_graph::limits::tensor_elements(x.dtype, &shape).map_err(|e| e.to_string())?;
        let data = match &x.data {
            TensorData::F32(v) => TensorData::F32(Arc::new(self.copy(v, &x.shape, &shape))),
            TensorData::F64(v) => TensorData::F64(Arc::new(self.copy(v, &x.shape, &shape))),
            TensorData::I32(v) => TensorData::I32(Arc::new(self.copy(v, &x.shape, &shape))),
            TensorData::I64(v) => TensorData::I64(Arc::new(self.copy(v, &x.shape, &shape))),
            TensorData::Bool(v) => TensorData::Bool(Arc::new(self.copy(v, &x.shape, &shape))),
            _ => return Err(format!("{} of {} is not supported", self.op_name(), x.dtype)),
        };
        Ok(Tensor { dtype: x.dtype, shape, data })
    }

    fn op_name(&self) -> &'static str {
        if self.to_batch {
            "SpaceToBatchND"
        } else {
            "BatchToSpaceND"
        }
    }
}

/// The little-endian bytes of a fixed-width tensor's elements.
fn le_bytes(t: &Tensor) -> Option<Vec<u8>> {
    Some(match &t.data {
        TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::Raw(b) => b.to_vec(),
        _ => return None,
    })
}

/// A tensor of `dtype` and `shape` from little-endian bytes (native buffers for the native
/// numeric dtypes, raw bytes for the other fixed-width ones).
fn from_le_bytes(dtype: DType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor, String> {
    let data = match dtype {
        DType::Float32 => {
            TensorData::F32(Arc::new(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()))
        }
        DType::Float64 => {
            TensorData::F64(Arc::new(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()))
        }
        DType::Int32 => {
            TensorData::I32(Arc::new(b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()))
        }
        DType::Int64 => {
            TensorData::I64(Arc::new(b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()))
        }
        _ => return Tensor::from_raw(dtype, shape, b.to_vec()).map_err(|e| e.to_string()),
    };
    Ok(Tensor { dtype, shape, data })
}

/// `Bitcast`'s output shape for an input of `from` to `to` (TensorFlow's rule: equal widths
/// keep the shape, a narrower type adds a last dimension, a wider one consumes it).
pub fn bitcast_shape(shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, String> {
    let (Some(fw), Some(tw)) = (from.size_of(), to.size_of()) else {
        return Err(format!("cannot bitcast {from} to {to}"));
    };
    if from == DType::Bool || to == DType::Bool {
        return Err(format!("cannot bitcast {from} to {to}"));
    }
    let mut out = shape.to_vec();
    if fw > tw {
        out.push(fw / tw);
    } else if fw < tw {
        if out.last() != Some(&(tw / fw)) {
            return Err(format!("Cannot bitcast from {from} to {to}: shape {shape:?} does not end in {}", tw / fw));
        }
        out.pop();
    }
    Ok(out)
}

/// `Bitcast` of `x` to `to`: the same bytes read as another type.
pub fn bitcast(x: &Tensor, to: DType) -> Result<Tensor, String> {
    let shape = bitcast_shape(&x.shape, x.dtype, to)?;
    let bytes = le_bytes(x).ok_or_else(|| format!("cannot bitcast {}", x.dtype))?;
    from_le_bytes(to, shape, &bytes)
}

/// An integer bitwise binary op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitwiseKind {
    And,
    Or,
    Xor,
    LeftShift,
    RightShift,
}

impl BitwiseKind {
    pub fn from_tf(op: &str) -> Option<BitwiseKind> {
        Some(match op {
            "BitwiseAnd" => BitwiseKind::And,
            "BitwiseOr" => BitwiseKind::Or,
            "BitwiseXor" => BitwiseKind::Xor,
            "LeftShift" => BitwiseKind::LeftShift,
            "RightShift" => BitwiseKind::RightShift,
            _ => return None,
        })
    }

    /// One element. Shifts follow TensorFlow's CPU kernel: the shift amount is clamped to
    /// `[0, bits − 1]`, and a right shift is arithmetic for signed types.
    fn apply64(self, a: i64, b: i64, bits: u32) -> i64 {
        let sh = b.clamp(0, i64::from(bits) - 1) as u32;
        match self {
            BitwiseKind::And => a & b,
            BitwiseKind::Or => a | b,
            BitwiseKind::Xor => a ^ b,
            BitwiseKind::LeftShift => a.wrapping_shl(sh),
            BitwiseKind::RightShift => a >> sh,
        }
    }

    /// `a op b` broadcast to `out` (int32 or int64 operands of one dtype).
    pub fn run(self, a: &Tensor, b: &Tensor, out: &[usize]) -> Result<Tensor, String> {
        let data = match (&a.data, &b.data) {
            (TensorData::I32(x), TensorData::I32(y)) => {
                TensorData::I32(Arc::new(crate::layout::broadcast_binary(x, &a.shape, y, &b.shape, out, |p, q| {
                    self.apply64(i64::from(p), i64::from(q), 32) as i32
                })))
            }
            (TensorData::I64(x), TensorData::I64(y)) => {
                TensorData::I64(Arc::new(crate::layout::broadcast_binary(x, &a.shape, y, &b.shape, out, |p, q| {
                    self.apply64(p, q, 64)
                })))
            }
            (TensorData::Raw(x), TensorData::Raw(y)) if a.dtype == b.dtype && narrow_int_width(a.dtype).is_some() => {
                // int8/16, uint8/16/32/64 (Keras' posterization shifts uint8 pixels): each
                // element extended exactly to i128, the op at the type's own width (its shift
                // clamp), the result truncated back.
                let w = narrow_int_width(a.dtype).expect("checked");
                let signed = matches!(a.dtype, DType::Int8 | DType::Int16);
                let decode = |bytes: &[u8]| -> Vec<i128> {
                    bytes
                        .chunks_exact(w)
                        .map(|c| {
                            let mut le = [0u8; 16];
                            le[..w].copy_from_slice(c);
                            let v = i128::from_le_bytes(le);
                            let unused = 128 - 8 * w as u32;
                            if signed {
                                (v << unused) >> unused
                            } else {
                                v
                            }
                        })
                        .collect()
                };
                let bits = 8 * w as u32;
                let r = crate::layout::broadcast_binary(&decode(x), &a.shape, &decode(y), &b.shape, out, |p, q| {
                    let sh = q.clamp(0, i128::from(bits) - 1) as u32;
                    match self {
                        BitwiseKind::And => p & q,
                        BitwiseKind::Or => p | q,
                        BitwiseKind::Xor => p ^ q,
                        BitwiseKind::LeftShift => p << sh,
                        BitwiseKind::RightShift => p >> sh,
                    }
                });
                TensorData::Raw(Arc::new(r.iter().flat_map(|v| v.to_le_bytes()[..w].to_vec()).collect()))
            }
            _ => return Err(format!("{self:?} of {} and {} is not supported", a.dtype, b.dtype)),
        };
        Ok(Tensor { dtype: a.dtype, shape: out.to_vec(), data })
    }
}

/// The byte width of the integer types held as raw bytes that the bitwise ops take.
fn narrow_int_width(d: DType) -> Option<usize> {
    match d {
        DType::Int8 | DType::UInt8 => Some(1),
        DType::Int16 | DType::UInt16 => Some(2),
        DType::UInt32 => Some(4),
        DType::UInt64 => Some(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(dtype: DType, bytes: Vec<u8>) -> Tensor {
        let n = bytes.len() / dtype.size_of().unwrap();
        Tensor { dtype, shape: vec![n], data: TensorData::Raw(Arc::new(bytes)) }
    }

    fn bytes(t: &Tensor) -> Vec<u8> {
        match &t.data {
            TensorData::Raw(b) => b.to_vec(),
            _ => panic!("raw bytes expected"),
        }
    }

    /// Shifts of the narrow integer types at their own width, as TensorFlow's CPU kernel:
    /// the amount clamped to [0, bits − 1], a signed right shift arithmetic, a left shift
    /// wrapping (sweep 62: Keras' posterization shifts uint8 pixels).
    #[test]
    fn narrow_integer_shifts_clamp_at_their_own_width() {
        let run = |k: BitwiseKind, d: DType, a: Vec<u8>, b: Vec<u8>| {
            let (a, b) = (raw(d, a), raw(d, b));
            bytes(&k.run(&a, &b, &a.shape.clone()).unwrap())
        };
        use BitwiseKind::{LeftShift as L, RightShift as R};
        assert_eq!(run(R, DType::UInt8, vec![200, 1, 255], vec![10, 3, 0]), [1, 0, 255]);
        assert_eq!(run(L, DType::UInt8, vec![1, 200, 255], vec![10, 1, 4]), [128, 144, 240]);
        let i8s = |v: &[i8]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
        assert_eq!(run(R, DType::Int8, i8s(&[-128, -1, 100]), i8s(&[3, 20, -2])), i8s(&[-16, -1, 100]));
        assert_eq!(run(L, DType::Int8, i8s(&[1, -1, 64]), i8s(&[7, 1, 1])), i8s(&[-128, -2, -128]));
        let u16s = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(run(R, DType::UInt16, u16s(&[0x8000]), u16s(&[20])), u16s(&[1]));
        assert_eq!(run(L, DType::UInt16, u16s(&[3]), u16s(&[15])), u16s(&[0x8000]));
        let u64s = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(run(R, DType::UInt64, u64s(&[u64::MAX]), u64s(&[70])), u64s(&[1]));
        assert_eq!(run(BitwiseKind::Xor, DType::UInt8, vec![0xF0], vec![0xFF]), [0x0F]);
        // Mixed types stay refused.
        assert!(L.run(&raw(DType::UInt8, vec![1]), &raw(DType::Int8, vec![1]), &[1]).is_err());
    }
}
