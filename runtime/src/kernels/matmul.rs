//! `MatMul` and `BatchMatMul{,V2,V3}` through `autoclust_numeric::gemm` (matrixmultiply's
//! sgemm/dgemm split over the executor's pool; strided, so transposes cost nothing); integer
//! matmuls use a plain loop.

use autoclust_graph::{DType, Node, Tensor};

use super::{arity, attr_bool_or, one, tensor_of, Elem, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// `C[m,n] = op(A) * op(B)` for row-major `a`, `b` with optional transposes.
#[allow(clippy::too_many_arguments)]
fn gemm<T: Elem + Gemm>(a: &[T], b: &[T], m: usize, k: usize, n: usize, ta: bool, tb: bool, c: &mut [T]) {
    // Element (i, p) of op(A): A is [m,k] (rs=k, cs=1) or transposed [k,m] (rs=1, cs=m).
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    T::gemm(m, k, n, a, rsa, csa, b, rsb, csb, c);
}

/// The element types with a GEMM.
pub(crate) trait Gemm: Sized {
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        m: usize,
        k: usize,
        n: usize,
        a: &[Self],
        rsa: isize,
        csa: isize,
        b: &[Self],
        rsb: isize,
        csb: isize,
        c: &mut [Self],
    );
}

/// Every element type goes through the compiler's GEMM (`autoclust_numeric::gemm`:
/// matrixmultiply's kernels for floats, a wrapping loop for integers, split across the
/// executor's rayon pool for large products — the same routine compiled clusters call).
macro_rules! gemm_via_compiler {
    ($($t:ty),*) => {$(
        impl Gemm for $t {
            fn gemm(
                m: usize,
                k: usize,
                n: usize,
                a: &[$t],
                rsa: isize,
                csa: isize,
                b: &[$t],
                rsb: isize,
                csb: isize,
                c: &mut [$t],
            ) {
                // SAFETY: `a` holds m*k elements, `b` k*n and `c` m*n (checked by the
                // caller); the strides address exactly those row-major layouts.
                unsafe {
                    autoclust_numeric::gemm::gemm(
                        m,
                        k,
                        n,
                        a.as_ptr(),
                        rsa,
                        csa,
                        b.as_ptr(),
                        rsb,
                        csb,
                        c.as_mut_ptr(),
                        rayon::current_num_threads(),
                    )
                }
            }
        }
    )*};
}
gemm_via_compiler!(f32, f64, i32, i64);

fn matmul_typed<T: Elem + Gemm>(a: &Tensor, b: &Tensor, ta: bool, tb: bool) -> KResult<Tensor> {
    if a.rank() != 2 || b.rank() != 2 {
        return Err(KernelError::invalid(format!("MatMul needs matrices, got shapes {:?} and {:?}", a.shape, b.shape)));
    }
    let (m, k) = if ta { (a.shape[1], a.shape[0]) } else { (a.shape[0], a.shape[1]) };
    let (k2, n) = if tb { (b.shape[1], b.shape[0]) } else { (b.shape[0], b.shape[1]) };
    if k != k2 {
        return Err(KernelError::invalid(format!(
            "Matrix size-incompatible: In[0]: {:?}, In[1]: {:?}",
            a.shape, b.shape
        )));
    }
    let mut c = vec![T::zero(); super::budget(T::DTYPE, &[m, n])?];
    gemm(T::slice(a), T::slice(b), m, k, n, ta, tb, &mut c);
    Ok(tensor_of(vec![m, n], c))
}

/// `MatMul` of two matrices.
pub fn matmul(a: &Tensor, b: &Tensor, transpose_a: bool, transpose_b: bool) -> KResult<Tensor> {
    super::check_native(a)?;
    if a.dtype != b.dtype {
        return Err(KernelError::invalid(format!("operands have dtypes {} and {}", a.dtype, b.dtype)));
    }
    match a.dtype {
        DType::Float32 => matmul_typed::<f32>(a, b, transpose_a, transpose_b),
        DType::Float64 => matmul_typed::<f64>(a, b, transpose_a, transpose_b),
        DType::Int32 => matmul_typed::<i32>(a, b, transpose_a, transpose_b),
        DType::Int64 => matmul_typed::<i64>(a, b, transpose_a, transpose_b),
        d => Err(KernelError::DType(d)),
    }
}

