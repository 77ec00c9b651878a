//! Tensors in and out (docs/contract.md §3): safetensors files for float32,
//! float64, int32, int64 and bool (safetensors' `BOOL`, one byte each), small
//! JSON values for `--feed NAME=JSON` (a number or nested lists, typed by the
//! placeholder), and the JSON form `{"dtype", "shape", "data"}` with `data`
//! flat in row-major order. String tensors (no safetensors dtype) travel only as JSON: a
//! `--feed` of JSON strings (or nested lists of them), `"dtype": "string"` in the output, each
//! element as a JSON string (bytes that are not UTF-8 replaced by U+FFFD, and then every
//! element again, exactly, in standard base64 under `"data_b64"`; a feed element may be
//! TensorFlow Serving's `{"b64": "…"}` for such bytes); writing one to a
//! safetensors file is an error that says so. Floats print in Rust's shortest round-trip form;
//! non-finite floats print as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.

use std::fmt::Write as _;

use autoclust_graph::{half, DType, Tensor, TensorData};
use safetensors::tensor::{Dtype as StDtype, TensorView};

use crate::kernels::string::{base64_decode_in, base64_encode_in, BASE64_STANDARD};

/// Why tensors could not be read or written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TensorIoError {
    #[error("not a safetensors file: {0}")]
    Safetensors(String),
    #[error("tensor '{name}': unsupported dtype {dtype}")]
    DType { name: String, dtype: String },
    /// A string tensor bound for a safetensors file, which has no string dtype.
    #[error("tensor '{0}' is a string tensor, and safetensors has no string dtype: fetch it with --json")]
    StringTensor(String),
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("{0}")]
    Value(String),
    #[error("not a readable .npy/.npz file: {0}")]
    Numpy(String),
}

/// The safetensors dtypes [`read_safetensors`] reads.
const READ_DTYPES: &[&str] =
    &["F32", "F64", "I32", "I64", "BOOL", "U8", "I8", "U16", "I16", "U32", "U64", "F16", "BF16"];

/// When a safetensors header is well formed but names a dtype this reader does not take (a
/// complex `C64`, an `F8_E4M3`…, which the safetensors crate refuses as a malformed header):
/// the error naming the tensor and its dtype.
fn unreadable_dtype(bytes: &[u8]) -> Option<TensorIoError> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let header = bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?)?;
    let json: serde_json::Value = serde_json::from_slice(header).ok()?;
    json.as_object()?.iter().filter(|(k, _)| *k != "__metadata__").find_map(|(name, entry)| {
        let dtype = entry.get("dtype")?.as_str()?;
        (!READ_DTYPES.contains(&dtype)).then(|| TensorIoError::DType {
            name: name.clone(),
            dtype: format!("{dtype} (safetensors dtypes read: {})", READ_DTYPES.join(", ")),
        })
    })
}

fn st_dtype(d: DType) -> Option<StDtype> {
    Some(match d {
        DType::Float32 => StDtype::F32,
        DType::Float64 => StDtype::F64,
        DType::Int32 => StDtype::I32,
        DType::Int64 => StDtype::I64,
        DType::Bool => StDtype::BOOL,
        DType::UInt8 => StDtype::U8,
        DType::Int8 => StDtype::I8,
        DType::UInt16 => StDtype::U16,
        DType::Int16 => StDtype::I16,
        DType::UInt32 => StDtype::U32,
        DType::UInt64 => StDtype::U64,
        DType::Float16 => StDtype::F16,
        DType::BFloat16 => StDtype::BF16,
        _ => return None,
    })
}

/// Serialises named tensors as a safetensors file.
pub fn write_safetensors(tensors: &[(String, Tensor)]) -> Result<Vec<u8>, TensorIoError> {
    let mut owned = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        if t.dtype == DType::String {
            return Err(TensorIoError::StringTensor(name.clone()));
        }
        let dtype =
            st_dtype(t.dtype).ok_or_else(|| TensorIoError::DType { name: name.clone(), dtype: t.dtype.name() })?;
        let bytes =
            t.to_le_bytes().ok_or_else(|| TensorIoError::DType { name: name.clone(), dtype: t.dtype.name() })?;
        owned.push((name.clone(), dtype, t.shape.clone(), bytes));
    }
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, b)| {
            TensorView::new(*d, s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| TensorIoError::Safetensors(format!("{e:?}")))
        })
        .collect::<Result<_, _>>()?;
    safetensors::serialize(views, &None).map_err(|e| TensorIoError::Safetensors(format!("{e:?}")))
}

