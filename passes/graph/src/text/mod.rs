//! The native text format (`.graph`, specified in `docs/native-format.md`):
//! one node per line, hand-writable, carrying everything a GraphDef carries
//! for autoclust (nodes, attributes with tensor values, devices, the function
//! library, versions).
//!
//! The contract between the two halves: for every graph `g`,
//! `parse_graph(&print_graph(&g))` gives `g` back — same node order, same
//! names, inputs and attribute values bit for bit (floats print in their
//! shortest round-trip form, NaN payloads included).

mod parse;
mod print;

pub use parse::parse_graph;
pub use print::{print_attr_value, print_graph, print_node, quote};

use crate::{Graph, GraphError, Span};

/// Prints a graph in the native format (same as [`print_graph`]).
pub fn print(graph: &Graph) -> String {
    print_graph(graph)
}

/// Parses a native-format file (same as [`parse_graph`]).
pub fn parse(src: &str) -> Result<Graph, ParseError> {
    parse_graph(src)
}

/// Why a native-format file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// Syntax: an unexpected token, a bad escape, a wrong value count, …
    #[error("{span}: {message}")]
    Syntax { span: Span, message: String },
    /// The nodes do not resolve: a duplicate name or an unknown input (with the node's position).
    #[error(transparent)]
    Graph(GraphError),
}

impl ParseError {
    /// Where the error is, when known.
    pub fn span(&self) -> Option<Span> {
        match self {
            ParseError::Syntax { span, .. } => Some(*span),
            ParseError::Graph(g) => g.span(),
        }
    }
}

#[cfg(test)]
mod tests;
