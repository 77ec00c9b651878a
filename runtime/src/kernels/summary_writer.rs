//! TensorFlow 2's summary writers (`summary_kernels.cc`, `summary_file_writer.cc`,
//! `events_writer.cc`): what `tf.summary.create_file_writer` and `tf.summary.write` /
//! `.scalar` / `.histogram` inside a `tf.function` put in a training step.
//!
//! A writer is a session resource ([`SummaryWriters`], held by the [`VariableStore`]) named
//! by `(container, shared_name)` — the node's name when `shared_name` is empty —, its handle
//! a scalar `resource` tensor holding `SUMW`, the container, a NUL and the name (as lookup
//! tables do), so sessions built from one another share it. `CreateSummaryFileWriter` opens
//! `<logdir>/events.out.tfevents.<seconds, 10 digits>.<hostname><filename_suffix>` (the
//! directory made as needed; a name already taken gets `.1`, `.2`, … — never overwritten) and writes the `brain.Event:2` version record; creating an open
//! writer again does nothing, as TensorFlow's `LookupOrCreateResource`. Each write appends
//! one `Event { wall_time, step, summary }` as a TFRecord (length, masked CRC-32C of the
//! length, the bytes, masked CRC-32C of the bytes), the `Summary` what TensorFlow's writer
//! builds: `WriteSummary` a `Value { tag, tensor (AsProtoTensorContent; strings as
//! string_val), metadata (when not empty) }`, `WriteScalarSummary` a `simple_value`,
//! `WriteHistogramSummary` a histogram with TensorFlow's default buckets,
//! `WriteRawProtoSummary` the given `Summary` bytes. Records go through a buffer that
//! `FlushSummaryWriter`, `CloseSummaryWriter` and the session's end flush.
//!
//! A writer created outside the graph — `tf.summary.create_file_writer` run eagerly, its
//! writer *captured* by the function (a resource `Placeholder` in the exported graph) — has no
//! log directory here: the `captured-writers` pass makes it a `SummaryWriter` marked
//! `_autoclust_captured`, whose writes go to `run --summary-dir`'s directory when given (a
//! file per writer, opened on its first write) and are otherwise dropped (counted), which
//! `run` says in a `note:`.
//! A write to a writer that was never created is TensorFlow's error.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use autoclust_graph::{AttrValue, Node, Tensor};
use parking_lot::Mutex;

use super::resource::StatefulFn;
use super::string::strings;
use super::wire::{put_bytes, put_message, put_varint};
use super::{arity, Inputs, Outputs};
use crate::error::{KResult, KernelError};
use crate::variables::VariableStore;

use autoclust_graph::protocol::CAPTURED_WRITER_ATTR as CAPTURED_ATTR;

const MAGIC: &[u8; 4] = b"SUMW";

/// An open event file.
#[derive(Debug)]
struct EventFile {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

#[derive(Debug, Default)]
struct Writer {
    /// Made for a writer the graph captured from outside: writes are dropped.
    captured: bool,
    file: Option<EventFile>,
    /// Writes dropped by a captured writer.
    dropped: u64,
}

type SharedWriter = Arc<Mutex<Writer>>;

/// The summary writers of a session, by `(container, name)`.
#[derive(Debug, Default)]
pub struct SummaryWriters {
    writers: Mutex<HashMap<(String, String), SharedWriter>>,
    /// Where captured writers write (`run --summary-dir`); `None`: they drop their summaries.
    captured_dir: Mutex<Option<PathBuf>>,
}

impl SummaryWriters {
    /// Makes the writers captured from outside the graph write their events under `dir`
    /// (each its own file, opened on its first write).
    pub fn set_captured_dir(&self, dir: PathBuf) {
        *self.captured_dir.lock() = Some(dir);
    }

    /// Makes `other`'s writers this session's too (the same writers, not copies).
    pub fn adopt(&self, other: &SummaryWriters) {
        let theirs = other.writers.lock();
        let mut ours = self.writers.lock();
        for (k, w) in theirs.iter() {
            ours.entry(k.clone()).or_insert_with(|| w.clone());
        }
    }

    /// Writes every buffered record to its file.
    pub fn flush_all(&self) -> std::io::Result<()> {
        for w in self.writers.lock().values() {
            if let Some(f) = &mut w.lock().file {
                f.out.flush()?;
            }
        }
        Ok(())
    }

    /// The writers captured from outside the graph that dropped writes, with how many each.
    pub fn dropped(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .writers
            .lock()
            .iter()
            .filter_map(|((_, name), w)| {
                let w = w.lock();
                (w.captured && w.dropped > 0).then(|| (name.clone(), w.dropped))
            })
            .collect();
        out.sort();
        out
    }

