//! File kernels (`io_ops.cc`): `ReadFile` (`tf.io.read_file`: a serving graph that is fed
//! image paths reads them this way) and `WriteFile` (`tf.io.write_file`, stateful: it writes
//! when it runs, creating the parent directories as TensorFlow does). Errors use
//! TensorFlow's messages, with the operating system's reason.

use std::path::Path;

use autoclust_graph::{Node, Tensor, TensorData};

use super::shape_ops::debug_shape;
use super::{arity, one, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The file kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let f: PureFn = match node.op.as_str() {
        "ReadFile" => Box::new(|inp: Inputs| {
            arity(&inp, 1)?;
            let name = scalar_string(&inp[0], "Input filename tensor must be scalar")?;
            let path = path_of(name)?;
            let contents = std::fs::read(path).map_err(|e| io_error(name, &e))?;
            one(Tensor::from_strings(Vec::new(), vec![contents]).expect("a scalar holds one string"))
        }),
        "WriteFile" => Box::new(|inp: Inputs| {
            arity(&inp, 2)?;
            let name = scalar_string(&inp[0], "Input filename tensor must be scalar")?;
            let contents = scalar_string(&inp[1], "Contents tensor must be scalar")?;
            let path = path_of(name)?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
                std::fs::create_dir_all(dir).map_err(|e| io_error(dir.as_os_str().as_encoded_bytes(), &e))?;
            }
            std::fs::write(path, contents).map_err(|e| io_error(name, &e))?;
            Ok(Outputs::new())
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

/// The one string of a scalar string tensor, or TensorFlow's complaint about its shape.
fn scalar_string<'a>(t: &'a Tensor, complaint: &str) -> KResult<&'a Vec<u8>> {
    match &t.data {
        TensorData::Str(v) if t.shape.is_empty() => Ok(&v[0]),
        TensorData::Str(_) => {
            Err(KernelError::invalid(format!("{complaint}, but had shape: {}", debug_shape(&t.shape))))
        }
        _ => Err(KernelError::invalid(format!("{complaint}: expected a string, got {}", t.dtype))),
    }
}

/// A file name as a path (UTF-8; TensorFlow's file systems take `file://` URIs too).
fn path_of(name: &[u8]) -> KResult<&Path> {
    let text = std::str::from_utf8(name)
        .map_err(|_| KernelError::invalid(format!("file name {:?} is not UTF-8", String::from_utf8_lossy(name))))?;
    Ok(Path::new(text.strip_prefix("file://").unwrap_or(text)))
}

fn io_error(name: &[u8], e: &std::io::Error) -> KernelError {
    let reason = match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
        _ => e.to_string(),
    };
    KernelError::invalid(format!("{}; {reason}", String::from_utf8_lossy(name)))
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::{node, run1};
    use super::*;

    fn s(x: &[u8]) -> Tensor {
        Tensor::from_strings(Vec::new(), vec![x.to_vec()]).unwrap()
    }

    #[test]
    fn writes_then_reads_back_creating_directories() {
        let dir = std::env::temp_dir().join(format!("autoclust-files-{}", std::process::id()));
        let path = dir.join("a/b/c.bin");
        let name = path.to_str().unwrap().as_bytes();
        super::super::compute(&node("WriteFile", &[]), &[s(name), s(b"\x00\xffbytes")]).unwrap();
        let out = run1(&node("ReadFile", &[]), &[s(name)]).unwrap();
        assert_eq!(out.as_strings().unwrap()[0], b"\x00\xffbytes");
        let uri = format!("file://{}", path.display());
        let out = run1(&node("ReadFile", &[]), &[s(uri.as_bytes())]).unwrap();
        assert_eq!(out.as_strings().unwrap()[0], b"\x00\xffbytes");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_the_shape() {
        let e = run1(&node("ReadFile", &[]), &[s(b"/nonexistent/x")]).unwrap_err();
        assert_eq!(e.to_string(), "/nonexistent/x; No such file or directory");
        let v = Tensor::from_strings(vec![2], vec![b"a".to_vec(), b"b".to_vec()]).unwrap();
        let e = run1(&node("ReadFile", &[]), &[v]).unwrap_err();
        assert_eq!(e.to_string(), "Input filename tensor must be scalar, but had shape: [2]");
    }
}
