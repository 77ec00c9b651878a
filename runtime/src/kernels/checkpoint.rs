//! The checkpoint ops of TF1 `Saver` and TF2 `tf.train.Checkpoint` graphs
//! (`save_restore_v2_ops.cc`): `SaveV2` writes named tensors as a TensorFlow checkpoint
//! (`PREFIX.index` and `PREFIX.data-00000-of-00001`, the tensor bundle format of
//! `autoclust_graphdef::tensor_bundle`, which `run --checkpoint` also reads), `RestoreV2`
//! reads them back (whole tensors, or a slice of one by its `shape_and_slices` spec
//! `"d0 d1 … start,length:…"`, `-` for a whole dimension, as partitioned variables restore),
//! `MergeV2Checkpoints` joins the per-shard checkpoints of a sharded save into one and
//! removes them, and `ShardedFilename`/`ShardedFilespec` spell shard names.
//!
//! Files are written beside their final names and renamed into place, so a failed save
//! leaves no partial checkpoint. Saving a slice of a partitioned tensor (a non-empty
//! `shape_and_slices` in `SaveV2`) is refused with a message: the writer stores whole
//! tensors. A merged checkpoint is one shard (TensorFlow keeps the shards' data files);
//! both read the same. Errors are TensorFlow's words where it has them.

use std::path::{Path, PathBuf};

use autoclust_graph::{AttrValue, DType, ListValue, Node, Tensor};
use autoclust_graphdef::tensor_bundle::{checkpoint_bytes, data_path, index_path, read_checkpoint};
use autoclust_graphdef::tensor_slices::{read_v1, write_v1};

use super::shape_ops::debug_shape;
use super::string::strings;
use super::{Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The kernels, or `None` if `node` is none of these ops.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "SaveV2" => Box::new(|inp: Inputs| save_v2(&inp).map(|()| Outputs::new())),
        "RestoreV2" => {
            let dtypes = match node.attr("dtypes") {
                Some(AttrValue::List(ListValue::Type(t))) => t.clone(),
                Some(AttrValue::List(l)) if l.is_empty() => Vec::new(),
                _ => return Err(KernelError::Attr("dtypes".into())),
            };
            Box::new(move |inp: Inputs| restore_v2(&inp, &dtypes))
        }
        "MergeV2Checkpoints" => {
            let delete_old_dirs = super::attr_bool_or(node, "delete_old_dirs", true)?;
            let allow_missing = super::attr_bool_or(node, "allow_missing_files", false)?;
            Box::new(move |inp: Inputs| merge_v2(&inp, delete_old_dirs, allow_missing).map(|()| Outputs::new()))
        }
        "Save" => Box::new(|inp: Inputs| save_v1(&inp).map(|()| Outputs::new())),
        "Restore" => {
            let dtype = node.attr("dt").and_then(AttrValue::as_type).ok_or_else(|| KernelError::Attr("dt".into()))?;
            Box::new(move |inp: Inputs| restore_v1(&inp, dtype))
        }
        "ShardedFilename" => Box::new(|inp: Inputs| {
            super::arity(&inp, 3)?;
            let base = scalar_text(&inp[0], "basename")?;
            let shard = super::int_scalar(&inp[1], "shard")?;
            let shards = super::int_scalar(&inp[2], "num_shards")?;
            super::one(text_tensor(format!("{base}-{shard:05}-of-{shards:05}")))
        }),
        "ShardedFilespec" => Box::new(|inp: Inputs| {
            super::arity(&inp, 2)?;
            let base = scalar_text(&inp[0], "basename")?;
            let shards = super::int_scalar(&inp[1], "num_shards")?;
            super::one(text_tensor(format!("{base}-?????-of-{shards:05}")))
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

fn text_tensor(s: String) -> Tensor {
    Tensor::from_strings(Vec::new(), vec![s.into_bytes()]).expect("a scalar holds one string")
}

fn scalar_text(t: &Tensor, what: &str) -> KResult<String> {
    match strings(t, what)? {
        [s] => Ok(String::from_utf8_lossy(s).into_owned()),
        v => Err(KernelError::invalid(format!("Input {what} should have a single element, got {} instead.", v.len()))),
    }
}

/// A checkpoint op's prefix, tensor names and slice specs.
type Request<'a> = (PathBuf, &'a [Vec<u8>], &'a [Vec<u8>]);

/// The prefix, names and slice specs after TensorFlow's `ValidateInputs`.
fn validate(inp: &Inputs, save: bool) -> KResult<Request<'_>> {
    if inp.len() < 3 {
        return Err(KernelError::Arity { expected: 3, got: inp.len() });
    }
    let prefix = PathBuf::from(scalar_text(&inp[0], "prefix")?);
    for (t, what) in [(&inp[1], "tensor_names"), (&inp[2], "shape_and_slices")] {
        if t.rank() != 1 {
            return Err(KernelError::invalid(format!(
                "Input {what} should be an 1-d array, got {} instead.",
                debug_shape(&t.shape)
            )));
        }
    }
    let (names, slices) = (strings(&inp[1], "tensor_names")?, strings(&inp[2], "shape_and_slices")?);
    if names.len() != slices.len() {
        return Err(KernelError::invalid(format!(
            "tensor_names and shape_and_slices have different number of elements: {} vs. {}",
            names.len(),
            slices.len()
        )));
    }
    if save && inp.len() != 3 + names.len() {
        return Err(KernelError::invalid(format!("Got {} tensor names but {} tensors.", names.len(), inp.len() - 3)));
    }
    Ok((prefix, names, slices))
}

fn io_error(path: &Path, e: std::io::Error) -> KernelError {
    KernelError::invalid(format!("{}: {e}", path.display()))
}

/// Writes `bytes` beside `path` and renames them into place (its directory made first), so a
/// failed write leaves no partial file.
fn write_into_place(path: &Path, bytes: &[u8]) -> KResult<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    }
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(".tempstate");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error(path, e)
    })
}

