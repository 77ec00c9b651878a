//! Conversions between the generated GraphDef messages and autoclust's
//! [`Graph`], including tensor decoding with TensorFlow's rules.
//!
//! Decoding a `TensorProto` follows TensorFlow's `Tensor::FromProto`: a
//! non-empty `tensor_content` holds the little-endian elements; otherwise the
//! typed `*_val` field holds them, and fewer values than elements means the
//! last value repeats (no value at all means zeros). Encoding writes the
//! `*_val` form for scalars and splats and `tensor_content` otherwise,
//! as TensorFlow's own writers do.

use std::sync::Arc;

use autoclust_graph::limits::MAX_ATTR_DEPTH;
use autoclust_graph::{
    ArgDef, AttrDef, AttrValue, Attrs, CompactTensor, DType, FuncAttr, FunctionDef, GradientDef, Graph, Library,
    ListValue, RawNode, Shape, Signature, Span, Tensor, TensorData, Versions,
};
use protobuf::{EnumOrUnknown, MessageField};

use crate::proto::graph_def as pb;
use crate::GraphDefError;

/// Whether TensorFlow's Python writer would have used the typed `*_val`
/// field: it does for scalars and one-element arrays, and for splats it
/// builds from a scalar (`tf.zeros`, `tf.fill`), but writes every array given
/// element by element (even `[1, 1]`) as `tensor_content`. A graph no longer
/// tells the two apart, so a splat of three or more elements counts as built
/// from a scalar — which matches every fixture TensorFlow wrote for us.
fn use_typed_vals(n: usize, all_equal: bool) -> bool {
    n <= 1 || (all_equal && n > 2)
}

/// Where in the input an attribute being decoded sits, for error messages.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    node: &'a str,
    span: Option<Span>,
}

impl Ctx<'_> {
    fn err(&self, attr: &str, message: impl Into<String>) -> GraphDefError {
        GraphDefError::Attr {
            node: self.node.to_string(),
            attr: attr.to_string(),
            message: message.into(),
            span: self.span,
        }
    }
}

/// Builds a graph from a decoded `GraphDef`. `spans[i]` is where node `i` starts in a text file.
pub fn graph_from_proto(mut gd: pb::GraphDef, spans: &[Span]) -> Result<Graph, GraphDefError> {
    let mut raw = Vec::with_capacity(gd.node.len());
    for (i, n) in std::mem::take(&mut gd.node).into_iter().enumerate() {
        raw.push(node_from_proto(n, spans.get(i).copied())?);
    }
    graph_from_nodes(raw, gd)
}

/// Builds a graph from nodes already converted and the rest of their `GraphDef` (its library
/// and versions; its `node` field is ignored).
pub(crate) fn graph_from_nodes(raw: Vec<RawNode>, gd: pb::GraphDef) -> Result<Graph, GraphDefError> {
    for n in &raw {
        check_node_name(n)?;
    }
    let library = match gd.library.into_option() {
        Some(lib) => library_from_proto(lib)?,
        None => Library::default(),
    };
    let versions = gd.versions.into_option().map(|v| Versions {
        producer: v.producer,
        min_consumer: v.min_consumer,
        bad_consumers: v.bad_consumers,
    });
    Ok(Graph::from_raw(raw, library, versions)?)
}

/// Refuses the node names TensorFlow's importer refuses and no input could name: the empty
/// name and names holding control characters (`"x\0y"`). TensorFlow's stricter character
/// set is not enforced: autoclust's own programs name nodes `_autoclust_…`.
fn check_node_name(n: &RawNode) -> Result<(), GraphDefError> {
    let why = if n.name.is_empty() {
        "it is empty"
    } else if n.name.chars().any(char::is_control) {
        "it holds a control character"
    } else {
        return Ok(());
    };
    Err(GraphDefError::NodeName { name: n.name.clone(), why, span: n.span })
}

pub(crate) fn node_from_proto(n: pb::NodeDef, span: Option<Span>) -> Result<RawNode, GraphDefError> {
    node_from_parts(n.name, n.op, n.input, n.device, n.attr, span)
}

/// A node from its decoded fields; `attr` holds each key once.
pub(crate) fn node_from_parts(
    name: String,
    op: String,
    inputs: Vec<String>,
    device: String,
    attr: impl IntoIterator<Item = (String, pb::AttrValue)>,
    span: Option<Span>,
) -> Result<RawNode, GraphDefError> {
    let attrs = attrs_from_proto(attr, Ctx { node: &name, span })?;
    Ok(RawNode { name, op, inputs, attrs, device, span })
}

/// A map field's entries with a repeated key reduced to its last value.
pub(crate) fn last_of_each_key(mut attrs: Vec<(String, pb::AttrValue)>) -> Vec<(String, pb::AttrValue)> {
    // A node has a handful of attributes: comparing each key with the earlier ones beats
    // hashing them (a set per node was 2% of loading a 10⁵-node graph).
    let repeated = if attrs.len() <= 16 {
        attrs.iter().enumerate().any(|(i, (k, _))| attrs[..i].iter().any(|(e, _)| e == k))
    } else {
        let mut seen = std::collections::HashSet::new();
        !attrs.iter().all(|(k, _)| seen.insert(k.as_str()))
    };
    if !repeated {
        return attrs;
    }
    let mut kept = std::collections::HashSet::new();
    attrs.reverse();
    attrs.retain(|(k, _)| kept.insert(k.clone()));
    attrs.reverse();
    attrs
}

