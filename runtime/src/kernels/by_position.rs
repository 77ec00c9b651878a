//! Data-movement ops for every dtype: `ConcatV2`, `Pack`, `Split`, `Slice`, `Transpose`,
//! `Tile`, `GatherV2`, `Pad`, `Select`, `ResizeNearestNeighbor`, … on strings, `uint8` images, `int8`/`int16`/`uint*`
//! and complex tensors, which their typed kernels (float32/64, int32/64, bool) do not cover.
//!
//! Such an op only moves, repeats or drops elements (or fills new positions with zero or a
//! given value), so it is run on element *positions*: each data input is replaced by an
//! `int64` tensor of the same shape holding `1 + the position` of each element in the
//! concatenation of the data inputs, the op's `int64` kernel runs, and every output position
//! `p` is read back from that concatenation (`0`, the `int64` zero a padding op writes,
//! becomes the dtype's zero: `""`, zero bytes). The result is exactly the op's, whatever the
//! element type, because no element is inspected.
//!
//! `Unique` and its variants, `Equal` and `NotEqual` compare elements for equality only: each
//! data element is replaced by the position of the first equal one among all data inputs,
//! which has the same equality structure, and unique values are read back the same way.
//!
//! Max pooling (`MaxPool`, `MaxPoolV2`, `MaxPool3D`, `MaxPoolWithArgmax`) on the integer types
//! compares elements by order only: each element is replaced by its rank among the input's
//! distinct values (a `float64` holds every rank exactly), the op's `float64` kernel runs, and
//! each output rank is read back as the value of that rank. Equal values share a rank, so
//! ties (and an argmax among them) fall as they would on the values themselves.

use std::collections::HashMap;
use std::sync::Arc;

use autoclust_graph::{AttrValue, DType, Node, Tensor, TensorData};