/// Writes the tensors as one checkpoint at `prefix`, each file renamed into place.
fn write_checkpoint(prefix: &Path, tensors: &[(String, Tensor)]) -> KResult<()> {
    let (index, data) = checkpoint_bytes(tensors).map_err(|e| KernelError::invalid(e.to_string()))?;
    // The data first, the index last: a checkpoint is only visible once both are whole.
    for (path, bytes) in [(data_path(prefix, 0, 1), data), (index_path(prefix), index)] {
        write_into_place(&path, &bytes)?;
    }
    Ok(())
}

fn save_v2(inp: &Inputs) -> KResult<()> {
    let (prefix, names, slices) = validate(inp, true)?;
    let mut tensors = Vec::with_capacity(names.len());
    for (i, (name, slice)) in names.iter().zip(slices).enumerate() {
        let name = String::from_utf8_lossy(name).into_owned();
        if !slice.is_empty() {
            return Err(KernelError::invalid(format!(
                "SaveV2: tensor '{name}' is saved as the slice '{}' of a partitioned tensor; autoclust writes \
                 whole tensors only",
                String::from_utf8_lossy(slice)
            )));
        }
        tensors.push((name, inp[3 + i].clone()));
    }
    write_checkpoint(&prefix, &tensors)
}

fn read(prefix: &Path) -> KResult<Vec<(String, Tensor)>> {
    read_checkpoint(prefix).map_err(|e| KernelError::invalid(e.to_string()))
}

fn restore_v2(inp: &Inputs, dtypes: &[DType]) -> KResult<Outputs> {
    super::arity(inp, 3)?;
    let (prefix, names, slices) = validate(inp, false)?;
    if names.len() != dtypes.len() {
        return Err(KernelError::invalid(format!(
            "Got {} tensor names, but {} expected dtypes.",
            names.len(),
            dtypes.len()
        )));
    }
    let stored = read(&prefix)?;
    let mut out = Outputs::new();
    for ((name, spec), &dtype) in names.iter().zip(slices).zip(dtypes) {
        let name = String::from_utf8_lossy(name);
        let t = stored
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, t)| t)
            .ok_or_else(|| KernelError::invalid(format!("Key {name} not found in checkpoint")))?;
        if t.dtype != dtype {
            return Err(KernelError::invalid(format!(
                "tensor_name = {name}; expected dtype {} does not equal original dtype {}",
                dtype.tf_name(),
                t.dtype.tf_name()
            )));
        }
        out.push(if spec.is_empty() { t.clone() } else { slice_of(t, &String::from_utf8_lossy(spec), &name)? });
    }
    Ok(out)
}

/// `Save`: the named tensors, whole, as a V1 checkpoint file at `filename`
/// ([`autoclust_graphdef::tensor_slices`]), written beside it and renamed into place.
fn save_v1(inp: &Inputs) -> KResult<()> {
    if inp.len() < 2 {
        return Err(KernelError::Arity { expected: 2, got: inp.len() });
    }
    let path = PathBuf::from(scalar_text(&inp[0], "filename")?);
    let names = strings(&inp[1], "tensor_names")?;
    if inp.len() != 2 + names.len() {
        return Err(KernelError::invalid(format!("Expected {} inputs, got {}", 2 + names.len(), inp.len())));
    }
    let tensors: Vec<(String, Tensor)> =
        names.iter().zip(&inp[2..]).map(|(n, t)| (String::from_utf8_lossy(n).into_owned(), t.clone())).collect();
    let bytes = write_v1(&tensors).map_err(KernelError::invalid)?;
    write_into_place(&path, &bytes)
}