fn attrs_from_proto(
    map: impl IntoIterator<Item = (String, pb::AttrValue)>,
    ctx: Ctx<'_>,
) -> Result<Attrs, GraphDefError> {
    let map = map.into_iter();
    let mut attrs = Attrs::with_capacity(map.size_hint().0);
    for (k, v) in map {
        // TensorFlow writes internal annotations with no value (`_input_shapes` on the
        // functions of a SavedModel's resource destroyers, for one); they carry nothing.
        if v.value.is_none() && k.starts_with('_') {
            continue;
        }
        let v = attr_from_proto(v, &k, ctx, 1)?;
        attrs.insert(k, v);
    }
    Ok(attrs)
}

fn dtype_from_proto(t: EnumOrUnknown<pb::DataType>, attr: &str, ctx: Ctx<'_>) -> Result<DType, GraphDefError> {
    DType::from_tf(t.value()).ok_or_else(|| ctx.err(attr, "invalid dtype DT_INVALID"))
}

/// Decodes an attribute value at `depth` (1 for a node's attribute), refusing
/// values nested deeper than [`MAX_ATTR_DEPTH`] as the text readers do (a message
/// built in memory can nest deeper than any file this crate reads).
fn attr_from_proto(v: pb::AttrValue, name: &str, ctx: Ctx<'_>, depth: usize) -> Result<AttrValue, GraphDefError> {
    use pb::attr_value::Value;
    if depth > MAX_ATTR_DEPTH {
        let outermost = name.split('.').next().unwrap_or(name);
        return Err(ctx.err(outermost, format!("nested deeper than {MAX_ATTR_DEPTH} levels")));
    }
    Ok(match v.value {
        None => return Err(ctx.err(name, "attribute has no value")),
        Some(Value::S(s)) => AttrValue::S(s),
        Some(Value::I(i)) => AttrValue::I(i),
        Some(Value::F(f)) => AttrValue::F(f),
        Some(Value::B(b)) => AttrValue::B(b),
        Some(Value::Type(t)) => AttrValue::Type(dtype_from_proto(t, name, ctx)?),
        Some(Value::Shape(s)) => AttrValue::Shape(shape_from_proto(&s, name, ctx)?),
        Some(Value::Tensor(t)) => tensor_attr_from_proto(&t, name, ctx)?,
        Some(Value::Placeholder(p)) => AttrValue::Placeholder(p),
        Some(Value::Func(f)) => AttrValue::Func(func_from_proto(f, name, ctx, depth)?),
        Some(Value::List(l)) => AttrValue::List(list_from_proto(l, name, ctx, depth)?),
    })
}

fn list_from_proto(
    l: pb::attr_value::ListValue,
    name: &str,
    ctx: Ctx<'_>,
    depth: usize,
) -> Result<ListValue, GraphDefError> {
    let kinds = [
        !l.s.is_empty(),
        !l.i.is_empty(),
        !l.f.is_empty(),
        !l.b.is_empty(),
        !l.type_.is_empty(),
        !l.shape.is_empty(),
        !l.tensor.is_empty(),
        !l.func.is_empty(),
    ];
    if kinds.iter().filter(|k| **k).count() > 1 {
        return Err(ctx.err(name, "list mixes element kinds"));
    }
    Ok(if !l.s.is_empty() {
        ListValue::S(l.s)
    } else if !l.i.is_empty() {
        ListValue::I(l.i)
    } else if !l.f.is_empty() {
        ListValue::F(l.f)
    } else if !l.b.is_empty() {
        ListValue::B(l.b)
    } else if !l.type_.is_empty() {
        ListValue::Type(l.type_.into_iter().map(|t| dtype_from_proto(t, name, ctx)).collect::<Result<_, _>>()?)
    } else if !l.shape.is_empty() {
        ListValue::Shape(l.shape.iter().map(|s| shape_from_proto(s, name, ctx)).collect::<Result<_, _>>()?)
    } else if !l.tensor.is_empty() {
        ListValue::Tensor(l.tensor.iter().map(|t| tensor_from_proto(t, name, ctx)).collect::<Result<_, _>>()?)
    } else if !l.func.is_empty() {
        ListValue::Func(l.func.into_iter().map(|f| func_from_proto(f, name, ctx, depth)).collect::<Result<_, _>>()?)
    } else {
        ListValue::Empty
    })
}

/// A function attribute whose value is at `depth`: its attributes are one level deeper.
fn func_from_proto(f: pb::NameAttrList, name: &str, ctx: Ctx<'_>, depth: usize) -> Result<FuncAttr, GraphDefError> {
    let mut attrs = autoclust_graph::Attrs::new();
    for (k, v) in f.attr {
        let v = attr_from_proto(v, &format!("{name}.{k}"), ctx, depth + 1)?;
        attrs.insert(k, v);
    }
    Ok(FuncAttr { name: f.name, attrs })
}