use super::{take_or, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// Which inputs carry elements.
#[derive(Clone, Copy, Debug)]
enum Data {
    These(&'static [usize]),
    /// All but `first` leading and `last` trailing inputs.
    AllBut {
        first: usize,
        last: usize,
    },
    /// `DynamicStitch`: the second half (after the index lists).
    SecondHalf,
}

/// How an op is run on positions: its data inputs, whether they are replaced by
/// first-occurrence ids (`Unique`), and which outputs carry elements (`None`: all).
#[derive(Clone, Copy, Debug)]
struct Movement {
    data: Data,
    by_value: bool,
    outputs: Option<&'static [usize]>,
}

fn movement(op: &str) -> Option<Movement> {
    use Data::*;
    let data = match op {
        "ConcatV2" => AllBut { first: 0, last: 1 },
        "Concat" => AllBut { first: 1, last: 0 },
        "Pack" => AllBut { first: 0, last: 0 },
        "Unpack"
        | "Slice"
        | "StridedSlice"
        | "Transpose"
        | "ReverseV2"
        | "Reverse"
        | "Tile"
        | "GatherV2"
        | "Gather"
        | "GatherNd"
        | "MirrorPad"
        | "Pad"
        | "BroadcastTo"
        | "SpaceToBatchND"
        | "BatchToSpaceND"
        | "SpaceToBatch"
        | "BatchToSpace"
        | "SpaceToDepth"
        | "DepthToSpace"
        | "ReverseSequence"
        | "Roll"
        | "MatrixBandPart"
        | "MatrixDiagPart"
        | "SplitV"
        | "ResizeNearestNeighbor" => These(&[0]),
        "MatrixDiagPartV2" | "MatrixDiagPartV3" => These(&[0, 2]),
        "Split" | "Fill" | "ScatterNd" => These(&[1]),
        "PadV2" | "TensorScatterUpdate" => These(&[0, 2]),
        "StridedSliceGrad" => These(&[4]),
        "Select" | "SelectV2" => These(&[1, 2]),
        "MatrixSetDiag" | "MatrixSetDiagV2" | "MatrixSetDiagV3" => These(&[0, 1]),
        "MatrixDiagV3" | "MatrixDiagV2" => These(&[0, 4]),
        "MatrixDiag" => These(&[0]),
        "TensorStridedSliceUpdate" => These(&[0, 4]),
        "OneHot" => These(&[2, 3]),
        "DynamicStitch" | "ParallelDynamicStitch" => SecondHalf,
        "Unique" | "UniqueV2" | "UniqueWithCounts" | "UniqueWithCountsV2" => {
            return Some(Movement { data: These(&[0]), by_value: true, outputs: Some(&[0]) })
        }
        "Equal" | "NotEqual" => return Some(Movement { data: These(&[0, 1]), by_value: true, outputs: Some(&[]) }),
        _ => return None,
    };
    Some(Movement { data, by_value: false, outputs: None })
}

/// The dtypes the typed kernels handle themselves.
pub(crate) fn typed(d: DType) -> bool {
    matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool)
}

fn data_positions(m: Movement, n: usize) -> Vec<usize> {
    match m.data {
        Data::These(v) => v.iter().copied().filter(|&i| i < n).collect(),
        Data::AllBut { first, last } => (first..n.saturating_sub(last)).collect(),
        Data::SecondHalf => (n / 2..n).collect(),
    }
}

/// The element type `node` moves, from its attributes.
fn element_dtype(node: &Node) -> Option<DType> {
    ["T", "Tparams"].iter().find_map(|k| node.attr(k).and_then(AttrValue::as_type))
}

/// `node` with its element type attributes set to `int64`.
fn int64_twin(node: &Node) -> Node {
    let mut n = node.clone();
    for k in ["T", "Tparams"] {
        if let Some(v) = n.attrs.get_mut(k) {
            *v = AttrValue::Type(DType::Int64);
        }
    }
    n
}

/// All data inputs' elements in one flat tensor (they share a dtype).
pub(crate) fn flat_concat(parts: &[&Tensor]) -> KResult<Tensor> {
    let dtype = parts[0].dtype;
    if parts.iter().any(|t| t.dtype != dtype) {
        return Err(KernelError::invalid("the data inputs' dtypes differ"));
    }
    let n: usize = parts.iter().map(|t| t.num_elements()).sum();
    macro_rules! cat {
        ($var:ident) => {{
            let mut v = Vec::with_capacity(n);
            for t in parts {
                match &t.data {
                    TensorData::$var(x) => v.extend_from_slice(x),
                    _ => return Err(KernelError::DType(dtype)),
                }
            }
            TensorData::$var(Arc::new(v))
        }};
    }
    let data = match &parts[0].data {
        TensorData::F32(_) => cat!(F32),
        TensorData::F64(_) => cat!(F64),
        TensorData::I32(_) => cat!(I32),
        TensorData::I64(_) => cat!(I64),
        TensorData::Bool(_) => cat!(Bool),
        TensorData::Str(_) => cat!(Str),
        TensorData::Raw(_) => cat!(Raw),
        TensorData::List(_) | TensorData::Optional(_) => return Err(KernelError::DType(dtype)),
    };
    Ok(Tensor { dtype, shape: vec![n], data })
}

/// For each element of `t`, the position of the first element equal to it.
fn first_occurrence(t: &Tensor) -> KResult<Vec<i64>> {
    let n = t.num_elements();
    let keys: Vec<&[u8]> = match &t.data {
        TensorData::Str(v) => v.iter().map(Vec::as_slice).collect(),
        TensorData::Raw(b) => {
            let w = b.len() / n.max(1);
            (0..n).map(|i| &b[i * w..(i + 1) * w]).collect()
        }
        _ => return Err(KernelError::DType(t.dtype)),
    };
    let mut first: HashMap<&[u8], i64> = HashMap::with_capacity(n);
    Ok(keys.iter().enumerate().map(|(i, k)| *first.entry(*k).or_insert(i as i64)).collect())
}

/// Runs `int` (the op's `int64` kernel) on positions and reads the elements back.
fn run_on_positions(m: Movement, int: &PureFn, mut inp: Inputs) -> KResult<Outputs> {
    let data = data_positions(m, inp.len());
    if data.is_empty() {
        return int(inp);
    }
    let sources: Vec<Tensor> = data.iter().map(|&i| inp[i].clone()).collect();
    let refs: Vec<&Tensor> = sources.iter().collect();
    let flat = flat_concat(&refs)?;
    let firsts = if m.by_value { first_occurrence(&flat)? } else { Vec::new() };
    let mut offset = 1i64;
    for (&i, t) in data.iter().zip(&sources) {
        let n = t.num_elements();
        let ids: Vec<i64> = if m.by_value {
            firsts[(offset - 1) as usize..(offset - 1) as usize + n].iter().map(|&p| p + 1).collect()
        } else {
            (offset..offset + n as i64).collect()
        };
        inp[i] = Tensor { dtype: DType::Int64, shape: t.shape.clone(), data: TensorData::I64(Arc::new(ids)) };
        offset += n as i64;
    }
    let zero = Tensor::zeros(flat.dtype, vec![1]).map_err(|e| KernelError::invalid(e.to_string()))?;
    let outs = int(inp)?;
    let mut result = Outputs::new();
    for (k, o) in outs.into_iter().enumerate() {
        let carries = m.outputs.is_none_or(|v| v.contains(&k));
        if !carries || o.dtype != DType::Int64 {
            result.push(o);
            continue;
        }
        let pos = o.as_i64().ok_or(KernelError::DType(o.dtype))?;
        let src: Vec<Option<usize>> = pos.iter().map(|&p| (p > 0).then(|| (p - 1) as usize)).collect();
        result.push(take_or(&flat, &src, Some(&zero), o.shape.clone())?);
    }
    Ok(result)
}

/// Each element of the integer tensor `t` as an `i128` (every integer type's values, in order).
fn order_keys(t: &Tensor) -> KResult<Vec<i128>> {
    Ok(match (&t.data, t.dtype) {
        (TensorData::I32(v), _) => v.iter().map(|&x| x as i128).collect(),
        (TensorData::I64(v), _) => v.iter().map(|&x| x as i128).collect(),
        (TensorData::Raw(b), DType::Int8) => b.iter().map(|&x| x as i8 as i128).collect(),
        (TensorData::Raw(b), DType::UInt8) => b.iter().map(|&x| x as i128).collect(),
        (TensorData::Raw(b), DType::Int16) => {
            b.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]]) as i128).collect()
        }
        (TensorData::Raw(b), DType::UInt16) => {
            b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]) as i128).collect()
        }
        (TensorData::Raw(b), DType::UInt32) => {
            b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i128).collect()
        }
        (TensorData::Raw(b), DType::UInt64) => {
            b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")) as i128).collect()
        }
        _ => return Err(KernelError::DType(t.dtype)),
    })
}