/// Reads every tensor of a safetensors file, sorted by name.
pub fn read_safetensors(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, TensorIoError> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| unreadable_dtype(bytes).unwrap_or_else(|| TensorIoError::Safetensors(format!("{e:?}"))))?;
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let shape = view.shape().to_vec();
        let data = view.data();
        let bad = |e: autoclust_graph::TensorError| TensorIoError::Value(format!("tensor '{name}': {e}"));
        let t = match view.dtype() {
            StDtype::F32 => Tensor::from_f32(
                shape,
                data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect(),
            ),
            StDtype::F64 => Tensor::from_f64(
                shape,
                data.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect(),
            ),
            StDtype::I32 => Tensor::from_i32(
                shape,
                data.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes"))).collect(),
            ),
            StDtype::I64 => Tensor::from_i64(
                shape,
                data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect(),
            ),
            StDtype::BOOL => Tensor::from_bool(shape, data.iter().map(|&b| b != 0).collect()),
            StDtype::U8
            | StDtype::I8
            | StDtype::U16
            | StDtype::I16
            | StDtype::U32
            | StDtype::U64
            | StDtype::F16
            | StDtype::BF16 => {
                let (dtype, width) = match view.dtype() {
                    StDtype::U8 => (DType::UInt8, 1),
                    StDtype::I8 => (DType::Int8, 1),
                    StDtype::U16 => (DType::UInt16, 2),
                    StDtype::I16 => (DType::Int16, 2),
                    StDtype::U32 => (DType::UInt32, 4),
                    StDtype::U64 => (DType::UInt64, 8),
                    StDtype::F16 => (DType::Float16, 2),
                    _ => (DType::BFloat16, 2),
                };
                if data.len() != shape.iter().product::<usize>() * width {
                    return Err(TensorIoError::Value(format!(
                        "tensor '{name}': {} bytes for shape {shape:?}",
                        data.len()
                    )));
                }
                Ok(Tensor { dtype, shape, data: TensorData::Raw(std::sync::Arc::new(data.to_vec())) })
            }
            d => return Err(TensorIoError::DType { name, dtype: format!("{d:?}") }),
        }
        .map_err(bad)?;
        out.push((name, t));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Parses `--feed` JSON: a number (or bool), nested lists of them, or a
/// tensor object `{"dtype", "shape", "data"}`; typed by `dtype`.
pub fn tensor_from_json(text: &str, dtype: DType) -> Result<Tensor, TensorIoError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| TensorIoError::Json(e.to_string()))?;
    // A lone `{"b64": "…"}` is a scalar string's element (TensorFlow Serving's form), not a
    // tensor object.
    let scalar_b64 = matches!(&v, serde_json::Value::Object(o) if o.len() == 1 && o.contains_key("b64"));
    if let (serde_json::Value::Object(obj), false) = (&v, scalar_b64) {
        let dt = match obj.get("dtype").and_then(|d| d.as_str()) {
            Some(s) => DType::from_name(s).ok_or_else(|| TensorIoError::Value(format!("unknown dtype '{s}'")))?,
            None => dtype,
        };
        if dt != dtype {
            return Err(TensorIoError::Value(format!("expected dtype {dtype}, got {dt}")));
        }
        let shape: Vec<usize> = obj
            .get("shape")
            .and_then(|s| s.as_array())
            .ok_or_else(|| TensorIoError::Value("tensor object needs \"shape\"".into()))?
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize).ok_or_else(|| TensorIoError::Value("bad shape".into())))
            .collect::<Result<_, _>>()?;
        let data = obj.get("data").ok_or_else(|| TensorIoError::Value("tensor object needs \"data\"".into()))?;
        let mut flat = Vec::new();
        let mut _inner = Vec::new();
        flatten(data, 0, &mut _inner, &mut flat)?;
        return build(dtype, shape, &flat);
    }
    let mut shape = Vec::new();
    let mut flat = Vec::new();
    flatten(&v, 0, &mut shape, &mut flat)?;
    build(dtype, shape, &flat)
}