fn shape_from_proto(s: &pb::TensorShapeProto, name: &str, ctx: Ctx<'_>) -> Result<Shape, GraphDefError> {
    if s.unknown_rank {
        if !s.dim.is_empty() {
            return Err(ctx.err(name, "shape has unknown_rank and dimensions"));
        }
        return Ok(Shape::unknown());
    }
    let dims = s
        .dim
        .iter()
        .map(|d| match d.size {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(n)),
            n => Err(ctx.err(name, format!("shape dimension {n} is negative"))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Shape::with_dims(dims))
}

/// Decodes a `TensorProto` (see the module docs for TensorFlow's rules).
/// A tensor attribute: large splats and repeated tails (fewer typed values than
/// elements) stay compact ([`CompactTensor`]) — a few bytes of file declaring a huge
/// constant cost a few bytes here, and the size budget applies when a kernel expands it.
fn tensor_attr_from_proto(t: &pb::TensorProto, name: &str, ctx: Ctx<'_>) -> Result<AttrValue, GraphDefError> {
    let compactable = t.tensor_content.is_empty()
        && matches!(
            t.dtype.enum_value(),
            Ok(pb::DataType::DT_FLOAT
                | pb::DataType::DT_DOUBLE
                | pb::DataType::DT_INT32
                | pb::DataType::DT_INT64
                | pb::DataType::DT_BOOL
                | pb::DataType::DT_STRING)
        );
    let dims = t.tensor_shape.as_ref().map(|s| s.dim.iter().map(|d| d.size).collect::<Vec<i64>>()).unwrap_or_default();
    let count = dims.iter().try_fold(1u64, |a, &d| u64::try_from(d).ok().and_then(|d| a.checked_mul(d)));
    let given = t.float_val.len()
        + t.double_val.len()
        + t.int_val.len()
        + t.int64_val.len()
        + t.bool_val.len()
        + t.string_val.len();
    let large = count.is_some_and(|n| n >= autoclust_graph::COMPACT_MIN_ELEMENTS as u64 && (given as u64) < n);
    if !(compactable && large) {
        return Ok(AttrValue::Tensor(tensor_from_proto(t, name, ctx)?));
    }
    let dtype = dtype_from_proto(t.dtype, name, ctx)?;
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let bad = |m: String| ctx.err(name, m);
    let k = vec![given];
    let values = match dtype {
        DType::Float32 => Tensor::from_f32(k, t.float_val.clone()),
        DType::Float64 => Tensor::from_f64(k, t.double_val.clone()),
        DType::Int32 => Tensor::from_i32(k, t.int_val.clone()),
        DType::Int64 => Tensor::from_i64(k, t.int64_val.clone()),
        DType::Bool => Tensor::from_bool(k, t.bool_val.clone()),
        _ => Tensor::from_strings(k, t.string_val.clone()),
    };
    match values {
        Ok(v) => CompactTensor::or_dense(v, shape).map_err(|e| bad(e.to_string())),
        // Values in another dtype's field: the dense reader says what is wrong.
        Err(_) => Ok(AttrValue::Tensor(tensor_from_proto(t, name, ctx)?)),
    }
}

/// A serialized `TensorProto` (any of TensorFlow's encodings: `tensor_content`, the typed
/// `*_val` fields with their splat rule) as a tensor: `ParseTensor`'s decoding. The error
/// is protobuf's (`Err(None)`: not a `TensorProto`) or the converter's message.
pub fn tensor_from_proto_bytes(bytes: &[u8]) -> Result<Tensor, Option<String>> {
    use protobuf::Message;
    if crate::wire::first_incomplete_field(bytes).is_some() {
        // Cut short: TensorFlow's parser refuses it (rust-protobuf would read a shorter tensor).
        return Err(None);
    }
    let mut input = protobuf::CodedInputStream::from_bytes(bytes);
    input.set_recursion_limit(autoclust_graph::limits::MAX_MESSAGE_DEPTH as u32);
    let proto =
        pb::TensorProto::parse_from(&mut input).and_then(|t| input.check_eof().map(|()| t)).map_err(|_| None)?;
    tensor_from_proto(&proto, "", Ctx { node: "", span: None }).map_err(|e| match e {
        GraphDefError::Attr { message, .. } => Some(message),
        e => Some(e.to_string()),
    })
}

/// A tensor serialized as TensorFlow's `Tensor::AsProtoTensorContent` writes it, which
/// `SerializeTensor` (`tf.io.serialize_tensor`) uses: `dtype`, the shape (present even for
/// a scalar), then every element in `tensor_content` (little-endian; nothing for no
/// elements), or in `string_val` for strings. Fields in number order, as TensorFlow's C++
/// serializer writes them.
pub fn tensor_to_content_proto_bytes(t: &Tensor) -> Vec<u8> {
    use protobuf::Message;
    let mut out = pb::TensorProto::new();
    out.dtype = dtype_to_proto(t.dtype);
    out.tensor_shape = MessageField::some(shape_to_proto(&Shape::known(&t.shape)));
    match &t.data {
        TensorData::Str(v) => out.string_val = v.to_vec(),
        _ => out.tensor_content = t.to_le_bytes().unwrap_or_default(),
    }
    out.write_to_bytes().expect("a TensorProto in memory serializes")
}

fn tensor_from_proto(t: &pb::TensorProto, name: &str, ctx: Ctx<'_>) -> Result<Tensor, GraphDefError> {
    let dtype = dtype_from_proto(t.dtype, name, ctx)?;
    let shape = match t.tensor_shape.as_ref() {
        None => Shape::scalar(),
        Some(s) => shape_from_proto(s, name, ctx)?,
    };
    let dims = shape.to_known().ok_or_else(|| ctx.err(name, format!("tensor shape {shape} is not fully known")))?;
    let bad = |m: String| ctx.err(name, m);
    // Checked before any buffer exists: a declared shape is only a few bytes of the file.
    let n = autoclust_graph::limits::tensor_elements(dtype, &dims).map_err(|e| bad(e.to_string()))?;
    if !t.tensor_content.is_empty() {
        let width = dtype.size_of().ok_or_else(|| bad(format!("tensor_content is not allowed for {dtype}")))?;
        let c = &t.tensor_content;
        if Some(c.len()) != n.checked_mul(width) {
            return Err(bad(format!(
                "tensor_content has {} bytes; {dtype}{} needs {}",
                c.len(),
                shape,
                n.saturating_mul(width)
            )));
        }
        let data = match dtype {
            DType::Float32 => TensorData::F32(Arc::new(c.chunks_exact(4).map(|b| f32::from_le_bytes(le(b))).collect())),
            DType::Float64 => TensorData::F64(Arc::new(c.chunks_exact(8).map(|b| f64::from_le_bytes(le(b))).collect())),
            DType::Int32 => TensorData::I32(Arc::new(c.chunks_exact(4).map(|b| i32::from_le_bytes(le(b))).collect())),
            DType::Int64 => TensorData::I64(Arc::new(c.chunks_exact(8).map(|b| i64::from_le_bytes(le(b))).collect())),
            DType::Bool => TensorData::Bool(Arc::new(c.iter().map(|&b| b != 0).collect())),
            _ => TensorData::Raw(Arc::new(c.clone())),
        };
        return Ok(Tensor { dtype, shape: dims, data });
    }
    let data = match dtype {
        DType::Float32 => TensorData::F32(Arc::new(splat(&t.float_val, n, 0.0).map_err(bad)?)),
        DType::Float64 => TensorData::F64(Arc::new(splat(&t.double_val, n, 0.0).map_err(bad)?)),
        DType::Int32 => TensorData::I32(Arc::new(splat(&t.int_val, n, 0).map_err(bad)?)),
        DType::Int64 => TensorData::I64(Arc::new(splat(&t.int64_val, n, 0).map_err(bad)?)),
        DType::Bool => TensorData::Bool(Arc::new(splat(&t.bool_val, n, false).map_err(bad)?)),
        DType::String => TensorData::Str(Arc::new(splat(&t.string_val, n, Vec::new()).map_err(bad)?)),
        DType::Int8 | DType::UInt8 | DType::QInt8 | DType::QUInt8 => {
            raw(splat(&t.int_val, n, 0).map_err(bad)?.iter().map(|&v| (v as u8).to_le_bytes()))
        }
        DType::Int16 | DType::UInt16 | DType::QInt16 | DType::QUInt16 => {
            raw(splat(&t.int_val, n, 0).map_err(bad)?.iter().map(|&v| (v as u16).to_le_bytes()))
        }
        DType::QInt32 => raw(splat(&t.int_val, n, 0).map_err(bad)?.iter().map(|&v| v.to_le_bytes())),
        DType::Float16 | DType::BFloat16 => {
            raw(splat(&t.half_val, n, 0).map_err(bad)?.iter().map(|&v| (v as u16).to_le_bytes()))
        }
        DType::UInt32 => raw(splat(&t.uint32_val, n, 0).map_err(bad)?.iter().map(|&v| v.to_le_bytes())),
        DType::UInt64 => raw(splat(&t.uint64_val, n, 0).map_err(bad)?.iter().map(|&v| v.to_le_bytes())),
        DType::Complex64 => {
            let pairs: Vec<[f32; 2]> = t.scomplex_val.chunks(2).map(|p| [p[0], *p.get(1).unwrap_or(&0.0)]).collect();
            raw(splat(&pairs, n, [0.0; 2]).map_err(bad)?.iter().flat_map(|p| p.map(f32::to_le_bytes)))
        }
        DType::Complex128 => {
            let pairs: Vec<[f64; 2]> = t.dcomplex_val.chunks(2).map(|p| [p[0], *p.get(1).unwrap_or(&0.0)]).collect();
            raw(splat(&pairs, n, [0.0; 2]).map_err(bad)?.iter().flat_map(|p| p.map(f64::to_le_bytes)))
        }
        other => return Err(bad(format!("tensors of dtype {other} are not supported"))),
    };
    Ok(Tensor { dtype, shape: dims, data })
}

fn le<const N: usize>(b: &[u8]) -> [u8; N] {
    b.try_into().expect("chunks_exact gives N bytes")
}

fn raw<const N: usize>(it: impl Iterator<Item = [u8; N]>) -> TensorData {
    TensorData::Raw(Arc::new(it.flatten().collect()))
}

/// TensorFlow's rule: all `n` values, or fewer with the last repeated, or none (zeros).
fn splat<T: Clone>(vals: &[T], n: usize, zero: T) -> Result<Vec<T>, String> {
    if vals.len() > n {
        return Err(format!("{} values for a tensor of {n} elements", vals.len()));
    }
    let mut v = vals.to_vec();
    let fill = vals.last().cloned().unwrap_or(zero);
    v.resize(n, fill);
    Ok(v)
}

fn library_from_proto(lib: pb::FunctionDefLibrary) -> Result<Library, GraphDefError> {
    let mut functions = Vec::with_capacity(lib.function.len());
    for f in lib.function {
        functions.push(function_from_proto(f)?);
    }
    let gradients = lib
        .gradient
        .into_iter()
        .map(|g| GradientDef { function_name: g.function_name, gradient_func: g.gradient_func })
        .collect();
    Ok(Library::new(functions, gradients))
}

fn function_from_proto(f: pb::FunctionDef) -> Result<FunctionDef, GraphDefError> {
    let sig = f.signature.into_option().unwrap_or_default();
    let fname = sig.name.clone();
    let ctx = Ctx { node: &fname, span: None };
    let arg = |a: pb::op_def::ArgDef| ArgDef {
        name: a.name,
        description: a.description,
        dtype: DType::from_tf(a.type_.value()),
        type_attr: a.type_attr,
        number_attr: a.number_attr,
        type_list_attr: a.type_list_attr,
        is_ref: a.is_ref,
    };
    let mut attr_defs = Vec::with_capacity(sig.attr.len());
    for a in sig.attr {
        let default = match a.default_value.into_option() {
            Some(v) => Some(attr_from_proto(v, &a.name, ctx, 1)?),
            None => None,
        };
        let allowed_values = match a.allowed_values.into_option() {
            Some(v) => Some(attr_from_proto(v, &a.name, ctx, 1)?),
            None => None,
        };
        attr_defs.push(AttrDef {
            name: a.name,
            ty: a.type_,
            default,
            allowed_values,
            has_minimum: a.has_minimum,
            minimum: a.minimum,
            description: a.description,
        });
    }
    let outputs: Vec<ArgDef> = sig.output_arg.into_iter().map(arg).collect();
    let signature = Signature {
        name: sig.name,
        inputs: sig.input_arg.into_iter().map(arg).collect(),
        control_outputs: sig.control_output,
        outputs,
        attrs: attr_defs,
        is_stateful: sig.is_stateful,
        description: sig.description,
    };
    let mut nodes = Vec::with_capacity(f.node_def.len());
    for n in f.node_def {
        let name = format!("{fname}/{}", n.name);
        let ctx = Ctx { node: &name, span: None };
        let attrs = attrs_from_proto(n.attr, ctx)?;
        nodes.push(RawNode { name: n.name, op: n.op, inputs: n.input, attrs, device: n.device, span: None });
    }
    // The maps come unordered; order them as the signature lists them.
    let ret = ordered(f.ret, signature.outputs.iter().map(|a| a.name.as_str()));
    let control_ret = ordered(f.control_ret, signature.control_outputs.iter().map(String::as_str));
    let attrs = attrs_from_proto(f.attr, ctx)?;
    Ok(FunctionDef { signature, attrs, nodes, ret, control_ret })
}

/// Map entries in the order of `names`, then any others sorted by key.
fn ordered<'a>(
    mut map: std::collections::HashMap<String, String>,
    names: impl Iterator<Item = &'a str>,
) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(map.len());
    for n in names {
        if let Some(v) = map.remove(n) {
            out.push((n.to_string(), v));
        }
    }
    let mut rest: Vec<_> = map.into_iter().collect();
    rest.sort();
    out.extend(rest);
    out
}

