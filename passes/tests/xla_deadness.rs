//! TensorFlow's own XLA auto-clusters of the v1 control-flow fixtures
//! (`testdata/tf/v1cf_xla_clusters.txt`, written by `xla_clusters_v1cf.py`) as the reference for
//! the deadness analysis: TensorFlow puts nodes in one cluster only when its deadness analysis
//! proves them live together in one frame, so every such cluster (restricted to the nodes the
//! fixture has: Grappler adds some before clustering) must be one frame and one predicate of ours
//! — our analysis separates nothing TensorFlow's proves alike. And our own clusters of the same
//! graphs never mix frames or predicates.

use std::collections::BTreeMap;
use std::path::PathBuf;

use autoclust_passes::cluster::Clusterer;
use autoclust_passes::deadness::DeadnessAnalysis;

fn tf_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/tf")
}

#[test]
fn tensorflow_xla_clusters_are_deadness_classes_of_ours() {
    let text = std::fs::read_to_string(tf_dir().join("v1cf_xla_clusters.txt")).unwrap();
    let mut by_fixture: BTreeMap<&str, Vec<(&str, Vec<&str>)>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let (fixture, cluster) = (words.next().unwrap(), words.next().unwrap());
        by_fixture.entry(fixture).or_default().push((cluster, words.collect()));
    }
    assert!(by_fixture.len() >= 9, "one entry per v1cf fixture: {:?}", by_fixture.keys());
    let mut compared = 0;
    for (fixture, clusters) in &by_fixture {
        let pbtxt = std::fs::read_to_string(tf_dir().join(format!("{fixture}.pbtxt"))).unwrap();
        let graph = autoclust_graphdef::parse_pbtxt(&pbtxt).unwrap();
        let d = DeadnessAnalysis::compute(&graph);
        for (cluster, nodes) in clusters {
            let ids: Vec<_> = nodes.iter().filter_map(|n| graph.find(n)).collect();
            for pair in ids.windows(2) {
                compared += 1;
                assert_eq!(
                    d.why_apart(&graph, pair[0], pair[1]),
                    None,
                    "{fixture}: TensorFlow's {cluster} holds {} and {}",
                    graph.name(pair[0]),
                    graph.name(pair[1])
                );
            }
        }
        let ours = Clusterer::default().run_partial(&graph).unwrap();
        for c in &ours.clusters {
            for pair in c.nodes.windows(2) {
                assert_eq!(d.why_apart(&graph, pair[0], pair[1]), None, "{fixture}: our {}", c.name);
            }
        }
    }
    assert!(compared > 50, "too few pairs compared ({compared}): did the fixtures' names change?");
}
