//! TensorFlow device names, parsed: `/job:J/replica:R/task:T/device:TYPE:ID`, the legacy
//! `/cpu:0` spelling, any part optional (TensorFlow's `DeviceNameUtils::ParsedName`).
//!
//! One parse serves every question the passes ask about a node's `device`: whether two
//! nodes are on one device (clusters never span two; `/cpu:0`, `/device:CPU:0` and
//! `/job:localhost/replica:0/task:0/device:CPU:0` are one device) and in which order a
//! collective group ranks its devices (job, replica, task, type, index — numbers by value).

use std::fmt;

/// A parsed device name. The local defaults (`job:localhost`, `replica:0`, `task:0`) are
/// dropped, so equal devices compare equal however they are spelt; the type is upper-cased.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceName {
    job: Option<String>,
    replica: Option<u64>,
    task: Option<u64>,
    kind: Option<String>,
    index: Option<u64>,
    /// Parts no rule above reads, kept as written (so two unusual names differ when their
    /// text does).
    rest: Vec<String>,
}

impl DeviceName {
    /// The device `text` names; `None` for the empty name (a node placed nowhere).
    pub fn parse(text: &str) -> Option<DeviceName> {
        let mut d = DeviceName { job: None, replica: None, task: None, kind: None, index: None, rest: Vec::new() };
        let mut any = false;
        for part in text.split('/').filter(|p| !p.is_empty()) {
            any = true;
            let (key, value) = part.split_once(':').unwrap_or((part, ""));
            let number = value.parse::<u64>().ok();
            match (key, number) {
                ("job", _) if !value.is_empty() => d.job = (value != "localhost").then(|| value.to_string()),
                ("replica", Some(n)) => d.replica = (n != 0).then_some(n),
                ("task", Some(n)) => d.task = (n != 0).then_some(n),
                ("device", _) => match value.split_once(':') {
                    Some((kind, id)) if id.parse::<u64>().is_ok() || id == "*" => {
                        d.kind = Some(kind.to_ascii_uppercase());
                        d.index = id.parse().ok();
                    }
                    _ => d.rest.push(part.to_string()),
                },
                // The legacy `/cpu:0`, `/gpu:1`.
                (kind, Some(n)) if !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') => {
                    d.kind = Some(kind.to_ascii_uppercase());
                    d.index = Some(n);
                }
                _ => d.rest.push(part.to_string()),
            }
        }
        any.then_some(d)
    }
}

impl fmt::Display for DeviceName {
    /// The shortest spelling: `CPU:0`, `job:worker/task:1/GPU:0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(j) = &self.job {
            parts.push(format!("job:{j}"));
        }
        if let Some(r) = self.replica {
            parts.push(format!("replica:{r}"));
        }
        if let Some(t) = self.task {
            parts.push(format!("task:{t}"));
        }
        if let Some(k) = &self.kind {
            parts.push(match self.index {
                Some(i) => format!("{k}:{i}"),
                None => format!("{k}:*"),
            });
        }
        parts.extend(self.rest.iter().cloned());
        f.write_str(&parts.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> Option<String> {
        DeviceName::parse(s).map(|d| d.to_string())
    }

    #[test]
    fn one_device_however_spelt() {
        for s in ["/cpu:0", "/CPU:0", "/device:CPU:0", "/job:localhost/replica:0/task:0/device:cpu:0"] {
            assert_eq!(canon(s).as_deref(), Some("CPU:0"), "{s}");
        }
        assert_eq!(canon("/job:worker/task:1/device:GPU:0").as_deref(), Some("job:worker/task:1/GPU:0"));
        assert_ne!(DeviceName::parse("/cpu:0"), DeviceName::parse("/cpu:1"));
        assert_ne!(DeviceName::parse("/job:worker/cpu:0"), DeviceName::parse("/cpu:0"));
        assert_eq!(canon(""), None);
        assert_eq!(canon("/"), None);
        // Unusual text is kept, not lost.
        assert_eq!(canon("/weird thing").as_deref(), Some("weird thing"));
        assert_ne!(DeviceName::parse("/a b"), DeviceName::parse("/c d"));
    }

    #[test]
    fn ranked_by_task_then_type_then_index_numerically() {
        let mut v: Vec<DeviceName> = [
            "/job:localhost/replica:0/task:0/device:CPU:10",
            "/job:localhost/replica:0/task:1/device:CPU:0",
            "/device:CPU:2",
            "/job:localhost/replica:0/task:0/device:CPU:1",
        ]
        .iter()
        .map(|s| DeviceName::parse(s).unwrap())
        .collect();
        v.sort();
        let shown: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["CPU:1", "CPU:2", "CPU:10", "task:1/CPU:0"]);
    }
}
