//! The native-format printer: a [`Graph`] as one node per line.
//!
//! Everything printed reads back to the same value: floats use Rust's
//! shortest round-trip form, NaNs other than the canonical one carry their
//! bits, names outside the identifier alphabet are quoted.

use std::fmt::Write as _;

use crate::{
    ArgDef, AttrDef, AttrValue, DType, FuncAttr, FunctionDef, Graph, ListValue, RawNode, Shape, Tensor, TensorData,
    Versions,
};

/// Prints a whole graph: versions, nodes, then the function library.
pub fn print_graph(g: &Graph) -> String {
    let mut out = String::with_capacity(64 * g.len() + 64);
    if let Some(v) = &g.versions {
        print_versions(&mut out, v);
    }
    for n in g.to_raw() {
        print_node(&mut out, &n, "");
    }
    for f in g.library.functions.iter() {
        print_function(&mut out, f);
    }
    for gr in &g.library.gradients {
        out.push_str("gradient ");
        name(&mut out, &gr.function_name);
        out.push_str(" = ");
        name(&mut out, &gr.gradient_func);
        out.push('\n');
    }
    out
}

fn print_versions(out: &mut String, v: &Versions) {
    write!(out, "versions producer={} min_consumer={}", v.producer, v.min_consumer).expect("write to String");
    if !v.bad_consumers.is_empty() {
        out.push_str(" bad_consumers=[");
        for (i, b) in v.bad_consumers.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write!(out, "{b}").expect("write to String");
        }
        out.push(']');
    }
    out.push('\n');
}

/// Prints one node line (with `indent` before it and a newline after).
pub fn print_node(out: &mut String, n: &RawNode, indent: &str) {
    out.push_str(indent);
    name(out, &n.name);
    out.push_str(" = ");
    name(out, &n.op);
    out.push('(');
    for (i, inp) in n.inputs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        input(out, inp);
    }
    out.push(')');
    if !n.attrs.is_empty() {
        out.push(' ');
        attrs(out, &n.attrs);
    }
    if !n.device.is_empty() {
        out.push_str(" device ");
        quote(out, n.device.as_bytes());
    }
    out.push('\n');
}

fn print_function(out: &mut String, f: &FunctionDef) {
    let s = &f.signature;
    out.push_str("function ");
    name(out, &s.name);
    out.push('(');
    args(out, &s.inputs);
    out.push_str(") -> (");
    args(out, &s.outputs);
    out.push(')');
    if !s.control_outputs.is_empty() {
        out.push_str(" controls (");
        for (i, c) in s.control_outputs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            name(out, c);
        }
        out.push(')');
    }
    if s.is_stateful {
        out.push_str(" stateful");
    }
    if !s.description.is_empty() {
        out.push_str(" doc ");
        quote(out, s.description.as_bytes());
    }
    if !s.attrs.is_empty() {
        out.push_str(" attrs {");
        for (i, a) in s.attrs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            attr_def(out, a);
        }
        out.push('}');
    }
    if !f.attrs.is_empty() {
        out.push(' ');
        attrs(out, &f.attrs);
    }
    out.push_str(" {\n");
    for n in &f.nodes {
        print_node(out, n, "  ");
    }
    for (k, v) in &f.ret {
        out.push_str("  return ");
        name(out, k);
        out.push_str(" = ");
        input(out, v);
        out.push('\n');
    }
    for (k, v) in &f.control_ret {
        out.push_str("  control_return ");
        name(out, k);
        out.push_str(" = ");
        name(out, v);
        out.push('\n');
    }
    out.push_str("}\n");
}

fn args(out: &mut String, list: &[ArgDef]) {
    for (i, a) in list.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        name(out, &a.name);
        out.push_str(": ");
        if a.is_ref {
            out.push_str("ref ");
        }
        if !a.type_list_attr.is_empty() {
            out.push_str("list(");
            name(out, &a.type_list_attr);
            out.push(')');
        } else {
            if !a.number_attr.is_empty() {
                name(out, &a.number_attr);
                out.push_str(" * ");
            }
            match a.dtype {
                Some(d) => out.push_str(&d.name()),
                None if !a.type_attr.is_empty() => name(out, &a.type_attr),
                None => out.push('_'),
            }
        }
        if !a.description.is_empty() {
            out.push(' ');
            quote(out, a.description.as_bytes());
        }
    }
}

