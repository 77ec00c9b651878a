//! Reading graphs by extension or `--format`, writing them in any format,
//! and writing outputs without ever leaving a partial file (write to a
//! temporary file beside the target, then rename).
//!
//! Every load error becomes one line `FILE:LINE:COL: message` (or `FILE:
//! message` when there is no line, as in a binary `.pb`). A loaded graph is
//! a DAG: a cycle is reported with its nodes, at the first one's line.

use std::io::Read;
use std::path::{Path, PathBuf};

use autoclust_graph::{Graph, Span};

use crate::CliError;

/// A graph file format (docs/contract.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// GraphDef in protobuf text format (`.pbtxt`).
    Pbtxt,
    /// Binary GraphDef (`.pb`).
    Pb,
    /// The native text format (`.graph`).
    Native,
    /// A SavedModel directory (`saved_model.pb` + `variables/`).
    #[value(name = "savedmodel")]
    SavedModel,
}

impl Format {
    /// The format a file name's extension names.
    pub fn from_extension(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "pbtxt" => Some(Format::Pbtxt),
            "pb" => Some(Format::Pb),
            "graph" => Some(Format::Native),
            _ => None,
        }
    }

    /// The format of `path`: `over` if given, else SavedModel for a
    /// directory, else its extension.
    pub fn for_path(path: &Path, over: Option<Format>) -> Result<Format, CliError> {
        let dir = || (!is_stdin(path) && path.is_dir()).then_some(Format::SavedModel);
        over.or_else(dir).or_else(|| Format::from_extension(path)).ok_or_else(|| {
            CliError::usage(format!(
                "{}: cannot tell the format from the extension (use .pbtxt, .pb, .graph or a SavedModel directory, or --format pbtxt|pb|native|savedmodel)",
                path.display()
            ))
        })
    }
}

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Whether `path` names an existing file that is not a regular file (a device such as
/// `/dev/null`, a FIFO, a socket): written in place, never replaced by a rename.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// The name errors use for a path.
fn shown(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// `FILE:LINE:COL: message` when the error has a position (its `Display`
/// then starts with `LINE:COL: `), else `FILE: message`.
fn located(file: &str, span: Option<Span>, e: impl std::fmt::Display) -> CliError {
    match span {
        Some(_) => CliError::input(format!("{file}:{e}")),
        None => CliError::input(format!("{file}: {e}")),
    }
}

/// Guesses the format of standard input: binary if not UTF-8, GraphDef
/// text if it starts with a GraphDef field, else native.
fn sniff(bytes: &[u8]) -> Format {
    let Ok(text) = std::str::from_utf8(bytes) else { return Format::Pb };
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
    let word: String = first.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let rest = first[word.len()..].trim_start();
    if matches!(word.as_str(), "node" | "library" | "versions" | "version")
        && (rest.starts_with('{') || rest.starts_with(':'))
    {
        Format::Pbtxt
    } else {
        Format::Native
    }
}

/// Reads a graph; `-` is standard input. The format follows from the
/// extension unless `format` overrides it (standard input is sniffed).
/// Errors name the file and line. The graph is checked to be a DAG.
/// [`load_graph`] for the commands that execute a graph (`run`, `bench`): reference variables
/// (`VariableV2`, TF1's default) are turned into resource variables first
/// ([`autoclust_passes::ref_variables`]); other commands see the graph as written.
pub fn load_graph_to_run(path: &Path, format: Option<Format>) -> Result<Graph, CliError> {
    to_run(load_graph(path, format)?, path)
}

/// `graph` (loaded from `path`) as the commands that execute it need it: every known op's
/// arity and every edge's dtype checked (`infer::check_arities`, `infer::check_edge_dtypes`:
/// TensorFlow refuses such a graph at import, whether or not a step runs the node), reference
/// variables turned into resource variables, and the lookup tables a TF2 function captures
/// but fills itself created by the graph ([`autoclust_passes::captured_tables`]), and the
/// summary writers it captures made writers whose events are dropped
/// ([`autoclust_passes::captured_writers`]), and the collectives of a multi-device step whose
/// peers are all in the graph replaced by what they compute ([`autoclust_passes::collectives`]).
pub fn to_run(graph: Graph, path: &Path) -> Result<Graph, CliError> {
    autoclust_graph::infer::check_arities(&graph)
        .and_then(|()| autoclust_graph::infer::check_edge_dtypes(&graph))
        .map_err(|e| located(&shown(path), e.span(), &e))?;
    let graph = match autoclust_passes::ref_variables::ref_to_resource(&graph) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) => graph,
        Err(e) => return Err(CliError::input(format!("{}: {e}", shown(path)))),
    };
    let graph = match autoclust_passes::collectives::pair_collectives(&graph) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) => graph,
        Err(e) => return Err(CliError::input(format!("{}: {e}", shown(path)))),
    };
    let graph = autoclust_passes::captured_tables::create_captured_tables(&graph).unwrap_or(graph);
    Ok(autoclust_passes::captured_writers::create_captured_writers(&graph).unwrap_or(graph))
}

