//! Traces shared by the criterion benches: `../shared/workloads.py` (or `KUBEVENTS_WORKLOADS`) writes each
//! workload once into `target/traces/`, where later runs find it.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use std::process::Command;

use kubevents::sim::{JsonLines, Record};

pub const N: usize = 100_000;

pub fn trace_path(workload: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/traces");
    let path = dir.join(format!("{workload}-{N}.jsonl"));
    if !path.exists() {
        std::fs::create_dir_all(&dir).expect("create target/traces");
        let script = std::env::var("KUBEVENTS_WORKLOADS")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/workloads.py").to_owned());
        let status = Command::new("python3")
            .args([script.as_str(), workload, "-n", &N.to_string(), "-o"])
            .arg(&path)
            .status()
            .expect("run the workload generator");
        assert!(status.success(), "workload generator failed for {workload}");
    }
    path
}

pub fn records(workload: &str) -> Vec<Record<'static>> {
    let file = File::open(trace_path(workload)).expect("open trace");
    let mut lines = JsonLines::new(BufReader::new(file));
    let mut out = Vec::with_capacity(N);
    while let Some(r) = lines.next_record() {
        out.push(r.expect("parse trace").into_owned());
    }
    out
}
