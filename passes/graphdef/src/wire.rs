//! Streaming decode of a binary `GraphDef`: each `NodeDef` is read straight from its bytes
//! into a [`RawNode`] and dropped, instead of decoding the whole message into
//! rust-protobuf's types first (a `HashMap` of attributes per node, all of them alive at
//! once: at 10⁵ nodes most of the load went to allocating, rehashing and first-touching
//! that memory).
//!
//! This is only a faster road to the same result. Anything it does not handle exactly as
//! the full decode would — a malformed or unexpected wire type, a string that is not
//! UTF-8, a group, an attribute the conversion refuses, messages nested near the depth
//! limit — makes it give up (`None`), and the caller decodes the file the general way,
//! which then reports the error it always did. Every field but `node` (the library,
//! versions, debug info) is copied as raw bytes and decoded by rust-protobuf, so its
//! semantics are rust-protobuf's. Within a node, later occurrences of a field replace
//! earlier ones and a repeated attribute key keeps its last value, as protobuf's merge
//! rules and map fields say.

use autoclust_graph::limits::MAX_MESSAGE_DEPTH;
use autoclust_graph::{Graph, RawNode};
use protobuf::Message;

use crate::convert::{graph_from_nodes, last_of_each_key, node_from_parts};
use crate::proto::graph_def::{node_def::ExperimentalDebugInfo, AttrValue, FullTypeDef, GraphDef};
use crate::GraphDefError;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// A cursor over protobuf wire bytes.
struct Wire<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Wire<'a> {
    fn new(buf: &'a [u8]) -> Wire<'a> {
        Wire { buf, pos: 0 }
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// The next field's number and wire type.
    fn tag(&mut self) -> Option<(u32, u8)> {
        let t = self.varint()?;
        let field = u32::try_from(t >> 3).ok()?;
        (field != 0).then_some((field, (t & 7) as u8))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn string(&mut self) -> Option<String> {
        std::str::from_utf8(self.bytes()?).ok().map(str::to_owned)
    }

    /// Skips a field's payload of wire type `wt` (no groups).
    fn skip(&mut self, wt: u8) -> Option<()> {
        match wt {
            VARINT => self.varint().map(drop),
            FIXED64 | FIXED32 => {
                let n = if wt == FIXED64 { 8 } else { 4 };
                let end = self.pos.checked_add(n)?;
                (end <= self.buf.len()).then(|| self.pos = end)
            }
            LEN => self.bytes().map(drop),
            _ => None,
        }
    }
}

/// The byte offset of the first top-level field of `bytes` that runs past their end, if
/// any: a truncated file. rust-protobuf reads a length-delimited field that declares more
/// bytes than remain as ending where the buffer ends (only at the top level: a nested
/// message's overrun crosses its parent's limit, which it rejects); protobuf's own parser,
/// TensorFlow's, rejects the file. Groups (wire types 3 and 4, never in a `GraphDef`) end
/// the check: what follows them is left to rust-protobuf.
pub(crate) fn first_incomplete_field(bytes: &[u8]) -> Option<usize> {
    let mut w = Wire::new(bytes);
    while !w.done() {
        let start = w.pos;
        let Some((_, wt)) = w.tag() else { return Some(start) };
        if wt == 3 || wt == 4 {
            return None;
        }
        if w.skip(wt).is_none() {
            return Some(start);
        }
    }
    None
}

/// Decodes `bytes` as rust-protobuf would a message of type `M`, nested `depth` levels
/// below the `GraphDef` (a stricter limit than the full decode's, so a message near it is
/// left to the full decode, which names the limit).
fn nested<M: Message>(bytes: &[u8], depth: u32) -> Option<M> {
    if first_incomplete_field(bytes).is_some() {
        return None;
    }
    let mut input = protobuf::CodedInputStream::from_bytes(bytes);
    input.set_recursion_limit((MAX_MESSAGE_DEPTH as u32).checked_sub(depth + 1)?);
    let m = M::parse_from(&mut input).ok()?;
    input.check_eof().ok()?;
    Some(m)
}

/// One `NodeDef` from its bytes (fields 1–7 of TensorFlow's `node_def.proto`).
fn node(bytes: &[u8]) -> Option<RawNode> {
    let mut w = Wire::new(bytes);
    let (mut name, mut op, mut device) = (String::new(), String::new(), String::new());
    let mut inputs = Vec::new();
    let mut attrs: Vec<(String, AttrValue)> = Vec::new();
    while !w.done() {
        let (field, wt) = w.tag()?;
        match (field, wt) {
            (1, LEN) => name = w.string()?,
            (2, LEN) => op = w.string()?,
            (3, LEN) => inputs.push(w.string()?),
            (4, LEN) => device = w.string()?,
            (5, LEN) => {
                let mut e = Wire::new(w.bytes()?);
                let (mut key, mut value) = (String::new(), AttrValue::new());
                while !e.done() {
                    match e.tag()? {
                        (1, LEN) => key = e.string()?,
                        (2, LEN) => value = nested::<AttrValue>(e.bytes()?, 3)?,
                        (1 | 2, _) => return None,
                        (_, wt) => e.skip(wt)?,
                    }
                }
                attrs.push((key, value));
            }
            // Not kept, but checked as the full decode checks them.
            (6, LEN) => drop(nested::<ExperimentalDebugInfo>(w.bytes()?, 2)?),
            (7, LEN) => drop(nested::<FullTypeDef>(w.bytes()?, 2)?),
            (1..=7, _) => return None,
            (_, wt) => w.skip(wt)?,
        }
    }
    node_from_parts(name, op, inputs, device, last_of_each_key(attrs), None).ok()
}

/// How many `node` fields the top level holds (one pass over the tags, so the node list is
/// allocated once).
fn count_nodes(bytes: &[u8]) -> Option<usize> {
    let mut w = Wire::new(bytes);
    let mut n = 0;
    while !w.done() {
        let (field, wt) = w.tag()?;
        n += usize::from(field == 1);
        w.skip(wt)?;
    }
    Some(n)
}

/// The graph in `bytes`, or `None` when this fast road does not apply (see the module
/// documentation); errors of the graph itself (duplicate names, unknown inputs) are
/// returned as the full decode would return them.
pub(crate) fn parse_pb_streaming(bytes: &[u8]) -> Option<Result<Graph, GraphDefError>> {
    let mut w = Wire::new(bytes);
    let mut nodes = Vec::with_capacity(count_nodes(bytes)?);
    let mut rest = Vec::new();
    while !w.done() {
        let start = w.pos;
        let (field, wt) = w.tag()?;
        if field == 1 {
            if wt != LEN {
                return None;
            }
            nodes.push(node(w.bytes()?)?);
        } else {
            w.skip(wt)?;
            rest.extend_from_slice(&bytes[start..w.pos]);
        }
    }
    let gd = nested::<GraphDef>(&rest, 0)?;
    Some(graph_from_nodes(nodes, gd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{graph_from_proto, proto_from_graph};

    fn slow(bytes: &[u8]) -> Result<Graph, GraphDefError> {
        graph_from_proto(crate::decode_pb(bytes)?, &[])
    }

    fn sample() -> Graph {
        crate::parse_pbtxt(
            r#"
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: 2 } } } } }
node { name: "k" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1 float_val: 2 } } } }
node { name: "y" op: "Mul" input: "x" input: "k" device: "/device:CPU:0"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@x" } } } }
node { name: "n" op: "NoOp" input: "^y" }
library { function { signature { name: "f" output_arg { name: "o" type: DT_FLOAT } }
          node_def { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
                     attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 3 } } } }
          ret { key: "o" value: "c:output:0" } } }