/// Builds a `GraphDef` message from a graph.
pub fn proto_from_graph(g: &Graph) -> pb::GraphDef {
    let mut gd = pb::GraphDef::new();
    gd.node = g.to_raw().iter().map(node_to_proto).collect();
    if !g.library.is_empty() {
        gd.library = MessageField::some(library_to_proto(&g.library));
    }
    if let Some(v) = &g.versions {
        let mut vd = pb::VersionDef::new();
        vd.producer = v.producer;
        vd.min_consumer = v.min_consumer;
        vd.bad_consumers = v.bad_consumers.clone();
        gd.versions = MessageField::some(vd);
    }
    gd
}

fn node_to_proto(n: &RawNode) -> pb::NodeDef {
    let mut nd = pb::NodeDef::new();
    nd.name = n.name.clone();
    nd.op = n.op.clone();
    nd.input = n.inputs.clone();
    nd.device = n.device.clone();
    nd.attr = attrs_to_proto(&n.attrs);
    nd
}

fn attrs_to_proto<'a>(
    attrs: impl IntoIterator<Item = (&'a String, &'a AttrValue)>,
) -> std::collections::HashMap<String, pb::AttrValue> {
    attrs.into_iter().map(|(k, v)| (k.clone(), attr_to_proto(v))).collect()
}