fn batch_matmul_typed<T: Elem + Gemm>(a: &Tensor, b: &Tensor, adj_x: bool, adj_y: bool) -> KResult<Tensor> {
    if a.rank() < 2 || b.rank() < 2 {
        return Err(KernelError::invalid("BatchMatMul operands must have rank >= 2"));
    }
    let (ra, rb) = (a.rank(), b.rank());
    let (m, k) = if adj_x { (a.shape[ra - 1], a.shape[ra - 2]) } else { (a.shape[ra - 2], a.shape[ra - 1]) };
    let (k2, n) = if adj_y { (b.shape[rb - 1], b.shape[rb - 2]) } else { (b.shape[rb - 2], b.shape[rb - 1]) };
    if k != k2 {
        return Err(KernelError::invalid(format!(
            "Matrix size-incompatible: In[0]: {:?}, In[1]: {:?}",
            a.shape, b.shape
        )));
    }
    let batch = super::elementwise::broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2])?;
    // A `k = 0` product is as large as its batch, m and n say, whatever its operands hold.
    let nb = super::budget(T::DTYPE, &batch)?;
    super::budget(T::DTYPE, &[&batch[..], &[m, n]].concat())?;
    let sa = super::elementwise::bcast_strides(&a.shape[..ra - 2], &batch);
    let sb = super::elementwise::bcast_strides(&b.shape[..rb - 2], &batch);
    let mut offsets = Vec::with_capacity(nb);
    super::elementwise::for_each_bcast2(&batch, &sa, &sb, |i, j| offsets.push((i, j)));
    let (x, y) = (T::slice(a), T::slice(b));
    let mut c = vec![T::zero(); nb * m * n];
    for (bi, (i, j)) in offsets.into_iter().enumerate() {
        gemm(
            &x[i * m * k..(i + 1) * m * k],
            &y[j * k * n..(j + 1) * k * n],
            m,
            k,
            n,
            adj_x,
            adj_y,
            &mut c[bi * m * n..(bi + 1) * m * n],
        );
    }
    let mut shape = batch;
    shape.extend([m, n]);
    Ok(tensor_of(shape, c))
}