/// Max pooling on an integer type, by rank (module docs): `None` for another op or type.
fn prepare_by_order(node: &Node, prepare_typed: fn(&Node) -> KResult<PureFn>) -> Option<KResult<PureFn>> {
    if !matches!(node.op.as_str(), "MaxPool" | "MaxPoolV2" | "MaxPool3D" | "MaxPoolWithArgmax") {
        return None;
    }
    let dtype = node.attr("T").and_then(AttrValue::as_type).filter(|d| d.is_integer())?;
    let mut twin = node.clone();
    twin.attrs.insert("T".into(), AttrValue::Type(DType::Float64));
    let wide = match prepare_typed(&twin) {
        Ok(f) => f,
        Err(e) => return Some(Err(e)),
    };
    Some(Ok(Box::new(move |mut inp: Inputs| {
        let Some(x) = inp.first() else { return wide(inp) };
        if x.dtype != dtype {
            return Err(KernelError::DType(x.dtype));
        }
        let keys = order_keys(x)?;
        let mut by_value: Vec<usize> = (0..keys.len()).collect();
        by_value.sort_by_key(|&i| keys[i]);
        // `rank[i]`: element i's rank among the distinct values; `holder[r]`: an element of rank r.
        let (mut rank, mut holder) = (vec![0f64; keys.len()], Vec::new());
        for (k, &i) in by_value.iter().enumerate() {
            if k == 0 || keys[i] != keys[by_value[k - 1]] {
                holder.push(i);
            }
            rank[i] = (holder.len() - 1) as f64;
        }
        let source = x.clone();
        inp[0] = Tensor { dtype: DType::Float64, shape: source.shape.clone(), data: TensorData::F64(Arc::new(rank)) };
        let mut outs = wide(inp)?;
        let pooled = &outs[0];
        let ranks = pooled.as_f64().ok_or(KernelError::DType(pooled.dtype))?;
        let src: Vec<Option<usize>> = ranks.iter().map(|&r| holder.get(r as usize).copied()).collect();
        outs[0] = take_or(&source, &src, None, pooled.shape.clone())?;
        Ok(outs)
    })))
}