/// Flattens nested lists, checking they are rectangular.
fn flatten<'a>(
    v: &'a serde_json::Value,
    depth: usize,
    shape: &mut Vec<usize>,
    flat: &mut Vec<&'a serde_json::Value>,
) -> Result<(), TensorIoError> {
    match v {
        serde_json::Value::Array(items) => {
            if shape.len() == depth {
                shape.push(items.len());
            } else if shape.get(depth) != Some(&items.len()) {
                return Err(TensorIoError::Value("nested lists are not rectangular".into()));
            }
            for it in items {
                flatten(it, depth + 1, shape, flat)?;
            }
            Ok(())
        }
        _ => {
            if shape.len() > depth {
                return Err(TensorIoError::Value("nested lists are not rectangular".into()));
            }
            flat.push(v);
            Ok(())
        }
    }
}

fn build(dtype: DType, shape: Vec<usize>, flat: &[&serde_json::Value]) -> Result<Tensor, TensorIoError> {
    let num = |v: &serde_json::Value| -> Result<f64, TensorIoError> {
        match v {
            serde_json::Value::Number(n) => n.as_f64().ok_or_else(|| TensorIoError::Value(format!("bad number {n}"))),
            serde_json::Value::Bool(b) => Err(TensorIoError::Value(format!("{b} is a bool, not a {dtype} number"))),
            serde_json::Value::String(s) => match s.as_str() {
                "NaN" | "nan" => Ok(f64::NAN),
                "Infinity" | "inf" => Ok(f64::INFINITY),
                "-Infinity" | "-inf" => Ok(f64::NEG_INFINITY),
                _ => Err(TensorIoError::Value(format!("not a number: \"{s}\""))),
            },
            other => Err(TensorIoError::Value(format!("not a number: {other}"))),
        }
    };
    let int = |v: &serde_json::Value| -> Result<i64, TensorIoError> {
        match v {
            // `1e3` is the integer 1000 (JSON writers spell some integers so); `1.5` is not one.
            serde_json::Value::Number(n) => n
                .as_i64()
                .or_else(|| {
                    n.as_f64().filter(|x| x.fract() == 0.0 && x.abs() < 9.223_372_036_854_775e18).map(|x| x as i64)
                })
                .ok_or_else(|| TensorIoError::Value(format!("not an integer: {n}"))),
            serde_json::Value::Bool(b) => Err(TensorIoError::Value(format!("{b} is a bool, not a {dtype} integer"))),
            other => Err(TensorIoError::Value(format!("not an integer: {other}"))),
        }
    };
    let bad = |e: autoclust_graph::TensorError| TensorIoError::Value(e.to_string());
    match dtype {
        DType::Float32 => {
            Tensor::from_f32(shape, flat.iter().map(|v| num(v).map(|x| x as f32)).collect::<Result<_, _>>()?)
        }
        DType::Float64 => Tensor::from_f64(shape, flat.iter().map(|v| num(v)).collect::<Result<_, _>>()?),
        // Half types: each number rounded to nearest (ties to even), as TensorFlow's
        // `np.float16(x)` / `tf.constant(x, tf.bfloat16)` round it.
        DType::Float16 | DType::BFloat16 => {
            let narrow = if dtype == DType::BFloat16 { half::f32_to_bf16 } else { half::f32_to_f16 };
            let bits: Vec<u8> = flat
                .iter()
                .map(|v| num(v).map(|x| narrow(x as f32).to_le_bytes()))
                .collect::<Result<Vec<_>, _>>()?
                .concat();
            Tensor::from_raw(dtype, shape, bits)
        }
        DType::Int32 => Tensor::from_i32(
            shape,
            flat.iter()
                .map(|v| {
                    int(v).and_then(|x| {
                        i32::try_from(x).map_err(|_| TensorIoError::Value(format!("{x} does not fit int32")))
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
        DType::Int64 => Tensor::from_i64(shape, flat.iter().map(|v| int(v)).collect::<Result<_, _>>()?),
        // The narrow and unsigned integers (images are uint8), range-checked, as raw bytes.
        DType::UInt8 | DType::Int8 | DType::UInt16 | DType::Int16 | DType::UInt32 | DType::UInt64 => {
            let (lo, hi): (i128, i128) = match dtype {
                DType::UInt8 => (0, u8::MAX as i128),
                DType::Int8 => (i8::MIN as i128, i8::MAX as i128),
                DType::UInt16 => (0, u16::MAX as i128),
                DType::Int16 => (i16::MIN as i128, i16::MAX as i128),
                DType::UInt32 => (0, u32::MAX as i128),
                _ => (0, u64::MAX as i128),
            };
            let width = dtype.size_of().unwrap_or(1);
            let mut bytes = Vec::with_capacity(flat.len() * width);
            for v in flat {
                let x: i128 = match v {
                    serde_json::Value::Number(n) if n.as_u64().is_some() => n.as_u64().unwrap_or(0) as i128,
                    _ => int(v)? as i128,
                };
                if x < lo || x > hi {
                    return Err(TensorIoError::Value(format!("{x} does not fit {dtype}")));
                }
                bytes.extend_from_slice(&x.to_le_bytes()[..width]);
            }
            Tensor::from_raw(dtype, shape, bytes)
        }
        DType::Bool => Tensor::from_bool(
            shape,
            flat.iter()
                .map(|v| match v {
                    serde_json::Value::Bool(b) => Ok(*b),
                    other => num(other).map(|x| x != 0.0),
                })
                .collect::<Result<_, _>>()?,
        ),
        DType::String => Tensor::from_strings(
            shape,
            flat.iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => Ok(s.as_bytes().to_vec()),
                    // Bytes that are not text, as TensorFlow Serving's JSON writes them.
                    serde_json::Value::Object(o) if o.len() == 1 && o.contains_key("b64") => {
                        let Some(serde_json::Value::String(b)) = o.get("b64") else {
                            return Err(TensorIoError::Value("\"b64\" must be a base64 string".into()));
                        };
                        base64_decode_in(BASE64_STANDARD, b.as_bytes())
                            .map_err(|e| TensorIoError::Value(format!("\"b64\": {e}")))
                    }
                    other => Err(TensorIoError::Value(format!("not a string or {{\"b64\": ...}}: {other}"))),
                })
                .collect::<Result<_, _>>()?,
        ),
        d => {
            return Err(TensorIoError::Value(format!(
                "{} values cannot be given as JSON (JSON takes booleans, integers, floats and strings)",
                d.name()
            )))
        }
    }
    .map_err(bad)
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn push_float(out: &mut String, x: f64, shortest: impl FnOnce() -> String) {
    if x.is_nan() {
        out.push_str("\"NaN\"");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        out.push_str(&shortest());
    }
}

/// The JSON form of a tensor: `{"dtype": .., "shape": [..], "data": [..]}`.
pub fn tensor_to_json(t: &Tensor) -> String {
    let mut out = Vec::new();
    write_tensor_json(&mut out, t).expect("writing to memory");
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// A JSON object of named tensors, keys in the given order.
pub fn tensors_to_json_object(tensors: &[(String, Tensor)]) -> String {
    let mut out = Vec::new();
    write_tensors_json_object(&mut out, tensors).expect("writing to memory");
    String::from_utf8(out).expect("JSON text is UTF-8")
}

/// Text written in pieces of about this many bytes: a tensor's JSON is never held whole
/// (a 50-million-element fetch is a gigabyte of text).
const JSON_CHUNK: usize = 1 << 16;

/// Buffered text for [`write_tensor_json`], handed to the writer a chunk at a time.
struct Chunks<'a> {
    buf: String,
    out: &'a mut dyn std::io::Write,
}

impl Chunks<'_> {
    fn push(&mut self, s: &str) -> std::io::Result<()> {
        self.buf.push_str(s);
        self.spill()
    }

    fn spill(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= JSON_CHUNK {
            self.out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(self) -> std::io::Result<()> {
        self.out.write_all(self.buf.as_bytes())
    }
}

/// [`tensor_to_json`] written to `out` as it is produced.
pub fn write_tensor_json(out: &mut dyn std::io::Write, t: &Tensor) -> std::io::Result<()> {
    let mut c = Chunks { buf: String::with_capacity(JSON_CHUNK + 64), out };
    let _ = write!(c.buf, "{{\"dtype\": {}, \"shape\": [", json_string(&t.dtype.name()));
    for (i, d) in t.shape.iter().enumerate() {
        if i > 0 {
            c.buf.push_str(", ");
        }
        let _ = write!(c.buf, "{d}");
    }
    c.buf.push_str("], \"data\": [");
    // Element `i`, after its separator.
    fn each<T>(c: &mut Chunks<'_>, v: &[T], mut put: impl FnMut(&mut String, &T)) -> std::io::Result<()> {
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                c.buf.push_str(", ");
            }
            put(&mut c.buf, x);
            c.spill()?;
        }
        Ok(())
    }
    match &t.data {
        TensorData::F32(v) => each(&mut c, v, |o, &x| push_float(o, x as f64, || format!("{x:?}")))?,
        TensorData::F64(v) => each(&mut c, v, |o, &x| push_float(o, x, || format!("{x:?}")))?,
        TensorData::I32(v) => each(&mut c, v, |o, x| {
            let _ = write!(o, "{x}");
        })?,
        TensorData::I64(v) => each(&mut c, v, |o, x| {
            let _ = write!(o, "{x}");
        })?,
        TensorData::Bool(v) => each(&mut c, v, |o, x| {
            let _ = write!(o, "{x}");
        })?,
        TensorData::Str(v) => each(&mut c, v, |o, x| o.push_str(&json_string(&String::from_utf8_lossy(x))))?,
        // float16 and bfloat16 as the numbers their bits hold (each exactly a float32).
        TensorData::Raw(_) if t.dtype.is_half() => {
            let v = t.to_f64_vec().unwrap_or_default();
            each(&mut c, &v, |o, &x| push_float(o, x, || format!("{:?}", x as f32)))?
        }
        // complex64 and complex128 as `[re, im]` pairs.
        TensorData::Raw(v) if matches!(t.dtype, DType::Complex64 | DType::Complex128) => {
            let w = if t.dtype == DType::Complex64 { 4 } else { 8 };
            let part = |b: &[u8]| match b.len() {
                4 => f32::from_le_bytes(b.try_into().expect("4 bytes")) as f64,
                _ => f64::from_le_bytes(b.try_into().expect("8 bytes")),
            };
            let pairs: Vec<(f64, f64)> = v.chunks_exact(2 * w).map(|e| (part(&e[..w]), part(&e[w..]))).collect();
            let single = t.dtype == DType::Complex64;
            let show = move |x: f64| if single { format!("{:?}", x as f32) } else { format!("{x:?}") };
            each(&mut c, &pairs, |o, &(re, im)| {
                o.push('[');
                push_float(o, re, || show(re));
                o.push_str(", ");
                push_float(o, im, || show(im));
                o.push(']');
            })?
        }
        // The other integer types, each element from its little-endian bytes.
        TensorData::Raw(v) => {
            let w = t.dtype.size_of().filter(|&w| w > 0).unwrap_or(1);
            let signed = matches!(t.dtype, DType::Int8 | DType::Int16 | DType::QInt8 | DType::QInt16 | DType::QInt32);
            let values: Vec<i128> = v
                .chunks_exact(w)
                .map(|b| {
                    let mut le = [0u8; 16];
                    le[..w].copy_from_slice(b);
                    let u = u128::from_le_bytes(le);
                    let bits = 8 * w as u32;
                    if signed && (u >> (bits - 1)) & 1 == 1 {
                        u as i128 - (1i128 << bits)
                    } else {
                        u as i128
                    }
                })
                .collect();
            each(&mut c, &values, |o, x| {
                let _ = write!(o, "{x}");
            })?
        }
        // A TensorList: its elements as tensors (null for a slot never set).
        TensorData::List(l) => {
            for (i, x) in l.items().iter().enumerate() {
                c.push(if i > 0 { ", " } else { "" })?;
                match x {
                    Some(t) => {
                        c.out.write_all(c.buf.as_bytes())?;
                        c.buf.clear();
                        write_tensor_json(c.out, t)?;
                    }
                    None => c.push("null")?,
                }
            }
        }
        // An Optional: its components as tensors (none: no elements).
        TensorData::Optional(o) => {
            for (i, t) in o.iter().flatten().enumerate() {
                c.push(if i > 0 { ", " } else { "" })?;
                c.out.write_all(c.buf.as_bytes())?;
                c.buf.clear();
                write_tensor_json(c.out, t)?;
            }
        }
    }
    // Strings that are not UTF-8 (a serialized protocol buffer, an encoded image) are lossy
    // in `data`; every element then follows again, exactly, in base64.
    if let TensorData::Str(v) = &t.data {
        if v.iter().any(|x| std::str::from_utf8(x).is_err()) {
            c.push("], \"data_b64\": [")?;
            each(&mut c, v, |o, x| {
                o.push('"');
                o.push_str(std::str::from_utf8(&base64_encode_in(BASE64_STANDARD, x, true)).expect("base64 is ASCII"));
                o.push('"');
            })?;
        }
    }
    c.buf.push_str("]}");
    c.finish()
}

/// [`tensors_to_json_object`] written to `out` as it is produced.
pub fn write_tensors_json_object(out: &mut dyn std::io::Write, tensors: &[(String, Tensor)]) -> std::io::Result<()> {
    out.write_all(b"{")?;
    for (i, (name, t)) in tensors.iter().enumerate() {
        if i > 0 {
            out.write_all(b", ")?;
        }
        write!(out, "{}: ", json_string(name))?;
        write_tensor_json(out, t)?;
    }
    out.write_all(b"}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that keeps what it is given and the largest piece.
    #[derive(Default)]
    struct Pieces {
        text: Vec<u8>,
        largest: usize,
    }

    impl std::io::Write for Pieces {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.largest = self.largest.max(b.len());
            self.text.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Issue 13 (fuzz finding pbtxt-3310060): a 50-million-element fetch printed with
    /// `--json` needed its gigabyte of text in one string and aborted. The text now goes
    /// out in chunks, the same text as before.
    #[test]
    fn json_is_written_in_chunks() {
        let n = 100_000;
        let t = Tensor::from_f32(vec![n], (0..n).map(|i| i as f32 * 0.37 - 5.0).collect()).unwrap();
        let whole = tensor_to_json(&t);
        assert!(whole.len() > 4 * JSON_CHUNK, "{}", whole.len());
        let mut p = Pieces::default();
        write_tensors_json_object(&mut p, &[("a:0".into(), t.clone()), ("b:0".into(), t)]).unwrap();
        assert!(p.largest <= JSON_CHUNK + 64, "a piece of {} bytes", p.largest);
        assert_eq!(String::from_utf8(p.text).unwrap(), format!("{{\"a:0\": {whole}, \"b:0\": {whole}}}"));
    }

    #[test]
    fn bytes_that_are_not_text_travel_in_base64() {
        // A feed element in TensorFlow Serving's form; text elements stay JSON strings.
        // A scalar fed as one `{"b64": …}` element.
        let t = tensor_from_json(r#"{"b64": "CgsKBGxvc3M="}"#, DType::String).unwrap();
        assert_eq!(t.shape, Vec::<usize>::new());
        assert_eq!(t.as_strings().unwrap()[0], b"\n\x0b\n\x04loss");
        let t = tensor_from_json(r#"[{"b64": "CgsKBGxvc3M="}, "ok"]"#, DType::String).unwrap();
        assert_eq!(t.as_strings().unwrap()[0], b"\n\x0b\n\x04loss");
        // Not UTF-8: `data` is lossy, `data_b64` exact for every element.
        let b = Tensor::from_strings(vec![2], vec![b"\xff\x00a".to_vec(), b"ok".to_vec()]).unwrap();
        let want = r#"{"dtype": "string", "shape": [2], "data": ["?\u0000a", "ok"], "data_b64": ["/wBh", "b2s="]}"#;
        assert_eq!(tensor_to_json(&b), want.replace('?', "\u{fffd}"));
        let back = tensor_from_json(r#"[{"b64": "/wBh"}, {"b64": "b2s="}]"#, DType::String).unwrap();
        assert_eq!(back.as_strings().unwrap(), b.as_strings().unwrap());
        assert!(tensor_from_json(r#"[{"b64": "*"}]"#, DType::String).unwrap_err().to_string().contains("b64"));
        assert!(tensor_from_json(r#"[{"b64": 1}]"#, DType::String).is_err());
    }

    #[test]
    fn strings_travel_as_json_only() {
        let t = tensor_from_json(r#"[["a", "b\"c"], ["", "é"]]"#, DType::String).unwrap();
        assert_eq!(t.shape, [2, 2]);
        assert_eq!(tensor_to_json(&t), r#"{"dtype": "string", "shape": [2, 2], "data": ["a", "b\"c", "", "é"]}"#);
        let t2 =
            tensor_from_json(r#"{"dtype": "string", "shape": [4], "data": ["a", "b\"c", "", "é"]}"#, DType::String)
                .unwrap();
        assert_eq!(t2.num_elements(), 4);
        assert!(tensor_from_json("[1, 2]", DType::String).is_err());
        // A dtype JSON cannot carry is named, not blamed on an empty tensor name (sweep 63).
        let e = tensor_from_json("[[1, 2], [3, -1]]", DType::Complex64).unwrap_err().to_string();
        assert!(e.starts_with("complex64 values cannot be given as JSON"), "{e}");
        assert_eq!(
            write_safetensors(&[("s:0".into(), t)]).unwrap_err().to_string(),
            "tensor 's:0' is a string tensor, and safetensors has no string dtype: fetch it with --json"
        );
    }

    #[test]
    fn safetensors_round_trip_all_dtypes() {
        let ts = vec![
            ("a".to_string(), Tensor::from_f32(vec![2], vec![1.5, -0.0]).unwrap()),
            ("b".to_string(), Tensor::from_f64(vec![], vec![f64::NAN]).unwrap()),
            ("c".to_string(), Tensor::from_i32(vec![1, 2], vec![-1, 7]).unwrap()),
            ("d".to_string(), Tensor::from_i64(vec![0], vec![]).unwrap()),
            ("e".to_string(), Tensor::from_bool(vec![3], vec![true, false, true]).unwrap()),
            ("f".to_string(), Tensor::from_raw(DType::Int8, vec![2], vec![0x80, 7]).unwrap()),
            ("g".to_string(), Tensor::from_raw(DType::UInt16, vec![1], vec![0x34, 0x12]).unwrap()),
            ("h".to_string(), Tensor::from_raw(DType::Int16, vec![1], vec![0xfe, 0xff]).unwrap()),
            ("i".to_string(), Tensor::from_raw(DType::UInt32, vec![1], vec![1, 0, 0, 0x80]).unwrap()),
            ("j".to_string(), Tensor::from_raw(DType::UInt64, vec![1], vec![0xff; 8]).unwrap()),
        ];
        let bytes = write_safetensors(&ts).unwrap();
        let back = read_safetensors(&bytes).unwrap();
        assert_eq!(back.len(), ts.len());
        for ((n1, t1), (n2, t2)) in ts.iter().zip(&back) {
            assert_eq!(n1, n2);
            assert!(t1.bit_eq(t2), "{n1}");
        }
        assert!(read_safetensors(b"garbage").is_err());
        // A well-formed file with a dtype this reader does not take names the tensor and the
        // dtype (the safetensors crate calls the header malformed; sweep 63).
        let header = br#"{"xc":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0; 16]);
        let e = read_safetensors(&file).unwrap_err().to_string();
        assert!(e.starts_with("tensor 'xc': unsupported dtype C64 (safetensors dtypes read: F32,"), "{e}");
    }

    /// The narrow and unsigned integers print and parse as numbers (not as their bytes).
    /// An integer feed written as a float with no fraction (`1e3`, what some JSON writers emit)
    /// is that integer; a fraction is still refused.
    #[test]
    fn integral_floats_feed_integers() {
        let t = tensor_from_json("[1e3, -2.0, 7]", DType::Int64).unwrap();
        assert_eq!(t.as_i64().unwrap(), &[1000, -2, 7]);
        let t = tensor_from_json("1e3", DType::Int32).unwrap();
        assert_eq!(t.as_i32().unwrap(), &[1000]);
        let e = tensor_from_json("[1.5]", DType::Int64).unwrap_err().to_string();
        assert!(e.contains("not an integer: 1.5"), "{e}");
    }

    #[test]
    fn narrow_integers_as_json() {
        let t = tensor_from_json("[[-128, 127], [0, -1]]", DType::Int8).unwrap();
        assert_eq!(tensor_to_json(&t), r#"{"dtype": "int8", "shape": [2, 2], "data": [-128, 127, 0, -1]}"#);
        let t = tensor_from_json("[65535, 258]", DType::UInt16).unwrap();
        assert!(tensor_to_json(&t).ends_with(r#""data": [65535, 258]}"#));
        let t = tensor_from_json("[18446744073709551615]", DType::UInt64).unwrap();
        assert!(tensor_to_json(&t).ends_with(r#""data": [18446744073709551615]}"#));
        assert!(tensor_from_json("[256]", DType::UInt8).is_err());
        assert!(tensor_from_json("[-1]", DType::UInt32).is_err());
        assert!(tensor_from_json("[1.5]", DType::Int16).is_err());
    }

    #[test]
    fn json_feeds_typed_by_placeholder() {
        let t = tensor_from_json("[[1, 2], [3, 4]]", DType::Float32).unwrap();
        assert_eq!((t.shape.clone(), t.as_f32().unwrap().to_vec()), (vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]));
        let t = tensor_from_json("5", DType::Int64).unwrap();
        assert_eq!((t.shape.clone(), t.as_i64().unwrap().to_vec()), (vec![], vec![5]));
        assert!(tensor_from_json("1.5", DType::Int32).is_err());
        assert!(tensor_from_json("[[1], [2, 3]]", DType::Int32).is_err());
        for dtype in [DType::Float32, DType::Float64, DType::Int32, DType::Int64] {
            let e = tensor_from_json("[1, true]", dtype).unwrap_err().to_string();
            assert!(e.contains("true is a bool, not a"), "{dtype}: {e}");
        }
        let t = tensor_from_json("[true, false]", DType::Bool).unwrap();
        assert_eq!(t.as_bool().unwrap(), &[true, false]);
        let t = tensor_from_json("[]", DType::Float32).unwrap();
        assert_eq!(t.shape, vec![0]);
        let t = tensor_from_json(r#"{"dtype": "int32", "shape": [2], "data": [3, 4]}"#, DType::Int32).unwrap();
        assert_eq!(t.as_i32().unwrap(), &[3, 4]);
    }

    #[test]
    fn json_output() {
        let t = Tensor::from_f32(vec![3], vec![0.1, 1.0, f32::INFINITY]).unwrap();
        assert_eq!(tensor_to_json(&t), r#"{"dtype": "float32", "shape": [3], "data": [0.1, 1.0, "Infinity"]}"#);
        let s = tensors_to_json_object(&[("r:0".into(), Tensor::scalar_i32(2))]);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["r:0"]["data"][0], 2);
    }

    #[test]
    fn complex_tensors_print_as_pairs() {
        let mut bytes = Vec::new();
        for x in [1.5f32, -0.1, 0.0, f32::NAN] {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        let t = Tensor { dtype: DType::Complex64, shape: vec![2], data: TensorData::Raw(std::sync::Arc::new(bytes)) };
        assert_eq!(tensor_to_json(&t), r#"{"dtype": "complex64", "shape": [2], "data": [[1.5, -0.1], [0.0, "NaN"]]}"#);
        let bytes: Vec<u8> = [0.1f64, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let t = Tensor { dtype: DType::Complex128, shape: vec![], data: TensorData::Raw(std::sync::Arc::new(bytes)) };
        assert_eq!(tensor_to_json(&t), r#"{"dtype": "complex128", "shape": [], "data": [[0.1, 2.0]]}"#);
    }

    /// The quantized types print as the integers they hold: `qint*` signed, `quint*` not.
    #[test]
    fn quantized_integers_print_signed_or_not() {
        let raw = |d, b: &[u8]| Tensor::from_raw(d, vec![b.len() / d.size_of().unwrap()], b.to_vec()).unwrap();
        let json = |t: &Tensor| tensor_to_json(t).rsplit("\"data\": ").next().unwrap().to_string();
        assert_eq!(json(&raw(DType::QInt8, &[0xff, 0x7f])), "[-1, 127]}");
        assert_eq!(json(&raw(DType::QUInt8, &[0xff, 0x7f])), "[255, 127]}");
        assert_eq!(json(&raw(DType::QInt16, &[0x00, 0x80])), "[-32768]}");
        assert_eq!(json(&raw(DType::QUInt16, &[0x00, 0x80])), "[32768]}");
        assert_eq!(json(&raw(DType::QInt32, &[0xfe, 0xff, 0xff, 0xff])), "[-2]}");
        for d in [DType::QInt8, DType::QUInt8, DType::QInt16, DType::QUInt16, DType::QInt32] {
            let t = raw(d, &vec![0xff; d.size_of().unwrap()]);
            let signed = !matches!(d, DType::QUInt8 | DType::QUInt16);
            assert_eq!(t.to_f64_vec().unwrap()[0] < 0.0, signed, "{d:?}");
        }
    }
}
