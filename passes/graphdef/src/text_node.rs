//! A typed reader for the `node { … }` entries of a text-format `GraphDef`.
//!
//! The general text parser ([`crate::text`]) is driven by rust-protobuf's reflection: every
//! field name is looked up in a descriptor, every value boxed and set through a dynamic
//! call. At 10⁵ nodes that was most of the load. This reader knows `NodeDef`, `AttrValue`
//! and the messages under it, and builds the generated structs directly.
//!
//! It is only a faster road to the same result, like the binary reader in `wire.rs`: it reads
//! the subset of the format it can read exactly as the general parser does (the same lexer,
//! the same literal rules), and anything else — an unknown or rarely used field, a value of
//! the wrong kind, a field given twice where it cannot repeat, a oneof given two members,
//! attributes nested more than a few levels, any syntax error — makes it give up (`None`).
//! The caller then puts the lexer back and the general parser reads the entry, reporting
//! whatever error it always reported. So no input is read differently, only faster.

use autoclust_graph::{RawNode, Span};
use protobuf::{Enum, EnumOrUnknown, MessageField};

use crate::convert::{last_of_each_key, node_from_parts};
use crate::proto::graph_def as pb;
use crate::text::{bool_from, float_from, parse_int, Lexer, Token};

/// How deep this reader follows attribute values (a `func` in a `list` in an attribute is
/// three); deeper ones are left to the general parser, which knows the limits.
const MAX_FAST_ATTR_DEPTH: usize = 6;

/// Reads one `NodeDef` (the lexer just past the field name `node`) and converts it, or gives
/// up. `span` is where the entry starts.
pub(crate) fn node(lx: &mut Lexer<'_>, span: Span) -> Option<RawNode> {
    let mut r = Reader { lx, peeked: None };
    r.eat(b':')?;
    let close = r.open()?;
    let (mut name, mut op, mut device) = (None, None, None);
    let mut inputs = Vec::new();
    let mut attrs = Vec::new();
    while let Some(field) = r.field(close)? {
        match field {
            "name" => once(&mut name, r.string_field()?)?,
            "op" => once(&mut op, r.string_field()?)?,
            "device" => once(&mut device, r.string_field()?)?,
            "input" => r.repeated(&mut inputs, Reader::string)?,
            "attr" => r.map(&mut attrs, 1)?,
            _ => return None,
        }
        r.separator()?;
    }
    // The general parser would have stopped at a token read past the entry; none was.
    if r.peeked.is_some() {
        return None;
    }
    let (name, op, device) = (name.unwrap_or_default(), op.unwrap_or_default(), device.unwrap_or_default());
    node_from_parts(name, op, inputs, device, last_of_each_key(attrs), Some(span)).ok()
}

/// Sets a singular field that must not have been given yet.
fn once<T>(slot: &mut Option<T>, v: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(v);
    Some(())
}

struct Reader<'l, 'a> {
    lx: &'l mut Lexer<'a>,
    peeked: Option<Token<'a>>,
}

