//! The protobuf text format, driven by rust-protobuf's reflection.
//!
//! rust-protobuf ships a text parser, but it accepts unknown escapes
//! silently, cannot read `inf`/`nan`, reads floats through `f64` (double
//! rounding) and reports positions only inside its message string. This
//! module reads what TensorFlow's C++ writer emits — and the usual
//! hand-written liberties (`key: {`, `<…>`, `[a, b]` lists, `,`/`;`
//! separators, enum numbers, `#` comments, adjacent string literals, octal and
//! hex escapes) — with every error carrying the `line:column` where it
//! starts. The printer writes TensorFlow's layout: two-space indentation,
//! fields in field-number order, map entries sorted by key.

use std::fmt::Write as _;

use autoclust_graph::limits::{MAX_ATTR_DEPTH, MAX_MESSAGE_DEPTH};
use autoclust_graph::Span;
use protobuf::reflect::{
    EnumDescriptor, FieldDescriptor, MessageDescriptor, ReflectFieldRef, ReflectValueBox, ReflectValueRef,
    RuntimeFieldType, RuntimeType,
};
use protobuf::MessageDyn;

/// A text-format syntax or schema error at a position.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{span}: {message}")]
pub struct TextError {
    pub span: Span,
    pub message: String,
}

/// A token of the text format. Strings are decoded when lexed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token<'a> {
    Ident(&'a str),
    /// A numeric literal as written, without a leading sign.
    Number(&'a str),
    Str(Vec<u8>),
    Symbol(u8),
    Eof,
}

pub(crate) struct Lexer<'a> {
    src: &'a [u8],
    text: &'a str,
    pos: usize,
    line: u32,
    line_start: usize,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Lexer { src: text.as_bytes(), text, pos: 0, line: 1, line_start: 0 }
    }

    /// Where the lexer is, to come back to with [`Lexer::restore`].
    pub(crate) fn save(&self) -> (usize, u32, usize) {
        (self.pos, self.line, self.line_start)
    }

    pub(crate) fn restore(&mut self, at: (usize, u32, usize)) {
        (self.pos, self.line, self.line_start) = at;
    }

    fn span_at(&self, pos: usize) -> Span {
        // Columns count characters, not bytes, on the current line.
        let col = self.text[self.line_start..pos].chars().count() as u32 + 1;
        Span { line: self.line, column: col }
    }

    fn err<T>(&self, pos: usize, message: impl Into<String>) -> Result<T, TextError> {
        Err(TextError { span: self.span_at(pos), message: message.into() })
    }

    fn skip_ws(&mut self) {
        while self.pos < self.src.len() {
            match self.src[self.pos] {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.line_start = self.pos;
                }
                b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c' => self.pos += 1,
                b'#' => {
                    while self.pos < self.src.len() && self.src[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// The next token and the byte offset where it starts.
    pub(crate) fn next(&mut self) -> Result<(Token<'a>, usize), TextError> {
        self.skip_ws();
        let start = self.pos;
        let Some(&c) = self.src.get(self.pos) else {
            return Ok((Token::Eof, start));
        };
        if c.is_ascii_alphabetic() || c == b'_' {
            while self.pos < self.src.len()
                && (self.src[self.pos].is_ascii_alphanumeric() || self.src[self.pos] == b'_')
            {
                self.pos += 1;
            }
            return Ok((Token::Ident(&self.text[start..self.pos]), start));
        }
        if c.is_ascii_digit() || (c == b'.' && self.src.get(self.pos + 1).is_some_and(u8::is_ascii_digit)) {
            while self.pos < self.src.len() {
                let b = self.src[self.pos];
                let exp_sign = (b == b'-' || b == b'+')
                    && matches!(self.src[self.pos - 1], b'e' | b'E')
                    && !self.text[start..self.pos].starts_with("0x");
                if b.is_ascii_alphanumeric() || b == b'.' || exp_sign {
                    self.pos += 1;
                } else {
                    break;
                }
            }
            return Ok((Token::Number(&self.text[start..self.pos]), start));
        }
        if c == b'"' || c == b'\'' {
            let mut out = Vec::new();
            self.string_into(&mut out)?;
            // Adjacent literals concatenate, as in C.
            loop {
                let save = (self.pos, self.line, self.line_start);
                self.skip_ws();
                match self.src.get(self.pos) {
                    Some(b'"') | Some(b'\'') => self.string_into(&mut out)?,
                    _ => {
                        (self.pos, self.line, self.line_start) = save;
                        break;
                    }
                }
            }
            return Ok((Token::Str(out), start));
        }
        self.pos += 1;
        if !c.is_ascii() {
            let ch = self.text[start..].chars().next().unwrap_or('?');
            return self.err(start, format!("unexpected character '{ch}'"));
        }
        Ok((Token::Symbol(c), start))
    }

    fn string_into(&mut self, out: &mut Vec<u8>) -> Result<(), TextError> {
        let open = self.pos;
        let quote = self.src[self.pos];
        self.pos += 1;
        loop {
            // The run of plain bytes up to the next quote, backslash or newline, in one copy.
            let rest = &self.src[self.pos..];
            let plain = rest.iter().position(|&b| b == quote || b == b'\\' || b == b'\n').unwrap_or(rest.len());
            out.extend_from_slice(&rest[..plain]);
            self.pos += plain;
            let Some(&b) = self.src.get(self.pos) else {
                return self.err(open, "unterminated string");
            };
            match b {
                b'\n' => return self.err(open, "unterminated string (newline inside a string)"),
                b'\\' => {
                    let esc = self.pos;
                    self.pos += 1;
                    let Some(&e) = self.src.get(self.pos) else {
                        return self.err(open, "unterminated string");
                    };
                    self.pos += 1;
                    let byte = match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'a' => 0x07,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'v' => 0x0b,
                        b'?' => b'?',
                        b'\\' => b'\\',
                        b'\'' => b'\'',
                        b'"' => b'"',
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.src.get(self.pos) {
                                    Some(&d @ b'0'..=b'7') => {
                                        v = v * 8 + u32::from(d - b'0');
                                        self.pos += 1;
                                    }
                                    _ => break,
                                }
                            }
                            if v > 255 {
                                return self.err(esc, "octal escape out of range");
                            }
                            v as u8
                        }
                        b'x' | b'X' => {
                            let mut v = 0u32;
                            let mut n = 0;
                            while n < 2 {
                                match self.src.get(self.pos).and_then(|d| (*d as char).to_digit(16)) {
                                    Some(d) => {
                                        v = v * 16 + d;
                                        self.pos += 1;
                                        n += 1;
                                    }
                                    None => break,
                                }
                            }
                            if n == 0 {
                                return self.err(esc, "bad escape '\\x' without hex digits");
                            }
                            v as u8
                        }
                        _ => {
                            let ch = self.text[esc + 1..].chars().next().unwrap_or('?');
                            return self.err(esc, format!("bad escape '\\{ch}' in string"));
                        }
                    };
                    out.push(byte);
                }
                _ if b == quote => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }
}

/// Parses a text-format message of the descriptor's type. Also returns the
/// positions where each entry of the top-level repeated field named
/// `track` starts (used for the line of each `node { … }`).
pub fn parse_message(
    text: &str,
    descriptor: &MessageDescriptor,
    track: &str,
) -> Result<(Box<dyn MessageDyn>, Vec<Span>), TextError> {
    let mut p = Parser::new(text, None);
    let mut msg = descriptor.new_instance();
    p.fields(&mut *msg, descriptor, None, Some(track))?;
    Ok((msg, p.track_spans))
}

/// What [`parse_message_streaming`] does with each entry of the tracked field: takes it with
/// the position where it starts, and returns `false` to stop the parse.
pub type EntrySink<'s> = &'s mut dyn FnMut(Box<dyn MessageDyn>, Span) -> bool;

/// A faster road for an entry of the tracked field: called with the lexer right after the
/// field's name, it reads the entry and returns `Some(true)` (taken) or `Some(false)` (refused,
/// as the sink refuses), or `None` when it does not read this entry exactly as the general
/// parser would — the lexer is then put back and the general parser reads the entry.
pub(crate) type EntryReader<'s> = &'s mut dyn FnMut(&mut Lexer<'_>, Span) -> Option<bool>;

/// Like [`parse_message`], but each entry of the top-level repeated message field `track` goes
/// to `sink` as soon as it is read instead of into the message, so that a caller converting
/// entries one by one never holds them all (a 10⁵-node GraphDef's `NodeDef`s and their attribute
/// maps are most of its memory). When `sink` returns `false` the parse stops with an error at
/// that entry; the caller knows why.
pub fn parse_message_streaming(
    text: &str,
    descriptor: &MessageDescriptor,
    track: &str,
    sink: EntrySink<'_>,
) -> Result<Box<dyn MessageDyn>, TextError> {
    parse_message_streaming_with(text, descriptor, track, sink, None)
}

/// [`parse_message_streaming`] with a typed reader tried first on each tracked entry.
pub(crate) fn parse_message_streaming_with<'s>(
    text: &str,
    descriptor: &MessageDescriptor,
    track: &str,
    sink: EntrySink<'s>,
    reader: Option<EntryReader<'s>>,
) -> Result<Box<dyn MessageDyn>, TextError> {
    let mut p = Parser::new(text, Some(sink));
    p.reader = reader;
    let mut msg = descriptor.new_instance();
    p.fields(&mut *msg, descriptor, None, Some(track))?;
    Ok(msg)
}

struct Parser<'a, 's> {
    lx: Lexer<'a>,
    peeked: Option<(Token<'a>, usize)>,
    track_spans: Vec<Span>,
    /// Where tracked entries go instead of the message (streaming), and the position of the
    /// tracked field being read.
    sink: Option<EntrySink<'s>>,
    reader: Option<EntryReader<'s>>,
    tracking: Option<Span>,
    /// Messages enclosing the one being read (at most [`MAX_MESSAGE_DEPTH`]).
    depth: usize,
    /// `AttrValue` messages enclosing the one being read (at most [`MAX_ATTR_DEPTH`]).
    attr_depth: usize,
    /// Where the parser is, for the depth errors: the enclosing function
    /// (its signature's name), node and outermost attribute, when known.
    function: Option<String>,
    node: Option<String>,
    attr: Option<String>,
    /// Fields looked up so far, by message (its full name's address) and field name as
    /// written: rust-protobuf's lookup hashes the name with SipHash and rebuilds the
    /// field's runtime type on every call, a sixth of the time a large GraphDef takes.
    known: std::collections::HashMap<(usize, &'a str), std::rc::Rc<Known>, BuildFnv>,
}

/// A field of a message and its runtime type, as [`Parser::known`] keeps them.
struct Known {
    field: FieldDescriptor,
    kind: RuntimeFieldType,
}

/// FNV-1a for [`Parser::known`]'s short keys.
#[derive(Default, Clone, Copy)]
struct BuildFnv;

struct Fnv(u64);

impl std::hash::BuildHasher for BuildFnv {
    type Hasher = Fnv;
    fn build_hasher(&self) -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x100_0000_01b3);
    }
}

impl<'a, 's> Parser<'a, 's> {
    fn new(text: &'a str, sink: Option<EntrySink<'s>>) -> Self {
        Parser {
            lx: Lexer::new(text),
            peeked: None,
            track_spans: Vec::new(),
            sink,
            reader: None,
            tracking: None,
            depth: 0,
            attr_depth: 0,
            function: None,
            node: None,
            attr: None,
            known: Default::default(),
        }
    }

    /// Puts one value of a repeated field into `msg`, or hands it to the sink when it is an
    /// entry of the tracked field.
    fn push_repeated(
        &mut self,
        msg: &mut dyn MessageDyn,
        field: &FieldDescriptor,
        v: ReflectValueBox,
        tracked: Option<Span>,
    ) -> Result<(), TextError> {
        match (tracked, self.sink.as_mut(), v) {
            (Some(span), Some(sink), ReflectValueBox::Message(m)) => {
                if !sink(m, span) {
                    return Err(TextError { span, message: "the entry was refused".into() });
                }
            }
            (_, _, v) => field.mut_repeated(msg).push(v),
        }
        Ok(())
    }

    fn next(&mut self) -> Result<(Token<'a>, usize), TextError> {
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => self.lx.next(),
        }
    }

    fn peek(&mut self) -> Result<&Token<'a>, TextError> {
        if self.peeked.is_none() {
            self.peeked = Some(self.lx.next()?);
        }
        Ok(&self.peeked.as_ref().expect("just peeked").0)
    }

    fn eat(&mut self, sym: u8) -> Result<bool, TextError> {
        if *self.peek()? == Token::Symbol(sym) {
            self.peeked = None;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect(&mut self, sym: u8, what: &str) -> Result<(), TextError> {
        let (t, at) = self.next()?;
        if t == Token::Symbol(sym) {
            return Ok(());
        }
        self.lx.err(at, format!("expected '{}' {what}, found {}", sym as char, describe(&t)))
    }

    /// Reads fields until `close` (or end of input when `close` is `None`).
    fn fields(
        &mut self,
        msg: &mut dyn MessageDyn,
        desc: &MessageDescriptor,
        close: Option<u8>,
        track: Option<&str>,
    ) -> Result<(), TextError> {
        loop {
            let (tok, at) = self.next()?;
            let name = match tok {
                Token::Eof if close.is_none() => return Ok(()),
                Token::Eof => return self.lx.err(at, "unexpected end of input (a '}' is missing)"),
                Token::Symbol(c) if Some(c) == close => return Ok(()),
                Token::Ident(name) => name,
                other => return self.lx.err(at, format!("expected a field name, found {}", describe(&other))),
            };
            let key = (desc.full_name().as_ptr() as usize, name);
            let known = match self.known.get(&key) {
                Some(k) => k.clone(),
                None => {
                    let Some(field) = desc.field_by_name(name) else {
                        return self.lx.err(at, format!("unknown field '{name}' in {}", desc.full_name()));
                    };
                    let k = std::rc::Rc::new(Known { kind: field.runtime_field_type(), field });
                    self.known.insert(key, k.clone());
                    k
                }
            };
            let field = &known.field;
            if track == Some(name) {
                let span = self.lx.span_at(at);
                self.track_spans.push(span);
                if let (Some(reader), None) = (self.reader.as_mut(), &self.peeked) {
                    let before = self.lx.save();
                    match reader(&mut self.lx, span) {
                        Some(true) => {
                            if !self.eat(b',')? {
                                self.eat(b';')?;
                            }
                            continue;
                        }
                        Some(false) => return Err(TextError { span, message: "the entry was refused".into() }),
                        None => self.lx.restore(before),
                    }
                }
                self.tracking = Some(span);
            }
            self.field_value(msg, field, &known.kind)?;
            if name == "name" {
                self.note_name(msg, desc, field);
            }
            // Optional separators.
            if !self.eat(b',')? {
                self.eat(b';')?;
            }
        }
    }

    /// Records the name of a node, function or attribute definition just read.
    fn note_name(&mut self, msg: &dyn MessageDyn, desc: &MessageDescriptor, field: &FieldDescriptor) {
        let Some(ReflectValueRef::String(s)) = field.get_singular(msg) else { return };
        match desc.full_name() {
            "tensorflow.NodeDef" => self.node = Some(s.to_string()),
            "tensorflow.OpDef" => self.function = Some(s.to_string()),
            "tensorflow.OpDef.AttrDef" if self.attr_depth == 0 => self.attr = Some(s.to_string()),
            _ => {}
        }
    }

    /// `node 'f/n': attribute 'a': `, as much of it as is known.
    fn place(&self) -> String {
        let mut s = String::new();
        match (&self.function, &self.node) {
            (Some(f), Some(n)) => write!(s, "node '{f}/{n}': "),
            (None, Some(n)) | (Some(n), None) => write!(s, "node '{n}': "),
            (None, None) => Ok(()),
        }
        .expect("write to String");
        if let Some(a) = self.attr.as_ref().filter(|_| self.attr_depth > 0) {
            write!(s, "attribute '{a}': ").expect("write to String");
        }
        s
    }

    fn field_value(
        &mut self,
        msg: &mut dyn MessageDyn,
        field: &FieldDescriptor,
        kind: &RuntimeFieldType,
    ) -> Result<(), TextError> {
        match kind {
            RuntimeFieldType::Singular(t) => {
                let v = self.value_after_name(t)?;
                field.set_singular_field(msg, v);
            }
            RuntimeFieldType::Repeated(t) => {
                let tracked = self.tracking.take();
                let is_msg = matches!(t, RuntimeType::Message(_));
                let colon = self.eat(b':')?;
                if (colon || is_msg) && self.eat(b'[')? {
                    if !self.eat(b']')? {
                        loop {
                            let v = self.value(t)?;
                            self.push_repeated(msg, field, v, tracked)?;
                            if self.eat(b']')? {
                                break;
                            }
                            self.expect(b',', "between list elements")?;
                        }
                    }
                    return Ok(());
                }
                let v = if colon { self.value(t)? } else { self.value_after_name(t)? };
                self.push_repeated(msg, field, v, tracked)?;
            }
            RuntimeFieldType::Map(k, v) => {
                self.eat(b':')?;
                let entries = if self.eat(b'[')? { None } else { Some(()) };
                loop {
                    let (key, value) = self.map_entry(k, v)?;
                    field.mut_map(msg).insert(key, value);
                    if entries.is_some() || self.eat(b']')? {
                        break;
                    }
                    self.expect(b',', "between map entries")?;
                }
            }
        }
        Ok(())
    }

    /// A value right after a field name: `: scalar`, `: { … }` or `{ … }`.
    fn value_after_name(&mut self, t: &RuntimeType) -> Result<ReflectValueBox, TextError> {
        if let RuntimeType::Message(_) = t {
            self.eat(b':')?;
        } else {
            self.expect(b':', "after a field name")?;
        }
        self.value(t)
    }

    fn map_entry(&mut self, k: &RuntimeType, v: &RuntimeType) -> Result<(ReflectValueBox, ReflectValueBox), TextError> {
        let (open, at) = self.next()?;
        let close = match open {
            Token::Symbol(b'{') => b'}',
            Token::Symbol(b'<') => b'>',
            other => return self.lx.err(at, format!("expected '{{' to open a map entry, found {}", describe(&other))),
        };
        let mut key = None;
        let mut value = None;
        loop {
            let (tok, at) = self.next()?;
            match tok {
                Token::Symbol(c) if c == close => break,
                Token::Ident("key") => {
                    let kv = self.value_after_name(k)?;
                    // The outermost attribute's name, for the depth errors.
                    if let (ReflectValueBox::String(name), RuntimeType::Message(m)) = (&kv, v) {
                        if self.attr_depth == 0 && m.full_name() == "tensorflow.AttrValue" {
                            self.attr = Some(name.clone());
                        }
                    }
                    key = Some(kv);
                }
                Token::Ident("value") => value = Some(self.value_after_name(v)?),
                Token::Ident(other) => return self.lx.err(at, format!("unknown field '{other}' in a map entry")),
                Token::Eof => return self.lx.err(at, "unexpected end of input (a '}' is missing)"),
                other => return self.lx.err(at, format!("expected 'key' or 'value', found {}", describe(&other))),
            }
            if !self.eat(b',')? {
                self.eat(b';')?;
            }
        }
        let key = key.unwrap_or_else(|| default_box(k));
        let value = value.unwrap_or_else(|| default_box(v));
        Ok((key, value))
    }

    fn value(&mut self, t: &RuntimeType) -> Result<ReflectValueBox, TextError> {
        Ok(match t {
            RuntimeType::Message(d) => {
                let (open, at) = self.next()?;
                let close = match open {
                    Token::Symbol(b'{') => b'}',
                    Token::Symbol(b'<') => b'>',
                    other => {
                        return self
                            .lx
                            .err(at, format!("expected '{{' to open {}, found {}", d.name(), describe(&other)))
                    }
                };
                let m = self.message(d, close, at)?;
                ReflectValueBox::Message(m)
            }
            RuntimeType::Enum(e) => ReflectValueBox::Enum(e.clone(), self.enum_value(e)?),
            RuntimeType::String => {
                let (bytes, at) = self.string()?;
                match String::from_utf8(bytes) {
                    Ok(s) => ReflectValueBox::String(s),
                    Err(_) => return self.lx.err(at, "string is not valid UTF-8"),
                }
            }
            RuntimeType::VecU8 => ReflectValueBox::Bytes(self.string()?.0),
            RuntimeType::Bool => ReflectValueBox::Bool(self.bool()?),
            RuntimeType::F32 => ReflectValueBox::F32(self.float(|s| s.parse::<f32>().ok())?),
            RuntimeType::F64 => ReflectValueBox::F64(self.float(|s| s.parse::<f64>().ok())?),
            RuntimeType::I32 => ReflectValueBox::I32(self.int(i32::MIN as i128, i32::MAX as i128)? as i32),
            RuntimeType::I64 => ReflectValueBox::I64(self.int(i64::MIN as i128, i64::MAX as i128)? as i64),
            RuntimeType::U32 => ReflectValueBox::U32(self.int(0, u32::MAX as i128)? as u32),
            RuntimeType::U64 => ReflectValueBox::U64(self.int(0, u64::MAX as i128)? as u64),
        })
    }

    /// A message's fields up to `close`, nested at most [`MAX_MESSAGE_DEPTH`]
    /// messages and [`MAX_ATTR_DEPTH`] attribute values deep, so that no input
    /// can make this descent (or any walk over what it builds) overflow the stack.
    fn message(&mut self, d: &MessageDescriptor, close: u8, at: usize) -> Result<Box<dyn MessageDyn>, TextError> {
        let kind = d.full_name();
        let is_attr = kind == "tensorflow.AttrValue";
        if is_attr && self.attr_depth >= MAX_ATTR_DEPTH {
            return self.lx.err(at, format!("{}nested deeper than {MAX_ATTR_DEPTH} levels", self.place()));
        }
        if self.depth >= MAX_MESSAGE_DEPTH {
            return self.lx.err(at, format!("{}messages nested deeper than {MAX_MESSAGE_DEPTH} levels", self.place()));
        }
        // A node or function starts with no name known; the enclosing one's is restored after it.
        let saved_node = if kind == "tensorflow.NodeDef" { Some(self.node.take()) } else { None };
        let saved_function = if kind == "tensorflow.FunctionDef" { Some(self.function.take()) } else { None };
        self.depth += 1;
        self.attr_depth += usize::from(is_attr);
        let mut m = d.new_instance();
        let r = self.fields(&mut *m, d, Some(close), None);
        self.depth -= 1;
        self.attr_depth -= usize::from(is_attr);
        if let Some(n) = saved_node {
            self.node = n;
        }
        if let Some(f) = saved_function {
            self.function = f;
        }
        r.map(|()| m)
    }

    fn string(&mut self) -> Result<(Vec<u8>, usize), TextError> {
        match self.next()? {
            (Token::Str(s), at) => Ok((s, at)),
            (other, at) => self.lx.err(at, format!("expected a string, found {}", describe(&other))),
        }
    }

    fn bool(&mut self) -> Result<bool, TextError> {
        let (tok, at) = self.next()?;
        match bool_from(&tok) {
            Some(b) => Ok(b),
            None => self.lx.err(at, format!("expected true or false, found {}", describe(&tok))),
        }
    }

    fn enum_value(&mut self, e: &EnumDescriptor) -> Result<i32, TextError> {
        let neg = self.eat(b'-')?;
        match self.next()? {
            (Token::Ident(name), at) if !neg => match e.value_by_name(name) {
                Some(v) => Ok(v.value()),
                None => self.lx.err(at, format!("unknown {} value '{name}'", e.name())),
            },
            (Token::Number(n), at) => match parse_int(n) {
                Some(v) if (if neg { -v } else { v }) >= i32::MIN as i128 && v <= i32::MAX as i128 => {
                    Ok((if neg { -v } else { v }) as i32)
                }
                _ => self.lx.err(at, format!("bad {} number '{n}'", e.name())),
            },
            (other, at) => self.lx.err(at, format!("expected a {} value, found {}", e.name(), describe(&other))),
        }
    }

    fn int(&mut self, min: i128, max: i128) -> Result<i128, TextError> {
        let neg = self.eat(b'-')?;
        match self.next()? {
            (Token::Number(n), at) => {
                let Some(v) = parse_int(n) else {
                    return self.lx.err(at, format!("expected an integer, found '{n}'"));
                };
                let v = if neg { -v } else { v };
                if v < min || v > max {
                    return self.lx.err(at, format!("integer {v} out of range"));
                }
                Ok(v)
            }
            (other, at) => self.lx.err(at, format!("expected an integer, found {}", describe(&other))),
        }
    }

    fn float<F: Copy + std::ops::Neg<Output = F>>(
        &mut self,
        parse: impl Fn(&str) -> Option<F>,
    ) -> Result<F, TextError> {
        let neg = self.eat(b'-')?;
        let (tok, at) = self.next()?;
        match float_from(&tok, parse) {
            Some(v) => Ok(if neg { -v } else { v }),
            None => self.lx.err(at, format!("expected a number, found {}", describe(&tok))),
        }
    }
}

/// A boolean literal as the text format writes it.
pub(crate) fn bool_from(tok: &Token<'_>) -> Option<bool> {
    match tok {
        Token::Ident("true" | "True" | "t") | Token::Number("1") => Some(true),
        Token::Ident("false" | "False" | "f") | Token::Number("0") => Some(false),
        _ => None,
    }
}

/// A floating-point literal without its sign: decimal, `inf`/`nan` in their spellings, an `f`
/// suffix, or an integer (read exactly, whatever its base).
pub(crate) fn float_from<F>(tok: &Token<'_>, parse: impl Fn(&str) -> Option<F>) -> Option<F> {
    match *tok {
        Token::Ident(id) => match id.to_ascii_lowercase().as_str() {
            "inf" | "infinity" | "inff" | "infinityf" => parse("inf"),
            "nan" | "nanf" => parse("NaN"),
            _ => None,
        },
        Token::Number(n) => {
            let n = n.strip_suffix(['f', 'F']).filter(|s| !s.starts_with("0x")).unwrap_or(n);
            match parse_int(n) {
                // Integers are exact decimal literals; parse them as such.
                Some(_) if n.starts_with("0x") || (n.starts_with('0') && n.len() > 1) => {
                    parse_int(n).and_then(|v| parse(&v.to_string()))
                }
                _ => parse(n),
            }
        }
        _ => None,
    }
}

/// The default value of a type, for a map entry that omits its key or value.
fn default_box(t: &RuntimeType) -> ReflectValueBox {
    match t {
        RuntimeType::I32 => ReflectValueBox::I32(0),
        RuntimeType::I64 => ReflectValueBox::I64(0),
        RuntimeType::U32 => ReflectValueBox::U32(0),
        RuntimeType::U64 => ReflectValueBox::U64(0),
        RuntimeType::F32 => ReflectValueBox::F32(0.0),
        RuntimeType::F64 => ReflectValueBox::F64(0.0),
        RuntimeType::Bool => ReflectValueBox::Bool(false),
        RuntimeType::String => ReflectValueBox::String(String::new()),
        RuntimeType::VecU8 => ReflectValueBox::Bytes(Vec::new()),
        RuntimeType::Enum(e) => ReflectValueBox::Enum(e.clone(), 0),
        RuntimeType::Message(m) => ReflectValueBox::Message(m.new_instance()),
    }
}

/// Decimal, `0x` hex or leading-`0` octal, as protobuf's text format.
pub(crate) fn parse_int(s: &str) -> Option<i128> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return i128::from_str_radix(h, 16).ok();
    }
    if s.len() > 1 && s.starts_with('0') {
        return i128::from_str_radix(&s[1..], 8).ok();
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn describe(t: &Token<'_>) -> String {
    match t {
        Token::Ident(s) => format!("'{s}'"),
        Token::Number(s) => format!("'{s}'"),
        Token::Str(_) => "a string".into(),
        Token::Symbol(c) => format!("'{}'", *c as char),
        Token::Eof => "end of input".into(),
    }
}

/// Prints a message in TensorFlow's text layout.
pub fn print_message(msg: &dyn MessageDyn) -> String {
    let mut out = String::new();
    print_fields(&mut out, msg, 0);
    out
}

fn print_fields(out: &mut String, msg: &dyn MessageDyn, depth: usize) {
    let desc = msg.descriptor_dyn();
    let mut fields: Vec<FieldDescriptor> = desc.fields().collect();
    fields.sort_by_key(|f| f.number());
    for f in fields {
        match f.get_reflect(msg) {
            ReflectFieldRef::Optional(v) => {
                if let Some(v) = v.value() {
                    print_field(out, f.name(), &v, depth);
                }
            }
            ReflectFieldRef::Repeated(r) => {
                for v in &r {
                    print_field(out, f.name(), &v, depth);
                }
            }
            ReflectFieldRef::Map(m) => {
                let mut entries: Vec<(ReflectValueRef<'_>, ReflectValueRef<'_>)> = (&m).into_iter().collect();
                entries.sort_by(|a, b| map_key_cmp(&a.0, &b.0));
                for (k, v) in entries {
                    indent(out, depth);
                    out.push_str(f.name());
                    out.push_str(" {\n");
                    // Map entries are proto3 messages: default scalars are omitted.
                    if !is_default_scalar(&k) {
                        print_field(out, "key", &k, depth + 1);
                    }
                    if !is_default_scalar(&v) {
                        print_field(out, "value", &v, depth + 1);
                    }
                    indent(out, depth);
                    out.push_str("}\n");
                }
            }
        }
    }
}

fn is_default_scalar(v: &ReflectValueRef<'_>) -> bool {
    match v {
        ReflectValueRef::U32(x) => *x == 0,
        ReflectValueRef::U64(x) => *x == 0,
        ReflectValueRef::I32(x) => *x == 0,
        ReflectValueRef::I64(x) => *x == 0,
        ReflectValueRef::F32(x) => x.to_bits() == 0,
        ReflectValueRef::F64(x) => x.to_bits() == 0,
        ReflectValueRef::Bool(x) => !*x,
        ReflectValueRef::String(x) => x.is_empty(),
        ReflectValueRef::Bytes(x) => x.is_empty(),
        ReflectValueRef::Enum(_, n) => *n == 0,
        ReflectValueRef::Message(_) => false,
    }
}

fn map_key_cmp(a: &ReflectValueRef<'_>, b: &ReflectValueRef<'_>) -> std::cmp::Ordering {
    match (a, b) {
        (ReflectValueRef::String(a), ReflectValueRef::String(b)) => a.cmp(b),
        (ReflectValueRef::U32(a), ReflectValueRef::U32(b)) => a.cmp(b),
        (ReflectValueRef::I32(a), ReflectValueRef::I32(b)) => a.cmp(b),
        (ReflectValueRef::I64(a), ReflectValueRef::I64(b)) => a.cmp(b),
        (ReflectValueRef::U64(a), ReflectValueRef::U64(b)) => a.cmp(b),
        _ => std::cmp::Ordering::Equal,
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn print_field(out: &mut String, name: &str, v: &ReflectValueRef<'_>, depth: usize) {
    indent(out, depth);
    out.push_str(name);
    match v {
        ReflectValueRef::Message(m) => {
            out.push_str(" {\n");
            print_fields(out, &**m, depth + 1);
            indent(out, depth);
            out.push_str("}\n");
            return;
        }
        ReflectValueRef::U32(x) => write!(out, ": {x}").expect("write to String"),
        ReflectValueRef::U64(x) => write!(out, ": {x}").expect("write to String"),
        ReflectValueRef::I32(x) => write!(out, ": {x}").expect("write to String"),
        ReflectValueRef::I64(x) => write!(out, ": {x}").expect("write to String"),
        ReflectValueRef::F32(x) => write!(out, ": {}", format_float(f64::from(*x), true)).expect("write to String"),
        ReflectValueRef::F64(x) => write!(out, ": {}", format_float(*x, false)).expect("write to String"),
        ReflectValueRef::Bool(x) => write!(out, ": {x}").expect("write to String"),
        ReflectValueRef::String(s) => {
            out.push_str(": ");
            quote_bytes(out, s.as_bytes());
        }
        ReflectValueRef::Bytes(b) => {
            out.push_str(": ");
            quote_bytes(out, b);
        }
        ReflectValueRef::Enum(d, n) => match d.value_by_number(*n) {
            Some(v) => write!(out, ": {}", v.name()).expect("write to String"),
            None => write!(out, ": {n}").expect("write to String"),
        },
    }
    out.push('\n');
}

/// TensorFlow's C escaping: `\n \r \t \" \' \\`, other non-printable bytes
/// as three-digit octal.
pub fn quote_bytes(out: &mut String, b: &[u8]) {
    out.push('"');
    for &c in b {
        match c {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(c as char),
            _ => write!(out, "\\{c:03o}").expect("write to String"),
        }
    }
    out.push('"');
}

/// The shortest decimal that reads back as the same value (of `f32` when
/// `single`), laid out as Python's `repr` does — which is what
/// `tf.io.write_graph` emits, through Python's protobuf text printer:
/// `1.0`, `0.1`, `1e-07`, `1e+16`, `inf`, `-inf`, `nan`.
pub fn format_float(x: f64, single: bool) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Rust's `{:e}` gives the shortest digits that round-trip.
    let sci = if single { format!("{:e}", x as f32) } else { format!("{x:e}") };
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if !(-4..16).contains(&exp) {
        s.push_str(&digits[..1]);
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        write!(s, "e{sign}{:02}", exp.abs()).expect("write to String");
    } else if exp < 0 {
        s.push_str("0.");
        for _ in 0..(-exp - 1) {
            s.push('0');
        }
        s.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            s.push_str(&digits);
            for _ in digits.len()..int_len {
                s.push('0');
            }
            s.push_str(".0");
        } else {
            s.push_str(&digits[..int_len]);
            s.push('.');
            s.push_str(&digits[int_len..]);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_floats_like_pythons_repr() {
        assert_eq!(format_float(1.0, true), "1.0");
        assert_eq!(format_float(0.5, true), "0.5");
        assert_eq!(format_float(1e-7_f32 as f64, true), "1e-07");
        assert_eq!(format_float(1.5e-7_f32 as f64, true), "1.5e-07");
        assert_eq!(format_float(0.1_f32 as f64, true), "0.1");
        assert_eq!(format_float(-2.5, true), "-2.5");
        assert_eq!(format_float(1e6, true), "1000000.0");
        assert_eq!(format_float(1e16, true), "1e+16");
        assert_eq!(format_float(123456.0, true), "123456.0");
        assert_eq!(format_float(0.0001, true), "0.0001");
        assert_eq!(format_float(-0.0, true), "-0.0");
        assert_eq!(format_float(f64::NEG_INFINITY, true), "-inf");
        for x in [0.1f32, f32::MAX, f32::MIN_POSITIVE, 1e-45, 16777216.0, 0.333_333_34] {
            let s = format_float(f64::from(x), true);
            assert_eq!(s.parse::<f32>().unwrap().to_bits(), x.to_bits(), "{s}");
        }
    }

    #[test]
    fn lexes_escapes_and_reports_bad_ones() {
        let mut lx = Lexer::new(r#""a\101\x42\n\'\"" 'c'"#);
        assert_eq!(lx.next().unwrap().0, Token::Str(b"aAB\n'\"c".to_vec()));
        let mut lx = Lexer::new("\n  \"ab\\qc\"");
        let e = lx.next().unwrap_err();
        assert_eq!(e.span, Span { line: 2, column: 6 });
        assert!(e.message.contains("bad escape '\\q'"), "{e}");
    }
}