pub fn load_graph(path: &Path, format: Option<Format>) -> Result<Graph, CliError> {
    let _span = tracing::info_span!("load_graph", path = %path.display()).entered();
    let file = shown(path);
    if !is_stdin(path) && Format::for_path(path, format)? == Format::SavedModel {
        // The graph alone: these commands read no variable (`run` loads the model whole).
        let graph = autoclust_graphdef::saved_model::load_saved_model_graph(path)
            .map_err(|e| CliError::input(e.to_string()))?;
        check_acyclic(&graph, &file)?;
        return Ok(graph);
    }
    let bytes = if is_stdin(path) {
        let mut b = Vec::new();
        std::io::stdin().read_to_end(&mut b).map_err(|e| CliError::input(format!("{file}: cannot read: {e}")))?;
        b
    } else {
        std::fs::read(path).map_err(|e| CliError::input(format!("{file}: cannot read: {e}")))?
    };
    let format = match (format, is_stdin(path)) {
        (Some(f), _) => f,
        (None, true) => sniff(&bytes),
        (None, false) => Format::for_path(path, None)?,
    };
    let text = |bytes: &[u8]| -> Result<String, CliError> {
        String::from_utf8(bytes.to_vec()).map_err(|e| {
            let upto = &bytes[..e.utf8_error().valid_up_to()];
            let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
            CliError::input(format!("{file}:{line}: not valid UTF-8 text"))
        })
    };
    let graph = match format {
        Format::Pbtxt => autoclust_graphdef::parse_pbtxt(&text(&bytes)?).map_err(|e| located(&file, e.span(), &e))?,
        Format::Pb => autoclust_graphdef::parse_pb(&bytes).map_err(|e| located(&file, e.span(), &e))?,
        Format::Native => {
            autoclust_graph::text::parse_graph(&text(&bytes)?).map_err(|e| located(&file, e.span(), &e))?
        }
        Format::SavedModel => {
            return Err(CliError::usage(format!(
                "{file}: a SavedModel is a directory; it cannot come from standard input"
            )))
        }
    };
    check_acyclic(&graph, &file)?;
    tracing::debug!(nodes = graph.len(), functions = graph.library.functions.len(), "loaded");
    Ok(graph)
}

/// Reads the SavedModel directory `dir` (graph, signatures, variables from its checkpoint).
pub fn load_saved_model(dir: &Path) -> Result<autoclust_graphdef::saved_model::SavedModel, CliError> {
    autoclust_graphdef::saved_model::load_saved_model(dir).map_err(|e| CliError::input(e.to_string()))
}

/// The checks every loaded graph passes: every `node:port` input names an output its
/// producer has (where the producer's op says how many), in function bodies too,
/// function calls nest at most
/// `limits::MAX_CALL_DEPTH` levels, and the graph is a DAG (a cycle is reported with its nodes).
pub fn check_acyclic(graph: &Graph, file: &str) -> Result<(), CliError> {
    if let Err(e) = graph.check_ports().and_then(|()| graph.check_call_depth()) {
        return Err(located(file, e.span(), e));
    }
    if let Err(e) = autoclust_graph::function::check_function_ports(&graph.library) {
        return Err(CliError::input(format!("{file}: {e}")));
    }
    if let Err(cycle) = graph.topo_order() {
        let span = cycle.nodes.first().and_then(|n| graph.find(n)).and_then(|id| graph.node(id).span);
        return Err(match span {
            Some(s) => CliError::input(format!("{file}:{s}: {cycle}")),
            None => CliError::input(format!("{file}: {cycle}")),
        });
    }
    Ok(())
}