fn dtype_to_proto(d: DType) -> EnumOrUnknown<pb::DataType> {
    EnumOrUnknown::from_i32(d.to_tf())
}

fn attr_to_proto(v: &AttrValue) -> pb::AttrValue {
    use pb::attr_value::Value;
    let mut out = pb::AttrValue::new();
    out.value = Some(match v {
        AttrValue::S(s) => Value::S(s.clone()),
        AttrValue::I(i) => Value::I(*i),
        AttrValue::F(f) => Value::F(*f),
        AttrValue::B(b) => Value::B(*b),
        AttrValue::Type(t) => Value::Type(dtype_to_proto(*t)),
        AttrValue::Shape(s) => Value::Shape(shape_to_proto(s)),
        AttrValue::Tensor(t) => Value::Tensor(tensor_to_proto(t)),
        AttrValue::Compact(c) => {
            // TensorFlow's own compact form: the given values, the last repeated.
            let mut p = tensor_to_proto(&c.values);
            p.tensor_shape = MessageField::some(shape_to_proto(&Shape::known(&c.shape)));
            let v = &c.values;
            p.tensor_content.clear();
            match &v.data {
                TensorData::F32(x) => p.float_val = x.to_vec(),
                TensorData::F64(x) => p.double_val = x.to_vec(),
                TensorData::I32(x) => p.int_val = x.to_vec(),
                TensorData::I64(x) => p.int64_val = x.to_vec(),
                TensorData::Bool(x) => p.bool_val = x.to_vec(),
                TensorData::Str(x) => p.string_val = x.to_vec(),
                TensorData::Raw(_) | TensorData::List(_) | TensorData::Optional(_) => {}
            }
            Value::Tensor(p)
        }
        AttrValue::Func(f) => Value::Func(func_to_proto(f)),
        AttrValue::Placeholder(p) => Value::Placeholder(p.clone()),
        AttrValue::List(l) => {
            let mut lv = pb::attr_value::ListValue::new();
            match l {
                ListValue::Empty => {}
                ListValue::S(v) => lv.s = v.clone(),
                ListValue::I(v) => lv.i = v.clone(),
                ListValue::F(v) => lv.f = v.clone(),
                ListValue::B(v) => lv.b = v.clone(),
                ListValue::Type(v) => lv.type_ = v.iter().map(|d| dtype_to_proto(*d)).collect(),
                ListValue::Shape(v) => lv.shape = v.iter().map(shape_to_proto).collect(),
                ListValue::Tensor(v) => lv.tensor = v.iter().map(tensor_to_proto).collect(),
                ListValue::Func(v) => lv.func = v.iter().map(func_to_proto).collect(),
            }
            Value::List(lv)
        }
    });
    out
}