fn attr_def(out: &mut String, a: &AttrDef) {
    name(out, &a.name);
    out.push_str(": ");
    // TensorFlow's type strings: `type`, `int`, `list(type)`, …
    if is_type_string(&a.ty) {
        out.push_str(&a.ty);
    } else {
        quote(out, a.ty.as_bytes());
    }
    if a.has_minimum {
        write!(out, " >= {}", a.minimum).expect("write to String");
    } else if a.minimum != 0 {
        write!(out, " min {}", a.minimum).expect("write to String");
    }
    if let Some(v) = &a.allowed_values {
        out.push_str(" in ");
        value(out, v);
    }
    if let Some(v) = &a.default {
        out.push_str(" = ");
        value(out, v);
    }
    if !a.description.is_empty() {
        out.push(' ');
        quote(out, a.description.as_bytes());
    }
}

/// `word` or `list(word)` with a word of letters, digits and `_`.
pub(crate) fn is_type_string(s: &str) -> bool {
    let word = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    match s.strip_prefix("list(").and_then(|r| r.strip_suffix(')')) {
        Some(inner) => word(inner),
        None => word(s) && s != "list",
    }
}

/// `{a = 1, b = float32}`, sorted by name (the map's order).
fn attrs<'a>(out: &mut String, a: impl IntoIterator<Item = (&'a String, &'a AttrValue)>) {
    out.push('{');
    for (i, (k, v)) in a.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        name(out, k);
        out.push_str(" = ");
        value(out, v);
    }
    out.push('}');
}

/// Whether `s` is written bare: TensorFlow's node-name alphabet.
pub(crate) fn is_ident(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphanumeric() || b[0] == b'.' || b[0] == b'_')
        && b.iter().all(|&c| is_ident_byte(c))
}

pub(crate) fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'>' | b'-')
}

fn name(out: &mut String, s: &str) {
    if is_ident(s) {
        out.push_str(s);
    } else {
        quote(out, s.as_bytes());
    }
}

/// An input written bare when every `:`-separated part is an identifier
/// (`a`, `a:1`, `^a`, `mul:z:0`), else the whole input string quoted.
fn input(out: &mut String, s: &str) {
    let body = s.strip_prefix('^').unwrap_or(s);
    if body.split(':').all(is_ident) {
        out.push_str(s);
    } else {
        quote(out, s.as_bytes());
    }
}

/// A double-quoted string; bytes outside printable ASCII as `\xHH`.
pub fn quote(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &c in bytes {
        match c {
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(c as char),
            _ => write!(out, "\\x{c:02x}").expect("write to String"),
        }
    }
    out.push('"');
}

/// An attribute value in the native syntax.
pub fn print_attr_value(v: &AttrValue) -> String {
    let mut s = String::new();
    value(&mut s, v);
    s
}

fn value(out: &mut String, v: &AttrValue) {
    match v {
        AttrValue::S(s) => quote(out, s),
        AttrValue::I(i) => write!(out, "{i}").expect("write to String"),
        AttrValue::F(f) => float32(out, *f),
        AttrValue::B(b) => out.push_str(if *b { "true" } else { "false" }),
        AttrValue::Type(t) => out.push_str(&t.name()),
        AttrValue::Shape(s) => shape(out, s),
        AttrValue::Tensor(t) => tensor(out, t),
        AttrValue::Compact(c) => {
            // The given values, then `...`: `float32[1000,1000]{0.5, ...}`.
            out.push_str(&c.dtype().name());
            dims(out, &c.shape);
            tensor_values(out, &c.values);
            out.pop();
            if !out.ends_with('{') {
                out.push_str(", ");
            }
            out.push_str("...}");
        }
        AttrValue::Func(f) => func(out, f),
        AttrValue::Placeholder(p) => {
            out.push('$');
            name(out, p);
        }
        AttrValue::List(l) => list(out, l),
    }
}