/// A graph written in `format`.
pub fn graph_to_bytes(graph: &Graph, format: Format) -> Result<Vec<u8>, CliError> {
    Ok(match format {
        Format::Pbtxt => autoclust_graphdef::to_pbtxt(graph).into_bytes(),
        Format::Pb => autoclust_graphdef::to_pb(graph),
        Format::Native => autoclust_graph::text::print_graph(graph).into_bytes(),
        Format::SavedModel => {
            return Err(CliError::usage("writing a SavedModel is not supported (write .pbtxt, .pb or .graph)"))
        }
    })
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, then a rename, so a failed command leaves no partial file.
/// `-` writes to standard output.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    if is_stdin(path) {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|()| out.flush())
            .map_err(|e| CliError::input(format!("<stdout>: cannot write: {e}")));
    }
    if is_special(path) {
        // `/dev/null`, a FIFO, a terminal: written in place (a rename would replace the
        // device node itself with a regular file).
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())));
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file_name = path.file_name().ok_or_else(|| CliError::input(format!("{}: not a file path", path.display())))?;
    let tmp = dir.join(format!(".{}.tmp{}", file_name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::input(format!("{}: cannot write: {e}", path.display()))
    })
}

/// Writes every `(path, bytes)` or none: each file goes to a temporary
/// beside its destination first, and only when all of them are written are
/// they renamed into place, so a failure (a missing directory, a full disk)
/// leaves no output file behind, not even the ones that could be written.
pub fn write_all_atomic(files: &[(&Path, &[u8])]) -> Result<(), CliError> {
    use std::io::Write;
    let mut staged: Vec<(PathBuf, &Path)> = Vec::with_capacity(files.len());
    let discard = |staged: &[(PathBuf, &Path)]| {
        for (tmp, _) in staged {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for &(path, bytes) in files {
        if is_stdin(path) || is_special(path) {
            continue;
        }
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let Some(file_name) = path.file_name() else {
            discard(&staged);
            return Err(CliError::input(format!("{}: not a file path", path.display())));
        };
        let tmp = dir.join(format!(".{}.tmp{}", file_name.to_string_lossy(), std::process::id()));
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            discard(&staged);
            return Err(CliError::input(format!("{}: cannot write: {e}", path.display())));
        }
        staged.push((tmp, path));
    }
    for (i, (tmp, path)) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(tmp, path) {
            discard(&staged[i..]);
            return Err(CliError::input(format!("{}: cannot write: {e}", path.display())));
        }
    }
    for &(path, bytes) in files.iter().filter(|(p, _)| is_stdin(p) || is_special(p)) {
        write_atomic(path, bytes)?;
    }
    Ok(())
}

/// Checks, before anything runs, that the output files a command was given
/// can be written and do not collide: two options naming one file (which
/// would silently keep only the last) is a usage error, and so is a
/// destination whose directory does not exist (unless `created` says the
/// command creates it). `outputs` pairs each path with the option that named it.
pub fn check_outputs(outputs: &[(&str, &Path)], created: &[&Path]) -> Result<(), CliError> {
    let key = |p: &Path| -> PathBuf {
        let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        match (abs.parent().and_then(|d| std::fs::canonicalize(d).ok()), abs.file_name()) {
            (Some(dir), Some(name)) => dir.join(name),
            _ => abs,
        }
    };
    for (i, &(opt_a, a)) in outputs.iter().enumerate() {
        if is_stdin(a) {
            continue;
        }
        for &(opt_b, b) in &outputs[..i] {
            if !is_stdin(b) && key(a) == key(b) {
                return Err(CliError::usage(format!(
                    "{opt_b} and {opt_a} both name {}: give each its own file",
                    a.display()
                )));
            }
        }
        let dir = a.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !dir.is_dir() && !created.contains(&dir) {
            return Err(CliError::usage(format!(
                "{opt_a} {}: directory {} does not exist",
                a.display(),
                dir.display()
            )));
        }
        if a.is_dir() {
            return Err(CliError::usage(format!("{opt_a} {}: is a directory", a.display())));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_follow_extensions() {
        assert_eq!(Format::from_extension(Path::new("a/b.pbtxt")), Some(Format::Pbtxt));
        assert_eq!(Format::from_extension(Path::new("b.pb")), Some(Format::Pb));
        assert_eq!(Format::from_extension(Path::new("b.graph")), Some(Format::Native));
        assert_eq!(Format::from_extension(Path::new("b.txt")), None);
        assert_eq!(Format::for_path(Path::new("b.txt"), Some(Format::Pb)).unwrap(), Format::Pb);
        assert_eq!(Format::for_path(Path::new("b.txt"), None).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn sniffs_standard_input() {
        assert_eq!(sniff(b"# c\nnode {\n  name: \"a\"\n}\n"), Format::Pbtxt);
        assert_eq!(sniff(b"node = Const()\n"), Format::Native);
        assert_eq!(sniff(b"versions producer=1 min_consumer=0\n"), Format::Native);
        assert_eq!(sniff(b"versions {\n producer: 1\n}\n"), Format::Pbtxt);
        assert_eq!(sniff(&[0x0a, 0xff, 0xfe]), Format::Pb);
    }
}
