//! Data-movement ops for every dtype: `ConcatV2`, `Pack`, `Split`, `Slice`, `Transpose`,
//! `Tile`, `GatherV2`, `Pad`, `Select`, … on strings, `uint8` images, `int8`/`int16`/`uint*`
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
        "Unpack" | "Slice" | "StridedSlice" | "Transpose" | "ReverseV2" | "Reverse" | "Tile" | "GatherV2"
        | "Gather" | "GatherNd" | "MirrorPad" | "Pad" | "BroadcastTo" | "SpaceToBatchND" | "BatchToSpaceND"
        | "SpaceToBatch" | "BatchToSpace" | "SpaceToDepth" | "DepthToSpace" | "ReverseSequence" | "Roll"
        | "MatrixBandPart" | "MatrixDiagPart" | "SplitV" => These(&[0]),
        "MatrixDiagPartV2" | "MatrixDiagPartV3" => These(&[0, 2]),
        "Split" | "Fill" | "ScatterNd" => These(&[1]),
        "PadV2" | "TensorScatterUpdate" => These(&[0, 2]),
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

/// Wraps the kernel of a data-movement op so that it runs on every dtype; `prepare_typed`
/// prepares a node's own kernel. `None` when `node` is not such an op.
pub(crate) fn prepare(node: &Node, prepare_typed: fn(&Node) -> KResult<PureFn>) -> Option<KResult<PureFn>> {
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