impl<'a> Reader<'_, 'a> {
    fn next(&mut self) -> Option<Token<'a>> {
        match self.peeked.take() {
            Some(t) => Some(t),
            None => self.lx.next().ok().map(|(t, _)| t),
        }
    }

    /// Whether the next token is the symbol `c`, consuming it if so.
    fn eat(&mut self, c: u8) -> Option<bool> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lx.next().ok()?.0);
        }
        if self.peeked == Some(Token::Symbol(c)) {
            self.peeked = None;
            return Some(true);
        }
        Some(false)
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.next()? == Token::Symbol(c)).then_some(())
    }

    /// `{` or `<`, and the symbol that closes it.
    fn open(&mut self) -> Option<u8> {
        match self.next()? {
            Token::Symbol(b'{') => Some(b'}'),
            Token::Symbol(b'<') => Some(b'>'),
            _ => None,
        }
    }

    /// The next field's name, or `None` at the message's end.
    fn field(&mut self, close: u8) -> Option<Option<&'a str>> {
        match self.next()? {
            Token::Ident(name) => Some(Some(name)),
            Token::Symbol(c) if c == close => Some(None),
            _ => None,
        }
    }

    /// The optional `,` or `;` after a field.
    fn separator(&mut self) -> Option<()> {
        if !self.eat(b',')? {
            self.eat(b';')?;
        }
        Some(())
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        match self.next()? {
            Token::Str(b) => Some(b),
            _ => None,
        }
    }

    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }

    /// `: "…"` after a singular string field's name.
    fn string_field(&mut self) -> Option<String> {
        self.expect(b':')?;
        self.string()
    }

    fn int(&mut self, min: i128, max: i128) -> Option<i128> {
        let neg = self.eat(b'-')?;
        let Token::Number(n) = self.next()? else { return None };
        let v = parse_int(n)?;
        let v = if neg { -v } else { v };
        (min..=max).contains(&v).then_some(v)
    }

    fn i64(&mut self) -> Option<i64> {
        self.int(i64::MIN.into(), i64::MAX.into()).map(|v| v as i64)
    }

    fn i32(&mut self) -> Option<i32> {
        self.int(i32::MIN.into(), i32::MAX.into()).map(|v| v as i32)
    }

    fn u32(&mut self) -> Option<u32> {
        self.int(0, u32::MAX.into()).map(|v| v as u32)
    }

    fn u64(&mut self) -> Option<u64> {
        self.int(0, u64::MAX.into()).map(|v| v as u64)
    }

    fn f32(&mut self) -> Option<f32> {
        let neg = self.eat(b'-')?;
        let v = float_from(&self.next()?, |s| s.parse::<f32>().ok())?;
        Some(if neg { -v } else { v })
    }

    fn f64(&mut self) -> Option<f64> {
        let neg = self.eat(b'-')?;
        let v = float_from(&self.next()?, |s| s.parse::<f64>().ok())?;
        Some(if neg { -v } else { v })
    }

    fn bool(&mut self) -> Option<bool> {
        bool_from(&self.next()?)
    }

    fn dtype(&mut self) -> Option<EnumOrUnknown<pb::DataType>> {
        let neg = self.eat(b'-')?;
        match self.next()? {
            Token::Ident(name) if !neg => pb::DataType::from_str(name).map(EnumOrUnknown::new),
            Token::Number(n) => {
                let v = parse_int(n)?;
                let v = i32::try_from(if neg { -v } else { v }).ok()?;
                Some(EnumOrUnknown::from_i32(v))
            }
            _ => None,
        }
    }

    /// `: v` after a singular scalar field's name.
    fn scalar<T>(&mut self, value: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.expect(b':')?;
        value(self)
    }

    /// A repeated scalar field after its name: `: v` or `: [v, …]`.
    fn repeated<T>(&mut self, out: &mut Vec<T>, mut value: impl FnMut(&mut Self) -> Option<T>) -> Option<()> {
        self.expect(b':')?;
        if !self.eat(b'[')? {
            out.push(value(self)?);
            return Some(());
        }
        if self.eat(b']')? {
            return Some(());
        }
        loop {
            out.push(value(self)?);
            if self.eat(b']')? {
                return Some(());
            }
            self.expect(b',')?;
        }
    }

    /// A singular message field after its name: an optional `:`, then `{ … }` or `< … >`.
    fn message<T>(&mut self, read: impl FnOnce(&mut Self, u8) -> Option<T>) -> Option<T> {
        self.eat(b':')?;
        let close = self.open()?;
        read(self, close)
    }

    /// A repeated message field after its name: one message, or `[ {…}, … ]`.
    fn messages<T>(&mut self, out: &mut Vec<T>, mut read: impl FnMut(&mut Self, u8) -> Option<T>) -> Option<()> {
        self.eat(b':')?;
        if !self.eat(b'[')? {
            let close = self.open()?;
            out.push(read(self, close)?);
            return Some(());
        }
        if self.eat(b']')? {
            return Some(());
        }
        loop {
            let close = self.open()?;
            out.push(read(self, close)?);
            if self.eat(b']')? {
                return Some(());
            }
            self.expect(b',')?;
        }
    }

    /// A `map<string, AttrValue>` field after its name: one entry, or `[ {…}, … ]`; entries are
    /// appended in the order read (the caller keeps the last of a repeated key).
    fn map(&mut self, out: &mut Vec<(String, pb::AttrValue)>, depth: usize) -> Option<()> {
        self.eat(b':')?;
        if !self.eat(b'[')? {
            let close = self.open()?;
            out.push(self.map_entry(close, depth)?);
            return Some(());
        }
        // `[]` is an error to the general parser (a map field's list holds at least one entry).
        loop {
            let close = self.open()?;
            out.push(self.map_entry(close, depth)?);
            if self.eat(b']')? {
                return Some(());
            }
            self.expect(b',')?;
        }
    }

    fn map_entry(&mut self, close: u8, depth: usize) -> Option<(String, pb::AttrValue)> {
        let (mut key, mut value) = (None, None);
        while let Some(field) = self.field(close)? {
            match field {
                "key" => once(&mut key, self.string_field()?)?,
                "value" => once(&mut value, self.message(|r, c| r.attr_value(c, depth))?)?,
                _ => return None,
            }
            self.separator()?;
        }
        Some((key.unwrap_or_default(), value.unwrap_or_default()))
    }

    /// An `AttrValue`'s fields up to `close`, at attribute depth `depth` (1 for a node's).
    fn attr_value(&mut self, close: u8, depth: usize) -> Option<pb::AttrValue> {
        use pb::attr_value::Value;
        if depth > MAX_FAST_ATTR_DEPTH {
            return None;
        }
        let mut value = None;
        while let Some(field) = self.field(close)? {
            let v = match field {
                "s" => Value::S(self.scalar(Self::bytes)?),
                "i" => Value::I(self.scalar(Self::i64)?),
                "f" => Value::F(self.scalar(Self::f32)?),
                "b" => Value::B(self.scalar(Self::bool)?),
                "type" => Value::Type(self.scalar(Self::dtype)?),
                "placeholder" => Value::Placeholder(self.string_field()?),
                "shape" => Value::Shape(self.message(Self::shape)?),
                "tensor" => Value::Tensor(self.message(Self::tensor)?),
                "list" => Value::List(self.message(|r, c| r.list(c, depth))?),
                "func" => Value::Func(self.message(|r, c| r.func(c, depth))?),
                _ => return None,
            };
            once(&mut value, v)?;
            self.separator()?;
        }
        let mut a = pb::AttrValue::new();
        a.value = value;
        Some(a)
    }

    fn list(&mut self, close: u8, depth: usize) -> Option<pb::attr_value::ListValue> {
        let mut l = pb::attr_value::ListValue::new();
        while let Some(field) = self.field(close)? {
            match field {
                "s" => self.repeated(&mut l.s, Self::bytes)?,
                "i" => self.repeated(&mut l.i, Self::i64)?,
                "f" => self.repeated(&mut l.f, Self::f32)?,
                "b" => self.repeated(&mut l.b, Self::bool)?,
                "type" => self.repeated(&mut l.type_, Self::dtype)?,
                "shape" => self.messages(&mut l.shape, Self::shape)?,
                "tensor" => self.messages(&mut l.tensor, Self::tensor)?,
                "func" => self.messages(&mut l.func, |r, c| r.func(c, depth + 1))?,
                _ => return None,
            }
            self.separator()?;
        }
        Some(l)
    }

    fn func(&mut self, close: u8, depth: usize) -> Option<pb::NameAttrList> {
        let mut name = None;
        let mut attrs = Vec::new();
        while let Some(field) = self.field(close)? {
            match field {
                "name" => once(&mut name, self.string_field()?)?,
                "attr" => self.map(&mut attrs, depth + 1)?,
                _ => return None,
            }
            self.separator()?;
        }
        let mut f = pb::NameAttrList::new();
        f.name = name.unwrap_or_default();
        f.attr = attrs.into_iter().collect();
        Some(f)
    }

    fn shape(&mut self, close: u8) -> Option<pb::TensorShapeProto> {
        let mut s = pb::TensorShapeProto::new();
        let mut unknown_rank = None;
        while let Some(field) = self.field(close)? {
            match field {
                "dim" => self.messages(&mut s.dim, Self::dim)?,
                "unknown_rank" => once(&mut unknown_rank, self.scalar(Self::bool)?)?,
                _ => return None,
            }
            self.separator()?;
        }
        s.unknown_rank = unknown_rank.unwrap_or_default();
        Some(s)
    }

    fn dim(&mut self, close: u8) -> Option<pb::tensor_shape_proto::Dim> {
        let mut d = pb::tensor_shape_proto::Dim::new();
        let (mut size, mut name) = (None, None);
        while let Some(field) = self.field(close)? {
            match field {
                "size" => once(&mut size, self.scalar(Self::i64)?)?,
                "name" => once(&mut name, self.string_field()?)?,
                _ => return None,
            }
            self.separator()?;
        }
        d.size = size.unwrap_or_default();
        d.name = name.unwrap_or_default();
        Some(d)
    }

    fn tensor(&mut self, close: u8) -> Option<pb::TensorProto> {
        let mut t = pb::TensorProto::new();
        let (mut dtype, mut shape, mut version, mut content) = (None, None, None, None);
        while let Some(field) = self.field(close)? {
            match field {
                "dtype" => once(&mut dtype, self.scalar(Self::dtype)?)?,
                "tensor_shape" => once(&mut shape, self.message(Self::shape)?)?,
                "version_number" => once(&mut version, self.scalar(Self::i32)?)?,
                "tensor_content" => once(&mut content, self.scalar(Self::bytes)?)?,
                "half_val" => self.repeated(&mut t.half_val, Self::i32)?,
                "float_val" => self.repeated(&mut t.float_val, Self::f32)?,
                "double_val" => self.repeated(&mut t.double_val, Self::f64)?,
                "int_val" => self.repeated(&mut t.int_val, Self::i32)?,
                "string_val" => self.repeated(&mut t.string_val, Self::bytes)?,
                "scomplex_val" => self.repeated(&mut t.scomplex_val, Self::f32)?,
                "int64_val" => self.repeated(&mut t.int64_val, Self::i64)?,
                "bool_val" => self.repeated(&mut t.bool_val, Self::bool)?,
                "dcomplex_val" => self.repeated(&mut t.dcomplex_val, Self::f64)?,
                "uint32_val" => self.repeated(&mut t.uint32_val, Self::u32)?,
                "uint64_val" => self.repeated(&mut t.uint64_val, Self::u64)?,
                _ => return None,
            }
            self.separator()?;
        }
        t.dtype = dtype.unwrap_or_default();
        t.tensor_shape = shape.map_or_else(MessageField::none, MessageField::some);
        t.version_number = version.unwrap_or_default();
        t.tensor_content = content.unwrap_or_default();
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_pbtxt_via, to_pbtxt};

    /// Reading with the typed reader and without it gives the same graph, node spans
    /// included, or the same error.
    fn same(text: &str) -> bool {
        match (parse_pbtxt_via(text, true), parse_pbtxt_via(text, false)) {
            (Ok(a), Ok(b)) => {
                assert_eq!(to_pbtxt(&a), to_pbtxt(&b), "for {text}");
                let spans = |g: &autoclust_graph::Graph| g.nodes().iter().map(|n| n.span).collect::<Vec<_>>();
                assert_eq!(spans(&a), spans(&b), "for {text}");
                true
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "for {text}");
                false
            }
            (a, b) => panic!("typed {:?} but general {:?} for {text}", a.err(), b.err()),
        }
    }

    /// The typed reader on one entry, `text` being what follows the word `node`.
    fn typed(text: &str) -> Option<RawNode> {
        node(&mut Lexer::new(text), Span { line: 1, column: 1 })
    }

    const TF_NODE: &str = r#"{
  name: "dense/MatMul"
  op: "MatMul"
  input: "x"
  input: "dense/kernel/Read"
  input: "^init"
  device: "/job:localhost/replica:0/task:0/device:CPU:0"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "transpose_a" value { b: false } }
  attr { key: "_output_shapes" value { list { shape { dim { size: -1 } dim { size: 4 } } shape { unknown_rank: true } } } }
  attr { key: "value" value { tensor { dtype: DT_HALF tensor_shape { dim { size: 2 } } half_val: 15360 half_val: 0 } } }
  attr { key: "c" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: "\000\000\200?\000\000\000@" } } }
  attr { key: "f" value { func { name: "body" attr { key: "T" value { list { type: [DT_INT32, DT_FLOAT] } } } } } }
  attr { key: "p" value { placeholder: "T" } }
  attr { key: "strides" value { list { i: 1 i: 2 i: 2 i: 1 } } }
  attr { key: "eps" value { f: 1e-05 } }
  attr { key: "padding" value { s: "SAME" } }
  attr { key: "dims" value { list { } } }
  attr { key: "_class" value { list { s: "loc:@v" } } }
}"#;

    #[test]
    fn takes_what_tensorflow_writes_and_gives_the_general_parsers_graph() {
        let n = typed(TF_NODE).expect("the typed reader reads TensorFlow's own layout");
        assert_eq!((n.name.as_str(), n.op.as_str(), n.inputs.len()), ("dense/MatMul", "MatMul", 3));
        assert_eq!(n.attrs.len(), 12);
        let text = format!("node {TF_NODE}\nnode {{ name: \"x\" op: \"Placeholder\" }}\nnode {{ name: \"init\" op: \"NoOp\" }}\nnode {{ name: \"dense/kernel/Read\" op: \"Identity\" input: \"x\" }}\nversions {{ producer: 1 }}\n");
        assert!(same(&text));
    }

    /// A map entry given twice keeps its last value, as the general parser's map does.
    #[test]
    fn a_repeated_attribute_keeps_its_last_value() {
        let entry = r#"{ name: "a" op: "X" attr { key: "T" value { type: DT_FLOAT } } attr { key: "T" value { type: DT_INT32 } } }"#;
        let n = typed(entry).unwrap();
        assert_eq!(n.attrs.len(), 1);
        assert_eq!(n.attrs.get("T"), Some(&autoclust_graph::AttrValue::Type(autoclust_graph::DType::Int32)));
        assert!(same(&format!("node {entry}\n")));
    }

    #[test]
    fn gives_up_where_only_the_general_parser_knows_the_answer() {
        for entry in [
            // A oneof given two members, a singular field twice, a map's empty list.
            r#"{ name: "a" op: "X" attr { key: "k" value { i: 1 f: 2 } } }"#,
            r#"{ name: "a" name: "b" op: "X" }"#,
            r#"{ name: "a" op: "X" attr: [] }"#,
            // Fields it does not read, a syntax error, a string that is not UTF-8.
            r#"{ name: "a" op: "X" colour: 3 }"#,
            r#"{ name: "a" op: "X" experimental_debug_info { original_node_names: "b" } }"#,
            r#"{ name: "a" op: "X" attr { key: "k" value { tensor { dtype: DT_RESOURCE resource_handle_val { } } } } }"#,
            r#"{ name: "a" op: "X" input "b" }"#,
            r#"{ name: "\377" op: "X" }"#,
            // A node list, a dtype it does not know by name, nesting past its depth.
            r#"[ { name: "a" op: "X" } ]"#,
            r#"{ name: "a" op: "X" attr { key: "T" value { type: DT_NOPE } } }"#,
            r#"{ name: "a" op: "X" attr { key: "f" value { func { name: "f" attr { key: "a" value { func { name: "f" attr { key: "a" value { func { name: "f" attr { key: "a" value { func { name: "f" attr { key: "a" value { func { name: "f" attr { key: "a" value { func { name: "f" attr { key: "a" value { i: 1 } } } } } } } } } } } } } } } } } } } } } }"#,
        ] {
            assert!(typed(entry).is_none(), "{entry}");
            same(&format!("node {entry}\n"));
        }
    }

    /// Every text graph the repository holds reads the same both ways.
    #[test]
    fn every_text_graph_in_testdata_reads_the_same_both_ways() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "pbtxt") {
                    out.push(p);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
        let mut files = Vec::new();
        walk(&root, &mut files);
        assert!(files.len() > 100, "{} text graphs under {}", files.len(), root.display());
        let read = files.iter().filter(|f| same(&std::fs::read_to_string(f).unwrap())).count();
        assert!(read > 100, "only {read} of the text graphs read");
    }

    /// Random edits of a graph that uses every construct the reader knows (and some it does
    /// not) read the same both ways: the typed reader never accepts what the general parser
    /// refuses, nor reads anything differently.
    #[test]
    fn edited_graphs_read_the_same_both_ways() {
        let base = format!(
            "node {TF_NODE}\nnode {{ name: 'x', op: \"Placeholder\"; attr < key: \"dtype\" value: {{ type: 1 }} > }}\n\
             node {{ name: \"init\" op: \"NoOp\" }}\nnode: {{ name: \"dense/kernel/Read\" op: \"Identity\" input: [\"x\"] \
             attr {{ key: \"l\" value {{ list {{ f: [1, -inf, 0x10, nan] }} }} }} attr {{ key: \"m\" value {{ list {{ b: [true, f] }} }} }} }}\n"
        );
        let pieces: [&str; 12] = ["{", "}", ":", "[", "]", ",", ";", "-", "\"", " i: 7 ", " name: \"q\" ", "<"];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        assert!(same(&base), "{:?}", parse_pbtxt_via(&base, false).err());
        let (mut ok, mut failed) = (0, 0);
        for _ in 0..1500 {
            let mut t = base.clone().into_bytes();
            for _ in 0..1 + rand(3) {
                let at = rand(t.len());
                match rand(3) {
                    0 => {
                        t.remove(at);
                    }
                    1 => {
                        let p = pieces[rand(pieces.len())];
                        t.splice(at..at, p.bytes());
                    }
                    _ => {
                        let len = rand(40).min(t.len() - at);
                        let chunk = t[at..at + len].to_vec();
                        let to = rand(t.len());
                        t.splice(to..to, chunk);
                    }
                }
            }
            let Ok(text) = String::from_utf8(t) else { continue };
            if same(&text) {
                ok += 1;
            } else {
                failed += 1;
            }
        }
        // Both outcomes were exercised.
        assert!(ok > 50 && failed > 50, "{ok} read, {failed} refused");
    }
}