    fn get(&self, handle: &Tensor) -> KResult<SharedWriter> {
        let key = decode_handle(handle)?;
        self.writers.lock().get(&key).cloned().ok_or_else(|| {
            KernelError::invalid(format!(
                "summary writer '{}' does not exist (its SummaryWriter op did not run)",
                key.1
            ))
        })
    }
}

impl Drop for SummaryWriters {
    fn drop(&mut self) {
        // Best effort, as TensorFlow's writer flushes when the resource is destroyed.
        let _ = self.flush_all();
    }
}

fn handle_tensor(container: &str, name: &str) -> Tensor {
    super::resource::named_handle(MAGIC, container, name)
}

fn decode_handle(t: &Tensor) -> KResult<(String, String)> {
    super::resource::decode_named_handle(MAGIC, t)
        .ok_or_else(|| KernelError::invalid(format!("expected a summary writer handle, got a {} tensor", t.dtype)))
}

fn scalar_string(t: &Tensor, what: &str) -> KResult<Vec<u8>> {
    match strings(t, what)? {
        [s] if t.shape.is_empty() => Ok(s.clone()),
        _ => Err(KernelError::invalid(format!("{what} must be a scalar string"))),
    }
}

fn scalar_i64(t: &Tensor, what: &str) -> KResult<i64> {
    match t.to_i64_vec().as_deref() {
        Some([x]) if t.shape.is_empty() => Ok(*x),
        _ => Err(KernelError::invalid(format!("{what} must be an integer scalar, got a {} tensor", t.dtype))),
    }
}

fn wall_time() -> f64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_micros() as f64 / 1e6
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// An `Event` (`event.proto`): `wall_time` (1, double), `step` (2, left out when 0, proto3),
/// then `file_version` (3) or `summary` (5).
pub(crate) fn event(wall_time: f64, step: i64, file_version: Option<&str>, summary: Option<&[u8]>) -> Vec<u8> {
    let mut e = vec![0x09];
    e.extend_from_slice(&wall_time.to_le_bytes());
    if step != 0 {
        put_varint(&mut e, 2 << 3);
        put_varint(&mut e, step as u64);
    }
    if let Some(v) = file_version {
        put_bytes(&mut e, 3, v.as_bytes());
    }
    if let Some(s) = summary {
        put_message(&mut e, 5, s);
    }
    e
}

/// One TFRecord: length, masked CRC-32C of the length, the data, masked CRC-32C of the data.
pub(crate) fn record(data: &[u8]) -> Vec<u8> {
    use autoclust_graphdef::crc32c;
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc32c::mask(crc32c::value(&len)).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32c::mask(crc32c::value(data)).to_le_bytes());
    out
}

impl Writer {
    fn open(&mut self, logdir: &str, suffix: &str) -> KResult<()> {
        if self.file.is_some() || self.captured {
            return Ok(());
        }
        let io = |what: &str, e: std::io::Error| KernelError::invalid(format!("{what}: {e}"));
        std::fs::create_dir_all(logdir).map_err(|e| io(&format!("cannot make the log directory '{logdir}'"), e))?;
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
        // A new file, never an existing one: two writers opened on one directory in one second
        // with one suffix (or another process's file) get `.1`, `.2`, … after the name.
        let base = format!("events.out.tfevents.{secs:010}.{}{suffix}", hostname());
        let mut k = 0;
        let (path, file) = loop {
            let name = if k == 0 { base.clone() } else { format!("{base}.{k}") };
            let path = PathBuf::from(logdir).join(name);
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => break (path, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && k < 1000 => k += 1,
                Err(e) => return Err(io(&format!("cannot create '{}'", path.display()), e)),
            }
        };
        let mut out = std::io::BufWriter::new(file);
        out.write_all(&record(&event(wall_time(), 0, Some("brain.Event:2"), None)))
            .map_err(|e| io(&format!("cannot write '{}'", path.display()), e))?;
        self.file = Some(EventFile { path, out });
        Ok(())
    }

    /// Appends one event holding `summary` (a serialized `Summary`).
    /// A captured writer opens its file under `captured_dir` (when set) on its first write.
    fn write(&mut self, step: i64, summary: &[u8], name: &str, captured_dir: Option<&PathBuf>) -> KResult<()> {
        match &mut self.file {
            Some(f) => f
                .out
                .write_all(&record(&event(wall_time(), step, None, Some(summary))))
                .map_err(|e| KernelError::invalid(format!("cannot write '{}': {e}", f.path.display()))),
            None if self.captured => match captured_dir {
                Some(dir) => {
                    // Python's suffix for a writer: `.<pid>.<count>.v2`, so two writers opened in
                    // one second do not share a file.
                    static OPENED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                    let k = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.captured = false;
                    if let Err(e) = self.open(&dir.to_string_lossy(), &format!(".{}.{k}.v2", std::process::id())) {
                        self.captured = true;
                        return Err(e);
                    }
                    self.write(step, summary, name, None)
                }
                None => {
                    self.dropped += 1;
                    Ok(())
                }
            },
            None => Err(KernelError::invalid(format!(
                "summary writer '{name}' was not created: CreateSummaryFileWriter must run before it is written"
            ))),
        }
    }