versions { producer: 1882 min_consumer: 12 }
"#,
        )
        .expect("parses")
    }

    /// A file cut anywhere but between two top-level fields is an error, never a smaller
    /// graph (rust-protobuf alone read a field cut short as ending at the file's end: a
    /// node without its attributes, a `Const` without its value).
    #[test]
    fn a_truncated_file_is_an_error() {
        let bytes = proto_from_graph(&sample()).write_to_bytes().unwrap();
        let mut boundaries = vec![0];
        let mut w = Wire::new(&bytes);
        while !w.done() {
            let (_, wt) = w.tag().unwrap();
            w.skip(wt).unwrap();
            boundaries.push(w.pos);
        }
        for cut in 0..bytes.len() {
            let got = crate::parse_pb(&bytes[..cut]);
            if boundaries.contains(&cut) {
                continue;
            }
            assert!(got.is_err(), "a file cut at byte {cut} of {} was read", bytes.len());
        }
    }

    #[test]
    fn the_streaming_decode_gives_the_full_decodes_graph() {
        let bytes = proto_from_graph(&sample()).write_to_bytes().unwrap();
        let fast = parse_pb_streaming(&bytes).expect("takes the fast road").expect("decodes");
        let slow = slow(&bytes).expect("decodes");
        assert_eq!(crate::to_pbtxt(&fast), crate::to_pbtxt(&slow));
        assert_eq!(fast.len(), 4);
        assert_eq!(fast.library.functions.len(), 1, "the library is kept");
    }

    #[test]
    fn a_repeated_attribute_key_keeps_its_last_value_and_fields_merge() {
        let gd = proto_from_graph(&sample());
        // Node `y` with a second `T` entry (a map: the last one wins) and its `name` field
        // again (a scalar field: the last one wins).
        let mut y = gd.node[2].write_to_bytes().unwrap();
        let mut extra = AttrValue::new();
        extra.set_type(crate::proto::graph_def::DataType::DT_DOUBLE);
        let mut entry = Vec::new();
        {
            let mut os = protobuf::CodedOutputStream::vec(&mut entry);
            os.write_string(1, "T").unwrap();
            os.write_message(2, &extra).unwrap();
            os.flush().unwrap();
        }
        {
            let mut os = protobuf::CodedOutputStream::vec(&mut y);
            os.write_bytes(5, &entry).unwrap();
            os.write_string(1, "y").unwrap();
            os.flush().unwrap();
        }
        let mut out = Vec::new();
        {
            let mut os = protobuf::CodedOutputStream::vec(&mut out);
            for (i, n) in gd.node.iter().enumerate() {
                if i == 2 {
                    os.write_bytes(1, &y).unwrap();
                } else {
                    os.write_message(1, n).unwrap();
                }
            }
            os.flush().unwrap();
        }
        let fast = parse_pb_streaming(&out).expect("fast road").expect("decodes");
        let slow = slow(&out).expect("decodes");
        assert_eq!(crate::to_pbtxt(&fast), crate::to_pbtxt(&slow));
        assert!(crate::to_pbtxt(&fast).contains("DT_DOUBLE"));
    }

    #[test]
    fn malformed_input_leaves_the_decision_to_the_full_decode() {
        let bytes = proto_from_graph(&sample()).write_to_bytes().unwrap();
        // Truncated, a varint where a node must be, a string that is not UTF-8.
        assert!(parse_pb_streaming(&bytes[..bytes.len() - 3]).is_none());
        assert!(parse_pb_streaming(&[0x08, 0x01]).is_none());
        assert!(parse_pb_streaming(&[0x0a, 0x03, 0x0a, 0x01, 0xff]).is_none());
        assert!(slow(&[0x0a, 0x03, 0x0a, 0x01, 0xff]).is_err());
        // A group (wire type 3) anywhere.
        assert!(parse_pb_streaming(&[0x1b, 0x1c]).is_none());
        // An attribute entry whose key is a varint (node { attr { key: 1 } }).
        assert!(parse_pb_streaming(&[0x0a, 0x04, 0x2a, 0x02, 0x08, 0x01]).is_none());
    }
}
