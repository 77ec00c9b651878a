//! TensorFlow `GraphDef` reading and writing: `.pbtxt` (protobuf text
//! format, as `tf.io.write_graph(..., as_text=True)` writes it) and `.pb`
//! (binary), converted to and from autoclust's [`Graph`].
//!
//! The schema (`proto/graph_def.proto`) is written from TensorFlow's message
//! and field names and numbers; rust-protobuf generates the Rust types and
//! handles the binary wire format. The text format is read and written by
//! [`text`], a reflection-driven parser and printer with positioned errors.
//! Function libraries (bodies, signatures, gradients) and versions are kept.
//! Not kept: `NodeDef.experimental_debug_info`, `experimental_type`,
//! `FunctionDef.arg_attr` and `resource_arg_unique_id`, which autoclust's
//! graph has no place for.

mod convert;
pub mod crc32c;
pub mod ordered_code;
pub mod saved_model;
pub mod table;
pub mod tensor_bundle;
pub mod tensor_slices;
pub mod text;
mod text_node;
mod wire;

/// The generated GraphDef messages (package `tensorflow`).
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/protos/mod.rs"));
}

use autoclust_graph::limits::MAX_MESSAGE_DEPTH;
use autoclust_graph::{Graph, GraphError, Span};
use protobuf::{Message, MessageFull};

pub use convert::{graph_from_proto, proto_from_graph, tensor_from_proto_bytes, tensor_to_content_proto_bytes};
pub use text::TextError;

use proto::graph_def::GraphDef;