/// `Restore`: one tensor of a V1 checkpoint file (or of a tensor bundle at that prefix, as
/// TensorFlow's reader falls back to).
fn restore_v1(inp: &Inputs, dtype: DType) -> KResult<Outputs> {
    super::arity(inp, 2)?;
    let pattern = scalar_text(&inp[0], "file_pattern")?;
    let name = scalar_text(&inp[1], "tensor_name")?;
    let path = PathBuf::from(&pattern);
    let stored = if path.is_file() {
        let bytes = std::fs::read(&path).map_err(|e| io_error(&path, e))?;
        read_v1(&bytes).map_err(|e| KernelError::invalid(format!("{pattern}: {e}")))?
    } else if index_path(&path).is_file() {
        read(&path)?
    } else {
        return Err(KernelError::invalid(format!(
            "Unsuccessful TensorSliceReader constructor: Failed to find any matching files for {pattern}"
        )));
    };
    let t = stored.into_iter().find(|(k, _)| *k == name).map(|(_, t)| t).ok_or_else(|| {
        KernelError::invalid(format!("Tensor name \"{name}\" not found in checkpoint files {pattern}"))
    })?;
    if t.dtype != dtype {
        return Err(KernelError::invalid(format!(
            "Expected to restore a tensor of type {}, got a tensor of type {} instead: tensor_name = {name}",
            dtype.tf_name(),
            t.dtype.tf_name()
        )));
    }
    super::one(t)
}

/// The part of `t` a `shape_and_slices` spec names: the full shape, then per dimension
/// `start,length` or `-` (all of it), joined by `:`.
pub fn slice_of(t: &Tensor, spec: &str, name: &str) -> KResult<Tensor> {
    let bad = || KernelError::invalid(format!("tensor '{name}': bad shape_and_slice spec '{spec}'"));
    let mut words: Vec<&str> = spec.split(' ').collect();
    let ranges = words.pop().ok_or_else(bad)?;
    let full: Vec<usize> = words.iter().map(|w| w.parse().map_err(|_| bad())).collect::<KResult<_>>()?;
    if full != t.shape {
        return Err(KernelError::invalid(format!(
            "tensor '{name}': the checkpoint holds shape {}, the spec '{spec}' expects {}",
            debug_shape(&t.shape),
            debug_shape(&full)
        )));
    }
    let parts: Vec<&str> = ranges.split(':').collect();
    if parts.len() != full.len() {
        return Err(bad());
    }
    let mut starts = Vec::new();
    let mut lens = Vec::new();
    for (p, &dim) in parts.iter().zip(&full) {
        let (s, l) = if *p == "-" {
            (0, dim)
        } else {
            let (s, l) = p.split_once(',').ok_or_else(bad)?;
            (s.parse::<usize>().map_err(|_| bad())?, l.parse::<usize>().map_err(|_| bad())?)
        };
        if s + l > dim {
            return Err(bad());
        }
        starts.push(s);
        lens.push(l);
    }
    let strides = autoclust_numeric::layout::strides_of(&full);
    let count: usize = lens.iter().product();
    let mut src = Vec::with_capacity(count);
    for flat in 0..count {
        let (mut rest, mut at) = (flat, 0);
        for d in (0..lens.len()).rev() {
            at += (starts[d] + rest % lens[d]) * strides[d];
            rest /= lens[d];
        }
        src.push(Some(at));
    }
    super::take_or(t, &src, None, lens)
}