fn func_to_proto(f: &FuncAttr) -> pb::NameAttrList {
    let mut out = pb::NameAttrList::new();
    out.name = f.name.clone();
    out.attr = attrs_to_proto(&f.attrs);
    out
}

fn shape_to_proto(s: &Shape) -> pb::TensorShapeProto {
    let mut out = pb::TensorShapeProto::new();
    match &s.dims {
        None => out.unknown_rank = true,
        Some(dims) => {
            out.dim = dims
                .iter()
                .map(|d| {
                    let mut dim = pb::tensor_shape_proto::Dim::new();
                    dim.size = d.unwrap_or(-1);
                    dim
                })
                .collect()
        }
    }
    out
}

/// Encodes a tensor: `*_val` or `tensor_content`, as TensorFlow's writer would ([`use_typed_vals`]).
fn tensor_to_proto(t: &Tensor) -> pb::TensorProto {
    let mut out = pb::TensorProto::new();
    out.dtype = dtype_to_proto(t.dtype);
    out.tensor_shape = MessageField::some(shape_to_proto(&Shape::known(&t.shape)));
    let n = t.num_elements();
    if n == 0 {
        return out;
    }
    // Typed values drop trailing repeats (TensorFlow's compression, undone
    // by its splat rule); `None` means use `tensor_content`.
    fn vals<T: Clone>(v: &[T], same: impl Fn(&T, &T) -> bool) -> Option<Vec<T>> {
        let mut len = v.len();
        while len > 1 && same(&v[len - 1], &v[len - 2]) {
            len -= 1;
        }
        use_typed_vals(v.len(), len == 1).then(|| v[..len].to_vec())
    }
    match &t.data {
        TensorData::F32(v) => match vals(v, |a, b| a.to_bits() == b.to_bits()) {
            Some(x) => out.float_val = x,
            None => out.tensor_content = v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        },
        TensorData::F64(v) => match vals(v, |a, b| a.to_bits() == b.to_bits()) {
            Some(x) => out.double_val = x,
            None => out.tensor_content = v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        },
        TensorData::I32(v) => match vals(v, |a, b| a == b) {
            Some(x) => out.int_val = x,
            None => out.tensor_content = v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        },
        TensorData::I64(v) => match vals(v, |a, b| a == b) {
            Some(x) => out.int64_val = x,
            None => out.tensor_content = v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        },
        TensorData::Bool(v) => match vals(v, |a, b| a == b) {
            Some(x) => out.bool_val = x,
            None => out.tensor_content = v.iter().map(|&x| x as u8).collect(),
        },
        TensorData::Str(v) => out.string_val = v.to_vec(),
        TensorData::Raw(bytes) => raw_to_proto(t.dtype, bytes, &mut out),
        // Run-time values only: no graph holds a TensorList constant, so nothing to write.
        TensorData::List(_) | TensorData::Optional(_) => {}
    }
    out
}

/// Raw-byte dtypes: the typed `*_val` field when TensorFlow has one and the
/// tensor is small, else `tensor_content`.
fn raw_to_proto(dtype: DType, bytes: &[u8], out: &mut pb::TensorProto) {
    let small = dtype.size_of().is_some_and(|w| {
        let first = &bytes[..w.min(bytes.len())];
        use_typed_vals(bytes.len() / w, bytes.chunks_exact(w).all(|c| c == first))
    });
    if !small {
        out.tensor_content = bytes.to_vec();
        return;
    }
    match dtype {
        DType::Int8 | DType::QInt8 => out.int_val = bytes.iter().map(|&b| i32::from(b as i8)).collect(),
        DType::UInt8 | DType::QUInt8 => out.int_val = bytes.iter().map(|&b| i32::from(b)).collect(),
        DType::Int16 | DType::QInt16 => {
            out.int_val = bytes.chunks_exact(2).map(|b| i32::from(i16::from_le_bytes(le(b)))).collect()
        }
        DType::UInt16 | DType::QUInt16 => {
            out.int_val = bytes.chunks_exact(2).map(|b| i32::from(u16::from_le_bytes(le(b)))).collect()
        }
        DType::Float16 | DType::BFloat16 => {
            out.half_val = bytes.chunks_exact(2).map(|b| i32::from(u16::from_le_bytes(le(b)))).collect()
        }
        DType::QInt32 => out.int_val = bytes.chunks_exact(4).map(|b| i32::from_le_bytes(le(b))).collect(),
        DType::UInt32 => out.uint32_val = bytes.chunks_exact(4).map(|b| u32::from_le_bytes(le(b))).collect(),
        DType::UInt64 => out.uint64_val = bytes.chunks_exact(8).map(|b| u64::from_le_bytes(le(b))).collect(),
        DType::Complex64 => out.scomplex_val = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(le(b))).collect(),
        DType::Complex128 => out.dcomplex_val = bytes.chunks_exact(8).map(|b| f64::from_le_bytes(le(b))).collect(),
        _ => out.tensor_content = bytes.to_vec(),
    }
    compress(&mut out.int_val);
    compress(&mut out.half_val);
    compress(&mut out.uint32_val);
    compress(&mut out.uint64_val);
}