/// Why a GraphDef could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphDefError {
    /// Text-format syntax, an unknown field, a bad escape, … at `line:column`.
    #[error(transparent)]
    Text(#[from] TextError),
    /// The binary wire format could not be decoded.
    #[error("not a binary GraphDef: {0}")]
    Binary(String),
    /// An attribute value autoclust cannot represent (a bad tensor, …).
    #[error("{}node '{node}': attribute '{attr}': {message}", at(.span))]
    Attr { node: String, attr: String, message: String, span: Option<Span> },
    /// A node name TensorFlow's importer refuses: empty, or holding a control character
    /// (it could never be written back or named by an input).
    #[error("{}node {name:?}: invalid node name ({why})", at(.span))]
    NodeName { name: String, why: &'static str, span: Option<Span> },
    /// Names that do not resolve: duplicates, unknown inputs.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl GraphDefError {
    /// The position in a text file, when the error has one.
    pub fn span(&self) -> Option<Span> {
        match self {
            GraphDefError::Text(t) => Some(t.span),
            GraphDefError::Binary(_) => None,
            GraphDefError::Attr { span, .. } | GraphDefError::NodeName { span, .. } => *span,
            GraphDefError::Graph(g) => g.span(),
        }
    }
}

fn at(span: &Option<Span>) -> String {
    match span {
        Some(s) => format!("{s}: "),
        None => String::new(),
    }
}

/// Parses a text-format `GraphDef` into its message; also returns where each `node` starts.
pub fn parse_text_proto(text: &str) -> Result<(GraphDef, Vec<Span>), GraphDefError> {
    let _span = tracing::debug_span!("parse_pbtxt", bytes = text.len()).entered();
    let (msg, spans) = text::parse_message(text, &GraphDef::descriptor(), "node")?;
    let gd =
        msg.downcast_box::<GraphDef>().map_err(|_| GraphDefError::Binary("internal: wrong message type".into()))?;
    Ok((*gd, spans))
}

/// Reads a `.pbtxt` GraphDef. Each `node { … }` is converted as soon as it is read, so the
/// parse never holds every `NodeDef` (with its attribute map) at once.
pub fn parse_pbtxt(text: &str) -> Result<Graph, GraphDefError> {
    parse_pbtxt_via(text, true)
}

/// [`parse_pbtxt`], with or without the typed reader for nodes (`text_node.rs`); the two
/// must give the same graph or the same error for every input.
fn parse_pbtxt_via(text: &str, typed_nodes: bool) -> Result<Graph, GraphDefError> {
    let _span = tracing::debug_span!("parse_pbtxt", bytes = text.len()).entered();
    let raw = std::cell::RefCell::new(Vec::new());
    let mut failed: Option<GraphDefError> = None;
    let mut sink = |m: Box<dyn protobuf::MessageDyn>, span: Span| -> bool {
        let converted = match m.downcast_box::<proto::graph_def::NodeDef>() {
            Ok(n) => convert::node_from_proto(*n, Some(span)),
            Err(_) => Err(GraphDefError::Binary("internal: a node is not a NodeDef".into())),
        };
        match converted {
            Ok(n) => {
                raw.borrow_mut().push(n);
                true
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    };
    // Most nodes take the typed road; what it cannot read exactly goes through `sink`.
    let mut typed = |lx: &mut text::Lexer<'_>, span: Span| -> Option<bool> {
        raw.borrow_mut().push(text_node::node(lx, span)?);
        Some(true)
    };
    let typed = if typed_nodes { Some(&mut typed as text::EntryReader<'_>) } else { None };
    let parsed = text::parse_message_streaming_with(text, &GraphDef::descriptor(), "node", &mut sink, typed);
    if let Some(e) = failed {
        return Err(e);
    }
    let gd =
        parsed?.downcast_box::<GraphDef>().map_err(|_| GraphDefError::Binary("internal: wrong message type".into()))?;
    convert::graph_from_nodes(raw.into_inner(), *gd)
}

/// Reads a binary `.pb` GraphDef.
pub fn parse_pb(bytes: &[u8]) -> Result<Graph, GraphDefError> {
    let _span = tracing::debug_span!("parse_pb", bytes = bytes.len()).entered();
    if let Some(graph) = wire::parse_pb_streaming(bytes) {
        return graph;
    }
    graph_from_proto(decode_pb(bytes)?, &[])
}

/// Decodes a binary `GraphDef`, its messages nested at most [`MAX_MESSAGE_DEPTH`]
/// deep (rust-protobuf's default, TensorFlow's 100, would refuse attributes
/// nested the [`MAX_ATTR_DEPTH`] levels the text formats read).
///
/// [`MAX_ATTR_DEPTH`]: autoclust_graph::limits::MAX_ATTR_DEPTH
fn decode_pb(bytes: &[u8]) -> Result<GraphDef, GraphDefError> {
    if let Some(at) = wire::first_incomplete_field(bytes) {
        return Err(GraphDefError::Binary(format!(
            "truncated or corrupt: the field at byte {at} runs past the end of the {} bytes",
            bytes.len()
        )));
    }
    let mut input = protobuf::CodedInputStream::from_bytes(bytes);
    input.set_recursion_limit(MAX_MESSAGE_DEPTH as u32);
    let gd = GraphDef::parse_from(&mut input).and_then(|gd| input.check_eof().map(|()| gd));
    gd.map_err(|e| {
        let e = e.to_string();
        GraphDefError::Binary(if e.contains("recursion limit") {
            format!("messages nested deeper than {MAX_MESSAGE_DEPTH} levels")
        } else {
            e
        })
    })
}

/// Writes a graph as a text-format GraphDef in TensorFlow's layout.
pub fn to_pbtxt(graph: &Graph) -> String {
    text::print_message(&proto_from_graph(graph))
}

/// Writes a graph as a binary GraphDef.
pub fn to_pb(graph: &Graph) -> Vec<u8> {
    proto_from_graph(graph).write_to_bytes().expect("a GraphDef built from a Graph always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoclust_graph::{AttrValue, DType, ListValue};

    /// Names TensorFlow's importer refuses are errors naming the node's line (sweep 75:
    /// `""` and `"x\0y"` were read and written back by `convert`), in both formats.
    #[test]
    fn empty_and_control_character_names_are_refused() {
        for (text, why) in
            [(r#"node { name: "" op: "NoOp" }"#, "empty"), (r#"node { name: "x\000y" op: "NoOp" }"#, "control")]
        {
            let e = parse_pbtxt(text).unwrap_err();
            assert!(e.to_string().starts_with("1:1: node ") && e.to_string().contains(why), "{e}");
            let bad = Graph::from_raw(
                vec![autoclust_graph::RawNode {
                    name: if why == "empty" { String::new() } else { "x\0y".into() },
                    op: "NoOp".into(),
                    inputs: vec![],
                    attrs: Default::default(),
                    device: String::new(),
                    span: None,
                }],
                Default::default(),
                None,
            )
            .unwrap();
            let e = parse_pb(&to_pb(&bad)).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
        assert!(parse_pbtxt(r#"node { name: "a.b/c-d_e>f" op: "NoOp" }"#).is_ok());
    }

    #[test]
    fn reads_hand_written_liberties() {
        let text = r#"
# a comment
node: {
  name: 'a'  # trailing comment
  op: "Const";
  attr < key: "dtype" value { type: 1 } >,
  attr { key: "value" value: { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } } float_val: [1, 2.5e0, -inf] } } }
  attr { key: "s" value { s: "\101\x42" "C\n" } }
  attr { key: "l" value { list { i: [1, 0x10, -3] } } }
}
node { name: "b" op: "Neg" input: ["a"] attr { key: "T" value { type: DT_FLOAT } } }
versions { producer: 12 }
"#;
        let g = parse_pbtxt(text).unwrap();
        let a = g.node(g.find("a").unwrap());
        assert_eq!(a.attr("dtype"), Some(&AttrValue::Type(DType::Float32)));
        assert_eq!(a.attr("value").unwrap().as_tensor().unwrap().as_f32().unwrap(), &[1.0, 2.5, f32::NEG_INFINITY]);
        assert_eq!(a.attr("s"), Some(&AttrValue::S(b"ABC\n".to_vec())));
        assert_eq!(a.attr("l"), Some(&AttrValue::List(ListValue::I(vec![1, 16, -3]))));
        assert_eq!(g.node(g.find("b").unwrap()).inputs.len(), 1);
        assert_eq!(g.versions.as_ref().unwrap().producer, 12);
    }

    #[test]
    fn text_errors_have_positions() {
        let e = parse_pbtxt("node {\n  name: \"a\"\n  colour: 3\n}\n").unwrap_err();
        assert_eq!(e.to_string(), "3:3: unknown field 'colour' in tensorflow.NodeDef");
        let e = parse_pbtxt("node {\n  name: \"a\"\n").unwrap_err();
        assert_eq!(e.span(), Some(Span { line: 3, column: 1 }));
        let e = parse_pbtxt("node {\n  attr { key: \"T\" value { type: DT_NOPE } }\n}").unwrap_err();
        assert!(e.to_string().starts_with("2:33: unknown DataType value 'DT_NOPE'"), "{e}");
        let e = parse_pbtxt("node { name: \"a\" op: \"X\" input: \"zz\" }\n\nnode { name: \"a\" }").unwrap_err();
        assert_eq!(e.to_string(), "3:1: duplicate node name 'a'");
        let e = parse_pbtxt("node { name: \"b\" }\nnode { name: \"a\" op: \"X\" input: \"zz\" }").unwrap_err();
        assert_eq!(e.to_string(), "2:1: node 'a': input 'zz' names no node in the graph");
        let e = parse_pbtxt("versions { producer: 99999999999 }").unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }

    /// The streaming reader (nodes converted as they are read) gives what reading the whole
    /// `GraphDef` first gives: the same nodes, library and versions, list syntax included; and a node that fails to convert stops it with that node's error.
    #[test]
    fn streaming_parse_equals_the_whole_message_parse() {
        let text = "node { name: \"a\" op: \"Const\" attr { key: \"dtype\" value { type: DT_FLOAT } } }\n\
                    node: [ { name: \"b\" op: \"Neg\" input: \"a\" },\n  { name: \"c\" op: \"Neg\" input: \"b\" } ]\n\
                    library { function { signature { name: \"f\" } } }\nversions { producer: 7 }\n\
                    node { name: \"d\" op: \"NoOp\" input: \"^c\" }\n";
        let streamed = parse_pbtxt(text).unwrap();
        let (gd, spans) = parse_text_proto(text).unwrap();
        let whole = graph_from_proto(gd, &spans).unwrap();
        assert_eq!(to_pbtxt(&streamed), to_pbtxt(&whole));
        // Each node's span is where its `node` field starts (one for a list of nodes).
        let line = |n: &str| streamed.node(streamed.find(n).unwrap()).span.map(|s| s.line);
        assert_eq!([line("a"), line("b"), line("c"), line("d")], [Some(1), Some(2), Some(2), Some(6)]);
        assert!(streamed.library.function("f").is_some());
        let bad = "node { name: \"a\" op: \"NoOp\" }\n\
                   node { name: \"x\" op: \"Const\" attr { key: \"value\" value { tensor { dtype: DT_FLOAT \
                   tensor_shape { dim { size: 2 } } tensor_content: \"abc\" } } } }\nnode { name: ";
        let e = parse_pbtxt(bad).unwrap_err();
        assert!(e.to_string().starts_with("2:1: node 'x': attribute 'value'"), "{e}");
    }

    #[test]
    fn binary_round_trip_and_garbage() {
        let g = parse_pbtxt("node { name: \"a\" op: \"Const\" attr { key: \"f\" value { f: 0.1 } } }").unwrap();
        let back = parse_pb(&to_pb(&g)).unwrap();
        assert_eq!(back.node(back.find("a").unwrap()).attr("f"), Some(&AttrValue::F(0.1)));
        assert!(matches!(parse_pb(&[0xff, 0xff, 0xff]), Err(GraphDefError::Binary(_))));
    }

    /// `levels` nested `AttrValue`s: `func { … attr { key: "a" value { … i: 1 } } }`.
    fn nested_pbtxt(levels: usize) -> String {
        let mut v = "i: 1".to_string();
        for _ in 1..levels {
            v = format!("func {{ name: \"f\" attr {{ key: \"a\" value {{ {v} }} }} }}");
        }
        format!("node {{\n  name: \"x\" op: \"NoOp\"\n  attr {{ key: \"f\" value {{ {v} }} }}\n}}\n")
    }

    /// The same in the binary format, written field by field.
    fn nested_pb(levels: usize) -> Vec<u8> {
        fn field(number: u32, payload: &[u8]) -> Vec<u8> {
            let mut out = Vec::new();
            for mut n in [u64::from(number << 3 | 2), payload.len() as u64] {
                while n >= 0x80 {
                    out.push(n as u8 | 0x80);
                    n >>= 7;
                }
                out.push(n as u8);
            }
            out.extend_from_slice(payload);
            out
        }
        let entry = |key: &[u8], value: &[u8]| [field(1, key), field(2, value)].concat();
        let mut v = vec![3 << 3, 1]; // AttrValue { i: 1 }
        for _ in 1..levels {
            let func = [field(1, b"f"), field(2, &entry(b"a", &v))].concat();
            v = field(10, &func); // AttrValue { func: NameAttrList { name, attr } }
        }
        let node = [field(1, b"x"), field(2, b"NoOp"), field(5, &entry(b"f", &v))].concat();
        field(1, &node)
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        // Found by fuzzing: ~3,400 nested func attributes overflowed the stack.
        let e = parse_pbtxt(&nested_pbtxt(5_000)).unwrap_err();
        // The 101st `AttrValue` opens after the 100th `value ` on line 3.
        let level = "{ func { name: \"f\" attr { key: \"a\" value ".len();
        let column = "  attr { key: \"f\" value ".len() + 100 * level + 1;
        assert_eq!(e.span(), Some(Span { line: 3, column: column as u32 }), "{e}");
        assert!(e.to_string().ends_with(": node 'x': attribute 'f': nested deeper than 100 levels"), "{e}");
        // The same in a function's body, signature and attributes.
        let deep = nested_pbtxt(101);
        let value = &deep[deep.find("value {").unwrap() + 6..deep.rfind('}').unwrap() - 2];
        for (text, says) in [
            (
                format!("library {{ function {{ signature {{ name: \"fn1\" }} node_def {{ name: \"n\" attr {{ key: \"a\" value {value} }} }} }} }}"),
                "node 'fn1/n': attribute 'a': nested deeper than 100 levels",
            ),
            (
                format!("library {{ function {{ signature {{ name: \"fn1\" attr {{ name: \"T\" type: \"func\" default_value {value} }} }} }} }}"),
                "node 'fn1': attribute 'T': nested deeper than 100 levels",
            ),
            (
                format!("library {{ function {{ signature {{ name: \"fn1\" }} attr {{ key: \"q\" value {value} }} }} }}"),
                "node 'fn1': attribute 'q': nested deeper than 100 levels",
            ),
        ] {
            let e = parse_pbtxt(&text).unwrap_err().to_string();
            assert!(e.ends_with(says), "{e}");
        }
        // Other recursive messages are bounded too.
        let mut t = "type_id: 1".to_string();
        for _ in 0..5_000 {
            t = format!("args {{ {t} }}");
        }
        let e = parse_pbtxt(&format!("node {{ name: \"x\" experimental_type {{ {t} }} }}")).unwrap_err();
        assert!(e.to_string().ends_with("node 'x': messages nested deeper than 400 levels"), "{e}");
        // Binary: deeper than the attribute limit, and deeper than the message limit.
        let e = parse_pb(&nested_pb(101)).unwrap_err();
        assert_eq!(e.to_string(), "node 'x': attribute 'f': nested deeper than 100 levels");
        let e = parse_pb(&nested_pb(5_000)).unwrap_err();
        assert_eq!(e.to_string(), "not a binary GraphDef: messages nested deeper than 400 levels");
    }

    #[test]
    fn nesting_up_to_the_limit_reads_and_writes_back() {
        let g = parse_pbtxt(&nested_pbtxt(100)).unwrap();
        assert_eq!(g.node(g.find("x").unwrap()).attr("f").unwrap().depth(), 100);
        let from_pb = parse_pb(&nested_pb(100)).unwrap();
        assert_eq!(from_pb.node(from_pb.find("x").unwrap()).attr("f"), g.node(g.find("x").unwrap()).attr("f"));
        // A list of functions nests three messages per level: still within the message limit.
        let list = nested_pbtxt(100).replace("value { func {", "value { list { func {").replace("} } }", "} } } }");
        let g = parse_pbtxt(&list).unwrap();
        let f = g.node(g.find("x").unwrap()).attr("f").unwrap();
        assert!(matches!(f, AttrValue::List(ListValue::Func(_))) && f.depth() == 100, "{f:?}");
        for back in [parse_pbtxt(&to_pbtxt(&g)).unwrap(), parse_pb(&to_pb(&g)).unwrap()] {
            assert_eq!(back.node(back.find("x").unwrap()).attr("f"), Some(f));
        }
    }
}
