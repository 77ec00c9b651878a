//! `note:` lines (docs/contract.md, "Never silent"): when `run`, `bench` or
//! `compile` fall short of what the graph allows, they say so on stderr, one
//! line per cause naming the node, whatever `RUST_LOG` says.
//!
//! Causes: a node the clusterer declined because its types could not be
//! worked out, a cluster left unencapsulated, the whole graph left
//! unclustered for a reason other than "nothing to cluster", and a cluster
//! that ran in the interpreter instead of compiled code (known only once it
//! has been called, so reported after the first step). Nodes kept out by
//! design (feeds, handles, ops with no lowering) give no note: `cluster
//! --explain` lists those. Stdout is never touched.

use std::collections::BTreeMap;

use autoclust_runtime::{FunctionStatus, Jit};

/// Most notes printed for one cause family before summarising the rest.
const MAX_NOTES: usize = 40;

/// What the clustered path did with a graph: the clusters it runs and what
/// it left out, for `note:` lines and `bench --json`.
#[derive(Clone, Debug, Default)]
pub struct ClusterReport {
    /// `(cluster, function)` of every encapsulated cluster.
    pub clusters: Vec<(String, String)>,
    /// Nodes in encapsulated clusters.
    pub clustered_nodes: usize,
    /// Nodes of the graph the request runs (after pruning).
    pub total_nodes: usize,
    /// Shortfalls found before running (without the `note: ` prefix).
    pub notes: Vec<String>,
}

/// How the clusters of a report ran so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterCounts {
    pub compiled: usize,
    pub interpreted: usize,
    /// Clusters no step called (in a branch not taken, a loop that never ran).
    pub uncalled: usize,
}

impl ClusterReport {
    /// Why the clustered path runs the plain executor instead, when it does (no cluster
    /// formed, or the pipeline gave up): what a failing first step must still say, since
    /// the failure may be the plain executor's (an op it has no kernel for) where the
    /// compiled program would have run.
    pub fn fallback_notes(&self) -> &[String] {
        if self.clusters.is_empty() {
            &self.notes
        } else {
            &[]
        }
    }

    /// Counts the clusters that ran compiled, those that (at least once) ran in the
    /// interpreter, and those never called.
    pub fn counts(&self, jit: &Jit) -> ClusterCounts {
        let status = jit.function_status();
        let mut counts = ClusterCounts::default();
        for (_, function) in &self.clusters {
            match status.get(function) {
                Some(FunctionStatus::Compiled) => counts.compiled += 1,
                Some(FunctionStatus::Interpreted { .. }) => counts.interpreted += 1,
                None => counts.uncalled += 1,
            }
        }
        counts
    }

    /// The interpreted-cluster notes a failing step adds to its error: those of clusters the
    /// error does not name (a cluster that failed has its node and reason in the error, and
    /// its compile was often declined for that very reason).
    pub fn interpreted_notes_beside(&self, status: &BTreeMap<String, FunctionStatus>, error: &str) -> Vec<String> {
        self.interpreted_where(status, |cluster| !error.contains(&format!("node '{cluster}'")))
    }

    /// One line per interpreted cluster, naming the cluster and the reason
    /// (which names the node inside it).
    pub fn interpreted_notes(&self, status: &BTreeMap<String, FunctionStatus>) -> Vec<String> {
        self.interpreted_where(status, |_| true)
    }

    /// The notes of the interpreted clusters `keep` accepts (by cluster name).
    fn interpreted_where(&self, status: &BTreeMap<String, FunctionStatus>, keep: impl Fn(&str) -> bool) -> Vec<String> {
        self.clusters
            .iter()
            .filter(|(cluster, _)| keep(cluster))
            .filter_map(|(cluster, function)| match status.get(function) {
                Some(FunctionStatus::Interpreted { reason }) => {
                    Some(format!("cluster '{cluster}' runs in the interpreter, not compiled: {reason}"))
                }
                _ => None,
            })
            .collect()
    }
}

/// One line per summary writer the graph captured from outside (its events dropped; the
/// `captured-writers` pass) that was written to.
pub fn dropped_summary_notes(store: &autoclust_runtime::VariableStore) -> Vec<String> {
    store
        .summary_writers()
        .dropped()
        .into_iter()
        .map(|(writer, n)| {
            format!(
                "summary writer '{writer}' was created outside this graph (tf.summary.create_file_writer run before the \
                 tf.function that captured it), so its log directory is unknown: {n} summaries written to it were dropped \
                 (`run --summary-dir DIR` writes them)"
            )
        })
        .collect()
}

/// Prints `note: LINE` on stderr for each line, at most [`MAX_NOTES`] of
/// them, then how many more there were.
pub fn print_notes(lines: &[String]) {
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    for line in lines.iter().take(MAX_NOTES) {
        pending.push(format!("note: {line}"));
    }
    if lines.len() > MAX_NOTES {
        pending.push(format!(
            "note: … and {} more like these (`autoclust cluster --explain` lists every node)",
            lines.len() - MAX_NOTES
        ));
    }
}

/// The `note:` lines of this command, printed when it ends ([`flush`]): a command that fails
/// must print its `error:` line first (docs/contract.md §1), and a note found before the
/// failure (a cluster left to the interpreter, then an op without a kernel) would precede it.
static PENDING: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Prints the notes gathered so far on stderr (after the `error:` line of a failed command).
pub fn flush() {
    let lines = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    for line in lines {
        eprintln!("{line}");
    }
}