fn merge_v2(inp: &Inputs, delete_old_dirs: bool, allow_missing: bool) -> KResult<()> {
    super::arity(inp, 2)?;
    let sources = strings(&inp[0], "checkpoint_prefixes")?;
    let destination = PathBuf::from(scalar_text(&inp[1], "destination_prefix")?);
    let mut tensors = Vec::new();
    let mut merged = Vec::new();
    for s in sources {
        let prefix = PathBuf::from(String::from_utf8_lossy(s).into_owned());
        if allow_missing && !index_path(&prefix).exists() {
            continue;
        }
        tensors.extend(read(&prefix)?);
        merged.push(prefix);
    }
    write_checkpoint(&destination, &tensors)?;
    for prefix in &merged {
        if *prefix == destination {
            continue;
        }
        let _ = std::fs::remove_file(index_path(prefix));
        if let Some(dir) = prefix.parent() {
            let stem = prefix.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    if e.file_name().to_string_lossy().starts_with(&format!("{stem}.data-")) {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
            if delete_old_dirs {
                // Only an emptied directory goes, as TensorFlow's `DeleteDir` does.
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::node;

    fn strs(shape: Vec<usize>, v: &[&str]) -> Tensor {
        Tensor::from_strings(shape, v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
    }

    fn types(d: &[DType]) -> AttrValue {
        AttrValue::List(ListValue::Type(d.to_vec()))
    }

    /// Saved tensors restore whole or by slice; sharded saves merge; TensorFlow's errors.
    #[test]
    fn save_restore_and_merge_round_trip() {
        let dir = std::env::temp_dir().join(format!("autoclust-ckpt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let prefix = dir.join("model.ckpt").display().to_string();
        let w = Tensor::from_f32(vec![2, 3], vec![1., 2., 3., 4., 5., 6.]).unwrap();
        let step = Tensor::scalar_i64(7);
        let words = strs(vec![2], &["a", "b\u{0}c"]);
        let save = node("SaveV2", &[("dtypes", types(&[DType::Float32, DType::Int64, DType::String]))]);
        let ins = [strs(vec![], &[&prefix]), strs(vec![3], &["w", "step", "words"]), strs(vec![3], &["", "", ""])];
        let mut all = ins.to_vec();
        all.extend([w.clone(), step.clone(), words.clone()]);
        assert!(compute(&save, &all).unwrap().is_empty());
        let restore = |names: &[&str], specs: &[&str], d: &[DType]| {
            let n = node("RestoreV2", &[("dtypes", types(d))]);
            compute(&n, &[strs(vec![], &[&prefix]), strs(vec![names.len()], names), strs(vec![specs.len()], specs)])
        };
        let o =
            restore(&["words", "w", "step"], &["", "", ""], &[DType::String, DType::Float32, DType::Int64]).unwrap();
        assert_eq!((o[0].as_strings(), o[1].as_f32(), o[2].as_i64()), (words.as_strings(), w.as_f32(), step.as_i64()));
        // A partitioned variable's part: rows 1..2, columns 1..3.
        let o = restore(&["w"], &["2 3 1,1:1,2"], &[DType::Float32]).unwrap();
        assert_eq!((o[0].shape.clone(), o[0].as_f32().unwrap()), (vec![1, 2], &[5., 6.][..]));
        let o = restore(&["w"], &["2 3 -:2,1"], &[DType::Float32]).unwrap();
        assert_eq!(o[0].as_f32().unwrap(), &[3., 6.]);
        let e = restore(&["nope"], &[""], &[DType::Float32]).unwrap_err().to_string();
        assert!(e.contains("Key nope not found in checkpoint"), "{e}");
        let e = restore(&["w"], &[""], &[DType::Float64]).unwrap_err().to_string();
        assert!(e.contains("tensor_name = w; expected dtype double does not equal original dtype float"), "{e}");
        let e = compute(&save, &all[..5]).unwrap_err().to_string();
        assert!(e.contains("Got 3 tensor names but 2 tensors."), "{e}");
        let mut sliced = all.clone();
        sliced[2] = strs(vec![3], &["4 3 0,2:-", "", ""]);
        let e = compute(&save, &sliced).unwrap_err().to_string();
        assert!(e.contains("whole tensors only"), "{e}");
        // A sharded save: two parts in a temporary directory, merged, the directory removed.
        let tmp = dir.join("model.ckpt_temp");
        let part = |i: i32| {
            let n = node("ShardedFilename", &[]);
            let o = compute(
                &n,
                &[
                    strs(vec![], &[&tmp.join("part").display().to_string()]),
                    Tensor::scalar_i32(i),
                    Tensor::scalar_i32(2),
                ],
            )
            .unwrap();
            String::from_utf8(o[0].as_strings().unwrap()[0].clone()).unwrap()
        };
        let (p0, p1) = (part(0), part(1));
        assert!(p1.ends_with("part-00001-of-00002"), "{p1}");
        let one = node("SaveV2", &[("dtypes", types(&[DType::Float32]))]);
        for (p, name, t) in [(&p0, "a", Tensor::scalar_f32(1.5)), (&p1, "b", Tensor::scalar_f32(2.5))] {
            compute(&one, &[strs(vec![], &[p]), strs(vec![1], &[name]), strs(vec![1], &[""]), t]).unwrap();
        }
        let merged = dir.join("merged").display().to_string();
        let merge = node("MergeV2Checkpoints", &[]);
        compute(&merge, &[strs(vec![2], &[&p0, &p1]), strs(vec![], &[&merged])]).unwrap();
        assert!(!tmp.exists(), "the emptied shard directory is removed");
        let back = read(Path::new(&merged)).unwrap();
        let names: Vec<&str> = back.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
