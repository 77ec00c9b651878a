//! The protobuf wire format, read and written by hand where a kernel meets a serialized
//! message: `tf.train.Example` parsing (`example.rs`) and TF1's `Summary` protos
//! (`summary.rs`). The reader refuses what C++'s parser refuses structurally (a truncated
//! varint or payload, field number 0, groups and unknown wire types); the writer emits
//! fields in the order it is called, which callers keep to field-number order, as C++'s
//! serializer does.

/// A protobuf reader over one message's bytes.
pub(crate) struct Wire<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A field's payload.
pub(crate) enum Payload<'a> {
    Varint(u64),
    Fixed32([u8; 4]),
    Fixed64,
    Bytes(&'a [u8]),
}

impl<'a> Wire<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Wire<'a> {
        Wire { bytes, at: 0 }
    }

    /// Whether every byte has been read.
    pub(crate) fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    pub(crate) fn varint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let &b = self.bytes.get(self.at).ok_or("truncated varint")?;
            self.at += 1;
            if shift == 63 && b > 1 {
                return Err("varint too long");
            }
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long")
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("truncated field")?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// The next field's number and payload, `None` at the end.
    pub(crate) fn field(&mut self) -> Result<Option<(u64, Payload<'a>)>, &'static str> {
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        let tag = self.varint()?;
        if tag >> 3 == 0 {
            return Err("field number 0");
        }
        let payload = match tag & 7 {
            0 => Payload::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Payload::Fixed64
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                Payload::Bytes(self.take(n)?)
            }
            5 => Payload::Fixed32(self.take(4)?.try_into().expect("four bytes")),
            _ => return Err("unsupported wire type"),
        };
        Ok(Some((tag >> 3, payload)))
    }
}

/// Appends `x` as a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// A length-delimited field, left out when empty (proto3 strings, bytes and packed lists).
pub(crate) fn put_bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    if !b.is_empty() {
        put_message(out, field, b);
    }
}

/// A length-delimited field, always written (a message field that is set, a repeated entry).
pub(crate) fn put_message(out: &mut Vec<u8>, field: u64, b: &[u8]) {
    put_varint(out, field << 3 | 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}