fn list(out: &mut String, l: &ListValue) {
    fn items<T>(out: &mut String, v: &[T], mut f: impl FnMut(&mut String, &T)) {
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            f(out, x);
        }
    }
    out.push('[');
    match l {
        ListValue::Empty => {}
        ListValue::S(v) => items(out, v, |o, s| quote(o, s)),
        ListValue::I(v) => items(out, v, |o, i| write!(o, "{i}").expect("write to String")),
        ListValue::F(v) => items(out, v, |o, f| float32(o, *f)),
        ListValue::B(v) => items(out, v, |o, b| o.push_str(if *b { "true" } else { "false" })),
        ListValue::Type(v) => items(out, v, |o, t| o.push_str(&t.name())),
        ListValue::Shape(v) => items(out, v, shape),
        ListValue::Tensor(v) => items(out, v, tensor),
        ListValue::Func(v) => items(out, v, func),
    }
    out.push(']');
}

fn func(out: &mut String, f: &FuncAttr) {
    out.push('@');
    name(out, &f.name);
    if !f.attrs.is_empty() {
        attrs(out, &f.attrs);
    }
}

fn shape(out: &mut String, s: &Shape) {
    out.push_str("shape");
    write!(out, "{s}").expect("write to String");
}

fn dims(out: &mut String, d: &[usize]) {
    out.push('[');
    for (i, x) in d.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write!(out, "{x}").expect("write to String");
    }
    out.push(']');
}

fn tensor(out: &mut String, t: &Tensor) {
    out.push_str(&t.dtype.name());
    dims(out, &t.shape);
    tensor_values(out, t);
}

/// `{v, …}` (or ` bytes "…"`) after a tensor's dtype and dimensions.
fn tensor_values(out: &mut String, t: &Tensor) {
    fn items<T>(out: &mut String, v: &[T], mut f: impl FnMut(&mut String, &T)) {
        out.push('{');
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            f(out, x);
        }
        out.push('}');
    }
    match &t.data {
        TensorData::F32(v) => items(out, v, |o, x| float32(o, *x)),
        TensorData::F64(v) => items(out, v, |o, x| float64(o, *x)),
        TensorData::I32(v) => items(out, v, |o, x| write!(o, "{x}").expect("write to String")),
        TensorData::I64(v) => items(out, v, |o, x| write!(o, "{x}").expect("write to String")),
        TensorData::Bool(v) => items(out, v, |o, x| o.push_str(if *x { "true" } else { "false" })),
        TensorData::Str(v) => items(out, v, |o, x| quote(o, x)),
        TensorData::Raw(b) => {
            out.push_str(" bytes ");
            quote(out, b);
        }
        // Run-time values only (no graph holds one in a constant); shown for diagnostics.
        TensorData::List(l) => write!(out, " list of {} {}", l.len(), l.element_dtype.name()).expect("write to String"),
        TensorData::Optional(o) => match o.as_ref() {
            Some(c) => write!(out, " optional of {} components", c.len()).expect("write to String"),
            None => out.push_str(" optional none"),
        },
    }
}

/// The canonical quiet NaN prints `nan`; any other NaN keeps its bits.
const F32_NAN: u32 = 0x7fc0_0000;
const F64_NAN: u64 = 0x7ff8_0000_0000_0000;

pub(crate) fn float32(out: &mut String, x: f32) {
    if x.is_nan() {
        if x.to_bits() == F32_NAN {
            out.push_str("nan");
        } else {
            write!(out, "nan(0x{:08x})", x.to_bits()).expect("write to String");
        }
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        // `{:?}` is the shortest round-trip form and always has `.` or `e`.
        write!(out, "{x:?}").expect("write to String");
    }
}

pub(crate) fn float64(out: &mut String, x: f64) {
    if x.is_nan() {
        if x.to_bits() == F64_NAN {
            out.push_str("nan");
        } else {
            write!(out, "nan(0x{:016x})", x.to_bits()).expect("write to String");
        }
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        write!(out, "{x:?}").expect("write to String");
    }
}

/// The dtypes whose tensors print element by element (`{…}`); the rest print raw bytes.
pub(crate) fn has_native_buffer(d: DType) -> bool {
    matches!(d, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64 | DType::Bool | DType::String)
}