    fn flush(&mut self) -> KResult<()> {
        if let Some(f) = &mut self.file {
            f.out.flush().map_err(|e| KernelError::invalid(format!("cannot write '{}': {e}", f.path.display())))?;
        }
        Ok(())
    }
}

/// Whether `op` is a summary writer op (its kernel is [`prepare`]'s).
pub fn is_writer_op(op: &str) -> bool {
    !matches!(prepare(&super::probe(op)), Ok(None))
}

/// The summary writer ops' kernels, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<StatefulFn>> {
    let name = node.name.clone();
    let f: StatefulFn = match node.op.as_str() {
        "SummaryWriter" => {
            let (container, name) = autoclust_graph::effects::resource_key(node);
            let key = (container.to_string(), name.to_string());
            let captured = matches!(node.attr(CAPTURED_ATTR), Some(AttrValue::B(true)));
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(&inp, 0)?;
                let mut all = store.summary_writers().writers.lock();
                all.entry(key.clone())
                    .or_insert_with(|| Arc::new(Mutex::new(Writer { captured, ..Writer::default() })));
                Ok(std::iter::once(handle_tensor(&key.0, &key.1)).collect())
            })
        }
        "CreateSummaryFileWriter" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 5)?;
            let writer = store.summary_writers().get(&inp[0])?;
            let logdir = String::from_utf8_lossy(&scalar_string(&inp[1], "logdir")?).into_owned();
            let suffix = String::from_utf8_lossy(&scalar_string(&inp[4], "filename_suffix")?).into_owned();
            writer.lock().open(&logdir, &suffix)?;
            Ok(Outputs::new())
        }),
        "WriteSummary" | "WriteScalarSummary" | "WriteHistogramSummary" | "WriteRawProtoSummary" => {
            let op = node.op.clone();
            Box::new(move |store: &VariableStore, inp: Inputs| {
                arity(
                    &inp,
                    if op == "WriteSummary" {
                        5
                    } else if op == "WriteRawProtoSummary" {
                        3
                    } else {
                        4
                    },
                )?;
                let writer = store.summary_writers().get(&inp[0])?;
                let step = scalar_i64(&inp[1], "step")?;
                let summary = match op.as_str() {
                    "WriteSummary" => {
                        let metadata = scalar_string(&inp[4], "summary_metadata")?;
                        super::summary::tensor_value_summary(
                            &inp[3],
                            &inp[2],
                            Some(metadata.as_slice()).filter(|m| !m.is_empty()),
                        )?
                    }
                    "WriteScalarSummary" => {
                        if !inp[3].shape.is_empty() {
                            return Err(KernelError::invalid("value must be a scalar"));
                        }
                        super::summary::scalar_summary(&inp[2], &inp[3])?
                    }
                    "WriteHistogramSummary" => super::summary::histogram_summary(&inp[2], &inp[3], &name)?,
                    _ => scalar_string(&inp[2], "tensor")?,
                };
                let (_, writer_name) = decode_handle(&inp[0])?;
                let dir = store.summary_writers().captured_dir.lock().clone();
                writer.lock().write(step, &summary, &writer_name, dir.as_ref())?;
                Ok(Outputs::new())
            })
        }
        "FlushSummaryWriter" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 1)?;
            store.summary_writers().get(&inp[0])?.lock().flush()?;
            Ok(Outputs::new())
        }),
        // TensorFlow deletes the resource: its file is flushed and closed, later writes fail
        // until a `SummaryWriter` and `CreateSummaryFileWriter` make it again (a new file).
        "CloseSummaryWriter" => Box::new(move |store: &VariableStore, inp: Inputs| {
            arity(&inp, 1)?;
            let writers = store.summary_writers();
            let writer = writers.get(&inp[0])?;
            let mut w = writer.lock();
            w.flush()?;
            w.file = None;
            drop(w);
            writers.writers.lock().remove(&decode_handle(&inp[0])?);
            Ok(Outputs::new())
        }),
        _ => return Ok(None),
    };
    Ok(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoclust_graphdef::crc32c;

    fn node(op: &str, attrs: &[(&str, AttrValue)]) -> Node {
        Node::unconnected(op, op, attrs)
    }

    fn run(f: &StatefulFn, store: &VariableStore, inp: Vec<Tensor>) -> KResult<Outputs> {
        f(store, inp.into_iter().collect())
    }

    fn string(s: &str) -> Tensor {
        Tensor::from_strings(vec![], vec![s.as_bytes().to_vec()]).unwrap()
    }

    /// The records of an event file, each checked against its two CRCs.
    fn records(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let len_bytes = &bytes[at..at + 8];
            let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
            assert_eq!(crc32c::unmask(crc), crc32c::value(len_bytes));
            let data = &bytes[at + 12..at + 12 + len];
            let crc = u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap());
            assert_eq!(crc32c::unmask(crc), crc32c::value(data));
            out.push(data.to_vec());
            at += 16 + len;
        }
        out
    }

    /// A file writer writes the version record, then one event per write, TensorFlow's bytes
    /// but for the wall time; a captured writer drops its writes and counts them.
    #[test]
    fn a_file_writer_writes_tfrecords_of_events() {
        let dir = std::env::temp_dir().join(format!("autoclust_summary_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = VariableStore::new();
        let make = prepare(&node("SummaryWriter", &[("shared_name", AttrValue::S(b"w".to_vec()))])).unwrap().unwrap();
        let h = run(&make, &store, vec![]).unwrap()[0].clone();
        let write = prepare(&node("WriteScalarSummary", &[])).unwrap().unwrap();
        let err = run(&write, &store, vec![h.clone(), Tensor::scalar_i64(3), string("loss"), Tensor::scalar_f32(0.5)]);
        assert!(err.unwrap_err().to_string().contains("was not created"));
        let create = prepare(&node("CreateSummaryFileWriter", &[])).unwrap().unwrap();
        let logdir = string(dir.to_str().unwrap());
        let args = vec![h.clone(), logdir, Tensor::scalar_i32(10), Tensor::scalar_i32(100), string(".v2")];
        run(&create, &store, args.clone()).unwrap();
        run(&create, &store, args).unwrap(); // already open: nothing happens
        run(&write, &store, vec![h.clone(), Tensor::scalar_i64(3), string("loss"), Tensor::scalar_f32(0.5)]).unwrap();
        let flush = prepare(&node("FlushSummaryWriter", &[])).unwrap().unwrap();
        run(&flush, &store, vec![h]).unwrap();
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1);
        let name = files[0].file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with("events.out.tfevents.") && name.ends_with(".v2"), "{name}");
        let recs = records(&std::fs::read(&files[0]).unwrap());
        assert_eq!(recs.len(), 2);
        // Wall time (9 bytes), then the version string.
        assert_eq!(&recs[0][9..], b"\x1a\x0dbrain.Event:2");
        // Wall time, step 3, summary { value { tag "loss", simple_value 0.5 } }.
        assert_eq!(&recs[1][9..], b"\x10\x03\x2a\x0d\x0a\x0b\x0a\x04loss\x15\x00\x00\x00\x3f");
        let _ = std::fs::remove_dir_all(&dir);

        // Two writers on one directory with one suffix, opened in one second: two files. A
        // closed writer is gone (writes fail); made and opened again, it starts a new file.
        let dir2 = std::env::temp_dir().join(format!("autoclust_summary2_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir2);
        let args = |h: &Tensor| {
            vec![
                h.clone(),
                string(dir2.to_str().unwrap()),
                Tensor::scalar_i32(10),
                Tensor::scalar_i32(100),
                string(".v2"),
            ]
        };
        let a = run(
            &prepare(&node("SummaryWriter", &[("shared_name", AttrValue::S(b"a".to_vec()))])).unwrap().unwrap(),
            &store,
            vec![],
        )
        .unwrap()[0]
            .clone();
        let b = run(
            &prepare(&node("SummaryWriter", &[("shared_name", AttrValue::S(b"b".to_vec()))])).unwrap().unwrap(),
            &store,
            vec![],
        )
        .unwrap()[0]
            .clone();
        run(&create, &store, args(&a)).unwrap();
        run(&create, &store, args(&b)).unwrap();
        assert_eq!(std::fs::read_dir(&dir2).unwrap().count(), 2);
        let close = prepare(&node("CloseSummaryWriter", &[])).unwrap().unwrap();
        run(&close, &store, vec![a.clone()]).unwrap();
        let after = run(&write, &store, vec![a, Tensor::scalar_i64(1), string("x"), Tensor::scalar_f32(1.0)]);
        assert!(after.unwrap_err().to_string().contains("does not exist"));
        let _ = std::fs::remove_dir_all(&dir2);

        let captured = prepare(&node("SummaryWriter", &[(CAPTURED_ATTR, AttrValue::B(true))])).unwrap().unwrap();
        let c = run(&captured, &store, vec![]).unwrap()[0].clone();
        run(&write, &store, vec![c.clone(), Tensor::scalar_i64(1), string("x"), Tensor::scalar_f32(1.0)]).unwrap();
        run(&write, &store, vec![c, Tensor::scalar_i64(2), string("x"), Tensor::scalar_f32(1.0)]).unwrap();
        assert_eq!(store.summary_writers().dropped(), vec![("SummaryWriter".to_string(), 2)]);
    }
}