/// Drops trailing repeats: TensorFlow's splat rule restores them.
fn compress<T: PartialEq>(v: &mut Vec<T>) {
    while v.len() > 1 && v[v.len() - 1] == v[v.len() - 2] {
        v.pop();
    }
}

fn library_to_proto(lib: &Library) -> pb::FunctionDefLibrary {
    let mut out = pb::FunctionDefLibrary::new();
    out.function = lib.functions.iter().map(function_to_proto).collect();
    out.gradient = lib
        .gradients
        .iter()
        .map(|g| {
            let mut gd = pb::GradientDef::new();
            gd.function_name = g.function_name.clone();
            gd.gradient_func = g.gradient_func.clone();
            gd
        })
        .collect();
    out
}

fn function_to_proto(f: &FunctionDef) -> pb::FunctionDef {
    let arg = |a: &ArgDef| {
        let mut out = pb::op_def::ArgDef::new();
        out.name = a.name.clone();
        out.description = a.description.clone();
        out.type_ = EnumOrUnknown::from_i32(a.dtype.map_or(0, DType::to_tf));
        out.type_attr = a.type_attr.clone();
        out.number_attr = a.number_attr.clone();
        out.type_list_attr = a.type_list_attr.clone();
        out.is_ref = a.is_ref;
        out
    };
    let s = &f.signature;
    let mut sig = pb::OpDef::new();
    sig.name = s.name.clone();
    sig.input_arg = s.inputs.iter().map(arg).collect();
    sig.output_arg = s.outputs.iter().map(arg).collect();
    sig.control_output = s.control_outputs.clone();
    sig.attr = s
        .attrs
        .iter()
        .map(|a| {
            let mut out = pb::op_def::AttrDef::new();
            out.name = a.name.clone();
            out.type_ = a.ty.clone();
            out.default_value = a.default.as_ref().map(attr_to_proto).into();
            out.allowed_values = a.allowed_values.as_ref().map(attr_to_proto).into();
            out.has_minimum = a.has_minimum;
            out.minimum = a.minimum;
            out.description = a.description.clone();
            out
        })
        .collect();
    sig.is_stateful = s.is_stateful;
    sig.description = s.description.clone();
    let mut out = pb::FunctionDef::new();
    out.signature = MessageField::some(sig);
    out.attr = attrs_to_proto(&f.attrs);
    out.node_def = f.nodes.iter().map(node_to_proto).collect();
    out.ret = f.ret.iter().cloned().collect();
    out.control_ret = f.control_ret.iter().cloned().collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Ctx<'static> {
        Ctx { node: "c", span: None }
    }

    fn tensor(dtype: pb::DataType, dims: &[i64]) -> pb::TensorProto {
        let mut t = pb::TensorProto::new();
        t.dtype = EnumOrUnknown::new(dtype);
        let mut s = pb::TensorShapeProto::new();
        s.dim = dims
            .iter()
            .map(|&d| {
                let mut x = pb::tensor_shape_proto::Dim::new();
                x.size = d;
                x
            })
            .collect();
        t.tensor_shape = MessageField::some(s);
        t
    }

    #[test]
    fn splats_the_last_value() {
        let mut t = tensor(pb::DataType::DT_FLOAT, &[2, 3]);
        t.float_val = vec![1.0, 2.0];
        let d = tensor_from_proto(&t, "value", ctx()).unwrap();
        assert_eq!(d.as_f32().unwrap(), &[1.0, 2.0, 2.0, 2.0, 2.0, 2.0]);
        let z = tensor_from_proto(&tensor(pb::DataType::DT_INT64, &[3]), "value", ctx()).unwrap();
        assert_eq!(z.as_i64().unwrap(), &[0, 0, 0]);
        t.float_val = vec![0.0; 7];
        assert!(tensor_from_proto(&t, "value", ctx()).is_err());
    }

    #[test]
    fn large_splats_stay_compact_and_encode_back_as_given() {
        // 10^12 elements from one value: kept as given, not expanded, not refused.
        let mut t = tensor(pb::DataType::DT_FLOAT, &[1_000_000, 1_000_000]);
        t.float_val = vec![1.0, 2.0];
        let AttrValue::Compact(c) = tensor_attr_from_proto(&t, "value", ctx()).unwrap() else { panic!("compact") };
        assert_eq!((c.shape.as_slice(), c.values.as_f32().unwrap()), (&[1_000_000, 1_000_000][..], &[1.0f32, 2.0][..]));
        let Some(pb::attr_value::Value::Tensor(back)) = attr_to_proto(&AttrValue::Compact(c)).value else {
            panic!("a tensor")
        };
        assert_eq!(back.float_val, vec![1.0, 2.0]);
        assert!(back.tensor_content.is_empty());
        assert_eq!(back.tensor_shape.dim.iter().map(|d| d.size).collect::<Vec<_>>(), vec![1_000_000, 1_000_000]);
        // Small splats, and values in another dtype's field, go the dense way.
        let mut small = tensor(pb::DataType::DT_INT32, &[3]);
        small.int_val = vec![7];
        assert!(matches!(tensor_attr_from_proto(&small, "value", ctx()).unwrap(), AttrValue::Tensor(_)));
        let mut wrong = tensor(pb::DataType::DT_FLOAT, &[4096]);
        wrong.int_val = vec![1];
        assert!(matches!(tensor_attr_from_proto(&wrong, "value", ctx()).unwrap(), AttrValue::Tensor(_)));
    }

    #[test]
    fn refuses_hostile_sizes_before_allocating() {
        // 4 TB declared by a few bytes: refused, no allocation attempted.
        let mut t = tensor(pb::DataType::DT_FLOAT, &[1_000_000, 1_000_000]);
        t.float_val = vec![1.0];
        let e = tensor_from_proto(&t, "value", ctx()).unwrap_err().to_string();
        assert!(e.starts_with("node 'c': attribute 'value': tensor float32[1000000, 1000000] needs"), "{e}");
        assert!(e.contains("--max-tensor-bytes"), "{e}");
        // 2^61 elements (the old splat's "capacity overflow") and 2^62 (its bytes overflow).
        let e = tensor_from_proto(&tensor(pb::DataType::DT_FLOAT, &[1 << 61]), "value", ctx()).unwrap_err();
        assert!(e.to_string().contains("needs 9223372036854775808 bytes"), "{e}");
        let e = tensor_from_proto(&tensor(pb::DataType::DT_FLOAT, &[1 << 62]), "value", ctx()).unwrap_err();
        assert!(e.to_string().contains("more elements than can be counted"), "{e}");
        let e = tensor_from_proto(&tensor(pb::DataType::DT_STRING, &[1 << 40]), "value", ctx()).unwrap_err();
        assert!(e.to_string().contains("bytes, more than the limit"), "{e}");
        // An empty tensor with a huge other dimension is fine.
        let z = tensor_from_proto(&tensor(pb::DataType::DT_FLOAT, &[0, 1 << 62]), "value", ctx()).unwrap();
        assert_eq!(z.num_elements(), 0);
    }

    #[test]
    fn decodes_tensor_content_little_endian() {
        let mut t = tensor(pb::DataType::DT_INT32, &[2]);
        t.tensor_content = vec![1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(tensor_from_proto(&t, "value", ctx()).unwrap().as_i32().unwrap(), &[1, -1]);
        t.tensor_content.pop();
        let e = tensor_from_proto(&t, "value", ctx()).unwrap_err();
        assert!(e.to_string().contains("tensor_content has 7 bytes"), "{e}");
    }

    #[test]
    fn half_values_are_raw_bits() {
        let mut t = tensor(pb::DataType::DT_HALF, &[2]);
        t.half_val = vec![0x3c00];
        let d = tensor_from_proto(&t, "value", ctx()).unwrap();
        assert_eq!(d.data, TensorData::Raw(Arc::new(vec![0x00, 0x3c, 0x00, 0x3c])));
        assert_eq!(tensor_to_proto(&d).tensor_content, vec![0x00, 0x3c, 0x00, 0x3c]);
        let one = Tensor::from_raw(DType::Float16, vec![], vec![0x00, 0x3c]).unwrap();
        assert_eq!(tensor_to_proto(&one).half_val, vec![0x3c00]);
    }

    #[test]
    fn encodes_small_as_vals_and_large_as_content() {
        let splat = Tensor::from_f32(vec![3], vec![5.0, 5.0, 5.0]).unwrap();
        assert_eq!(tensor_to_proto(&splat).float_val, vec![5.0]);
        let p = tensor_to_proto(&Tensor::scalar_f32(5.0));
        assert_eq!(p.float_val, vec![5.0]);
        assert!(p.tensor_content.is_empty());
        let pair = Tensor::from_i32(vec![2], vec![1, 1]).unwrap();
        assert_eq!(tensor_to_proto(&pair).tensor_content, [1, 0, 0, 0, 1, 0, 0, 0]);
        let big = Tensor::from_f32(vec![20], (0..20).map(|i| i as f32).collect()).unwrap();
        let p = tensor_to_proto(&big);
        assert!(p.float_val.is_empty());
        assert_eq!(p.tensor_content.len(), 80);
        let back = tensor_from_proto(&p, "value", ctx()).unwrap();
        assert!(back.bit_eq(&big));
    }

    #[test]
    fn unknown_dims_and_rank() {
        let mut s = pb::TensorShapeProto::new();
        s.unknown_rank = true;
        assert_eq!(shape_from_proto(&s, "shape", ctx()).unwrap(), Shape::unknown());
        let t = tensor(pb::DataType::DT_FLOAT, &[-1, 3]);
        let shape = shape_from_proto(t.tensor_shape.as_ref().unwrap(), "shape", ctx()).unwrap();
        assert_eq!(shape, Shape::with_dims(vec![None, Some(3)]));
        assert!(tensor_from_proto(&t, "value", ctx()).is_err());
    }
}