/// Wraps the kernel of a data-movement op so that it runs on every dtype; `prepare_typed`
/// prepares a node's own kernel. `None` when `node` is not such an op.
pub(crate) fn prepare(node: &Node, prepare_typed: fn(&Node) -> KResult<PureFn>) -> Option<KResult<PureFn>> {
    if let Some(f) = prepare_by_order(node, prepare_typed) {
        return Some(f);
    }
    let m = movement(&node.op)?;
    let own = prepare_typed(node);
    let declared = element_dtype(node);
    if declared.is_some_and(typed) {
        return Some(own);
    }
    let int = match prepare_typed(&int64_twin(node)) {
        Ok(f) => f,
        Err(_) => return Some(own),
    };
    let own = own.ok();
    Some(Ok(Box::new(move |inp: Inputs| {
        let data = data_positions(m, inp.len());
        let all_typed = data.iter().all(|&i| typed(inp[i].dtype));
        match &own {
            Some(f) if all_typed => f(inp),
            _ => run_on_positions(m, &int, inp),
        }
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};

    fn strs(shape: Vec<usize>, v: &[&str]) -> Tensor {
        Tensor::from_strings(shape, v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
    }
    fn text(t: &Tensor) -> Vec<String> {
        let TensorData::Str(v) = &t.data else { panic!("{} is not a string tensor", t.dtype) };
        v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    }
    fn t_attr(d: DType) -> [(&'static str, AttrValue); 1] {
        [("T", AttrValue::Type(d))]
    }
    fn i32s(v: &[i32]) -> Tensor {
        Tensor::from_i32(vec![v.len()], v.to_vec()).unwrap()
    }

    /// Integer max pooling by rank and nearest-neighbour resizing by position give
    /// TensorFlow 2.21's values (`tf.nn.max_pool2d` and `tf.image.resize(method="nearest")`
    /// of a uint8 image, an int8 one, and `MaxPoolWithArgmax` with a tie on int32).
    #[test]
    fn integer_max_pooling_and_nearest_resizing_match_tensorflow() {
        use autoclust_graph::ListValue;
        let px: [u8; 16] = [5, 1, 7, 3, 2, 9, 4, 8, 6, 0, 13, 11, 10, 12, 15, 14];
        let img = |d: DType, v: Vec<u8>| Tensor::from_raw(d, vec![1, 4, 4, 1], v).unwrap();
        let bytes = |t: &Tensor| match &t.data {
            TensorData::Raw(b) => b.to_vec(),
            _ => panic!("{} is not raw", t.dtype),
        };
        let pool = |d: DType, k: i64, s: i64, pad: &str| {
            node(
                "MaxPool",
                &[
                    ("T", AttrValue::Type(d)),
                    ("ksize", AttrValue::List(ListValue::I(vec![1, k, k, 1]))),
                    ("strides", AttrValue::List(ListValue::I(vec![1, s, s, 1]))),
                    ("padding", AttrValue::S(pad.as_bytes().to_vec())),
                ],
            )
        };
        let x = img(DType::UInt8, px.to_vec());
        let y = run1(&pool(DType::UInt8, 2, 2, "VALID"), std::slice::from_ref(&x)).unwrap();
        assert_eq!((y.dtype, y.shape.clone(), bytes(&y)), (DType::UInt8, vec![1, 2, 2, 1], vec![9, 8, 12, 15]));
        let y = run1(&pool(DType::UInt8, 3, 1, "SAME"), std::slice::from_ref(&x)).unwrap();
        assert_eq!(bytes(&y), [9, 9, 9, 8, 9, 13, 13, 13, 12, 15, 15, 15, 12, 15, 15, 15]);
        // int8: the pixels minus 8 (negative values order below positive ones).
        let x8 = img(DType::Int8, px.iter().map(|&p| (p as i8 - 8) as u8).collect());
        let y = run1(&pool(DType::Int8, 2, 1, "VALID"), &[x8]).unwrap();
        assert_eq!(bytes(&y).iter().map(|&b| b as i8).collect::<Vec<_>>(), [1, 1, 0, 1, 5, 5, 4, 7, 7]);
        // A tie: the first of the equal maxima is the argmax, as on the values themselves.
        let with_argmax = node(
            "MaxPoolWithArgmax",
            &[
                ("T", AttrValue::Type(DType::Int32)),
                ("ksize", AttrValue::List(ListValue::I(vec![1, 2, 2, 1]))),
                ("strides", AttrValue::List(ListValue::I(vec![1, 2, 2, 1]))),
                ("padding", AttrValue::S(b"VALID".to_vec())),
            ],
        );
        let outs = crate::kernels::prepare(&with_argmax).unwrap()(
            [Tensor::from_i32(vec![1, 2, 2, 1], vec![3, 3, 1, 2]).unwrap()].into_iter().collect(),
        )
        .unwrap();
        assert_eq!((outs[0].as_i32().unwrap(), outs[1].as_i64().unwrap()), (&[3][..], &[0i64][..]));
        // Nearest-neighbour resizing of the uint8 image to 6×5 (TensorFlow 2's half-pixel
        // centres).
        let resize = node(
            "ResizeNearestNeighbor",
            &[("T", AttrValue::Type(DType::UInt8)), ("half_pixel_centers", AttrValue::B(true))],
        );
        let y = run1(&resize, &[x, i32s(&[6, 5])]).unwrap();
        assert_eq!((y.dtype, y.shape.clone()), (DType::UInt8, vec![1, 6, 5, 1]));
        assert_eq!(
            bytes(&y),
            [5, 1, 7, 7, 3, 2, 9, 4, 4, 8, 2, 9, 4, 4, 8, 6, 0, 13, 13, 11, 10, 12, 15, 15, 14, 10, 12, 15, 15, 14]
        );
    }

    #[test]
    fn strings_move_like_numbers() {
        let x = strs(vec![2, 2], &["a", "b", "c", "d"]);
        let cat =
            run1(&node("ConcatV2", &t_attr(DType::String)), &[x.clone(), x.clone(), Tensor::scalar_i32(1)]).unwrap();
        assert_eq!(cat.shape, vec![2, 4]);
        assert_eq!(text(&cat), ["a", "b", "a", "b", "c", "d", "c", "d"]);
        let tr = run1(&node("Transpose", &t_attr(DType::String)), &[x.clone(), i32s(&[1, 0])]).unwrap();
        assert_eq!(text(&tr), ["a", "c", "b", "d"]);
        // Padding writes the dtype's zero: the empty string.
        let pads = Tensor::from_i32(vec![2, 2], vec![1, 0, 0, 1]).unwrap();
        let p = run1(&node("Pad", &t_attr(DType::String)), &[x.clone(), pads]).unwrap();
        assert_eq!(text(&p), ["", "", "", "a", "b", "", "c", "d", ""]);
        // Several outputs, each read back.
        let parts = crate::kernels::compute(
            &node("Split", &[("T", AttrValue::Type(DType::String)), ("num_split", AttrValue::I(2))]),
            &[Tensor::scalar_i32(1), x.clone()],
        )
        .unwrap();
        assert_eq!(text(&parts[1]), ["b", "d"]);
        // Select takes from two data inputs.
        let cond = Tensor::from_bool(vec![2, 2], vec![true, false, false, true]).unwrap();
        let y = strs(vec![2, 2], &["w", "x", "y", "z"]);
        let s = run1(&node("SelectV2", &t_attr(DType::String)), &[cond, x, y]).unwrap();
        assert_eq!(text(&s), ["a", "x", "y", "d"]);
    }

    #[test]
    fn unique_and_equality_by_value() {
        let x = strs(vec![5], &["b", "a", "b", "c", "a"]);
        let u = crate::kernels::compute(
            &node("Unique", &[("T", AttrValue::Type(DType::String)), ("out_idx", AttrValue::Type(DType::Int32))]),
            std::slice::from_ref(&x),
        )
        .unwrap();
        assert_eq!(text(&u[0]), ["b", "a", "c"]);
        assert_eq!(u[1].as_i32().unwrap(), &[0, 1, 0, 2, 1]);
        let bytes = |v: &[u16]| {
            Tensor::from_raw(DType::UInt16, vec![v.len()], v.iter().flat_map(|x| x.to_le_bytes()).collect()).unwrap()
        };
        let eq = run1(&node("Equal", &t_attr(DType::UInt16)), &[bytes(&[1, 300, 7]), bytes(&[1, 44, 7])]).unwrap();
        assert_eq!(eq.as_bool().unwrap(), &[true, false, true]);
    }

    #[test]
    fn wide_elements_keep_their_bytes() {
        let x = Tensor::from_raw(DType::Int16, vec![3], [-2i16, 300, 7].iter().flat_map(|v| v.to_le_bytes()).collect())
            .unwrap();
        let g = run1(
            &node("GatherV2", &[("Tparams", AttrValue::Type(DType::Int16))]),
            &[x, i32s(&[2, 0, 1]), Tensor::scalar_i32(0)],
        )
        .unwrap();
        assert_eq!(g.dtype, DType::Int16);
        assert_eq!(g.to_f64_vec().unwrap(), [7.0, -2.0, 300.0]);
    }
}