/// `BatchMatMulV3` on the narrow integer types TensorFlow's CPU kernel registers: int8 and
/// uint8 operands (any pairing) into int32 — a Keras `quantize("int8")` Dense layer's
/// product —, and int16 into int16. The products are summed exactly in int64 and wrapped to
/// the output's width, which is what TensorFlow's wrapping int32/int16 accumulation gives.
/// `None` when neither operand is narrow.
fn narrow_batch_matmul(a: &Tensor, b: &Tensor, adj_x: bool, adj_y: bool) -> KResult<Option<Tensor>> {
    let byte = |d: DType| matches!(d, DType::Int8 | DType::UInt8);
    let out = match (a.dtype, b.dtype) {
        (x, y) if byte(x) && byte(y) => DType::Int32,
        (DType::Int16, DType::Int16) => DType::Int16,
        (x, y) if byte(x) || byte(y) || x == DType::Int16 || y == DType::Int16 => {
            return Err(KernelError::invalid(format!("BatchMatMulV3 of {x} and {y} has no kernel in TensorFlow")))
        }
        _ => return Ok(None),
    };
    let wide = batch_matmul_typed::<i64>(&super::widen::to_i64(a)?, &super::widen::to_i64(b)?, adj_x, adj_y)?;
    Ok(Some(match out {
        DType::Int32 => {
            let v = wide.as_i64().expect("an int64 product").iter().map(|&x| x as i32).collect();
            Tensor::from_i32(wide.shape.clone(), v).map_err(|e| KernelError::invalid(e.to_string()))?
        }
        d => super::widen::from_i64(wide, d)?,
    }))
}

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    Ok(Some(match node.op.as_str() {
        "MatMul" => {
            let ta = attr_bool_or(node, "transpose_a", false)?;
            let tb = attr_bool_or(node, "transpose_b", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                one(matmul(&inp[0], &inp[1], ta, tb)?)
            })
        }
        "BatchMatMul" | "BatchMatMulV2" | "BatchMatMulV3" => {
            let ax = attr_bool_or(node, "adj_x", false)?;
            let ay = attr_bool_or(node, "adj_y", false)?;
            Box::new(move |inp: Inputs| {
                arity(&inp, 2)?;
                let (a, b) = (&inp[0], &inp[1]);
                if let Some(out) = narrow_batch_matmul(a, b, ax, ay)? {
                    return one(out);
                }
                super::check_native(a)?;
                if a.dtype != b.dtype {
                    return Err(KernelError::invalid("operands have different dtypes"));
                }
                one(match a.dtype {
                    DType::Float32 => batch_matmul_typed::<f32>(a, b, ax, ay)?,
                    DType::Float64 => batch_matmul_typed::<f64>(a, b, ax, ay)?,
                    DType::Int32 => batch_matmul_typed::<i32>(a, b, ax, ay)?,
                    DType::Int64 => batch_matmul_typed::<i64>(a, b, ax, ay)?,
                    d => return Err(KernelError::DType(d)),
                })
            })
        }
        _ => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::AttrValue;

    fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    fn transpose(a: &[f32], r: usize, c: usize) -> Vec<f32> {
        let mut t = vec![0.0; r * c];
        for i in 0..r {
            for j in 0..c {
                t[j * r + i] = a[i * c + j];
            }
        }
        t
    }

    #[test]
    fn matmul_with_transposes_matches_naive() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want = naive(
            &a.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            &b.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            m,
            k,
            n,
        );
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let at = if ta {
                Tensor::from_f32(vec![k, m], transpose(&a, m, k))
            } else {
                Tensor::from_f32(vec![m, k], a.clone())
            };
            let bt = if tb {
                Tensor::from_f32(vec![n, k], transpose(&b, k, n))
            } else {
                Tensor::from_f32(vec![k, n], b.clone())
            };
            let nd = node("MatMul", &[("transpose_a", AttrValue::B(ta)), ("transpose_b", AttrValue::B(tb))]);
            let c = run1(&nd, &[at.unwrap(), bt.unwrap()]).unwrap();
            assert_eq!(c.shape, vec![m, n]);
            for (x, y) in c.as_f32().unwrap().iter().zip(&want) {
                assert!((*x as f64 - y).abs() < 1e-5, "{ta} {tb}: {x} vs {y}");
            }
        }
    }

    #[test]
    fn int_matmul_and_errors() {
        let a = Tensor::from_i32(vec![2, 2], vec![1, 2, 3, 4]).unwrap();
        let c = run1(&node("MatMul", &[]), &[a.clone(), a.clone()]).unwrap();
        assert_eq!(c.as_i32().unwrap(), &[7, 10, 15, 22]);
        let b = Tensor::from_i32(vec![3, 1], vec![1, 2, 3]).unwrap();
        assert!(run1(&node("MatMul", &[]), &[a, b]).unwrap_err().to_string().contains("size-incompatible"));
    }

    /// TensorFlow 2.21's values: `tf.raw_ops.BatchMatMulV3(x=int8 [[1,-2,127],[-128,5,3]],
    /// y=int8 [[3,1],[-7,2],[127,-128]], Tout=tf.int32)` is `[[16146,-16259],[-38,-502]]`; with
    /// x = uint8 [[1,200,3],[4,5,255]] it is `[[-1016,17],[32362,-32626]]`.
    #[test]
    fn int8_and_uint8_products_into_int32() {
        let raw = |d: DType, shape: Vec<usize>, v: &[i64]| Tensor {
            dtype: d,
            shape,
            data: autoclust_graph::TensorData::Raw(std::sync::Arc::new(v.iter().map(|&x| x as u8).collect())),
        };
        let x = raw(DType::Int8, vec![2, 3], &[1, -2, 127, -128, 5, 3]);
        let y = raw(DType::Int8, vec![3, 2], &[3, 1, -7, 2, 127, -128]);
        let nd = node("BatchMatMulV3", &[("Tout", AttrValue::Type(DType::Int32))]);
        let c = run1(&nd, &[x.clone(), y.clone()]).unwrap();
        assert_eq!(c.dtype, DType::Int32);
        assert_eq!(c.as_i32().unwrap(), &[16146, -16259, -38, -502]);
        // uint8 200 and 255 are not -56 and -1.
        let u = raw(DType::UInt8, vec![2, 3], &[1, 200, 3, 4, 5, 255]);
        let c = run1(&nd, &[u, y.clone()]).unwrap();
        assert_eq!(c.as_i32().unwrap(), &[-1016, 17, 32362, -32626]);
        // adj_y reads y transposed; float32 with int8 is refused, as TensorFlow registers no such kernel.
        let yt = raw(DType::Int8, vec![2, 3], &[3, -7, 127, 1, 2, -128]);
        let nd_t = node("BatchMatMulV3", &[("Tout", AttrValue::Type(DType::Int32)), ("adj_y", AttrValue::B(true))]);
        assert_eq!(run1(&nd_t, &[x.clone(), yt]).unwrap().as_i32().unwrap(), &[16146, -16259, -38, -502]);
        let f = Tensor::from_f32(vec![3, 2], vec![0.0; 6]).unwrap();
        assert!(run1(&nd, &[x, f]).is_err());
    }

    #[test]
    fn batch_matmul_broadcasts_batches() {
        let a = Tensor::from_f64(vec![2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let b = Tensor::from_f64(vec![2, 1], vec![10.0, 1.0]).unwrap();
        let c = run1(&node("BatchMatMulV2", &[]), &[a, b]).unwrap();
        assert_eq!(c.shape, vec![2, 1, 1]);
        assert_eq!(c.as_f64().unwrap(), &[12.0, 34.0]);
    }
}
