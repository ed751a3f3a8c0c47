//! The workloads of the A-PXM paper's Table 2, as run by the benchmark.

use std::path::PathBuf;

/// One benchmarked program.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Table 4's id: `1`, `2`, `4a`…`4d`, `5`…`10`.
    pub id: &'static str,
    pub name: &'static str,
    /// The AIS program, relative to the repository root.
    pub file: &'static str,
    /// Entry arguments (`--arg name=value`).
    pub args: &'static [(&'static str, &'static str)],
    /// The reply to the run's first LLM call, when the workload needs a
    /// specific one (the classification that picks the routed branch, a
    /// plan with three steps). Queued on the mock server before each run.
    pub first_reply: Option<&'static str>,
    /// The LangGraph script under `bench/langgraph/` and its extra flags.
    pub python: &'static str,
    pub python_extra: &'static [&'static str],
    /// Calls tools: `aisc run` has no tool registry (see docs), so its
    /// whole-process runs go through `ais-bench exec`, which has.
    pub tools: bool,
}

/// The reply that routes workload 9 to its longest branch (think + ask).
pub const ROUTE: &str = "technical";

/// A three-step plan for workload 8 (valid against the `plan` schema).
pub const PLAN: &str = r#"{"goal":"Migrate the orders database without downtime","steps":[{"id":"s1","description":"Set up logical replication from the old cluster to the new one and wait for it to catch up","depends_on":[]},{"id":"s2","description":"Move read traffic to the new cluster behind a feature flag","depends_on":["s1"]},{"id":"s3","description":"Move write traffic, then retire the old cluster","depends_on":["s2"]}]}"#;

const TOPIC: &[(&str, &str)] = &[("topic", "urban cycling infrastructure")];

pub const WORKLOADS: &[Workload] = &[
    Workload {
        id: "1",
        name: "Parallel Research",
        file: "examples/01_parallel_research.ais",
        args: &[("topic", "solid-state batteries")],
        first_reply: None,
        python: "w01_parallel_research.py",
        python_extra: &[],
        tools: false,
    },
    Workload {
        id: "2",
        name: "Chain Fusion",
        file: "examples/02_chain_fusion.ais",
        args: &[("product", "a noise-cancelling headset")],
        first_reply: None,
        python: "w02_chain_fusion.py",
        python_extra: &[],
        tools: false,
    },
    Workload {
        id: "4a",
        name: "Scalability N=2",
        file: "examples/04_scalability_n2.ais",
        args: TOPIC,
        first_reply: None,
        python: "w04_scalability.py",
        python_extra: &["--n", "2"],
        tools: false,
    },
    Workload {
        id: "4b",
        name: "Scalability N=4",
        file: "examples/04_scalability_n4.ais",
        args: TOPIC,
        first_reply: None,
        python: "w04_scalability.py",
        python_extra: &["--n", "4"],
        tools: false,
    },
    Workload {
        id: "4c",
        name: "Scalability N=8",
        file: "examples/04_scalability_n8.ais",
        args: TOPIC,
        first_reply: None,
        python: "w04_scalability.py",
        python_extra: &["--n", "8"],
        tools: false,
    },
    Workload {
        id: "4d",
        name: "Scalability N=64",
        file: "examples/04_scalability_n64.ais",
        args: TOPIC,
        first_reply: None,
        python: "w04_scalability.py",
        python_extra: &["--n", "64"],
        tools: false,
    },
    Workload {
        id: "5",
        name: "Memory Augmented",
        file: "examples/05_memory_augmented.ais",
        args: &[
            ("user", "ana"),
            ("question", "What is our refund policy for annual plans?"),
        ],
        first_reply: None,
        python: "w05_memory_augmented.py",
        python_extra: &[],
        tools: false,
    },
    Workload {
        id: "6",
        name: "Tool Invocation",
        file: "examples/06_tool_invocation.ais",
        args: &[("ticker", "ACME")],
        first_reply: None,
        python: "w06_tool_invocation.py",
        python_extra: &[],
        tools: true,
    },
    Workload {
        id: "7",
        name: "Reflection",
        file: "examples/07_reflection.ais",
        args: &[
            ("task", "Explain how mRNA vaccines train the immune system"),
            ("source", "mRNA vaccines carry instructions for a harmless piece of a viral protein. Cells read them, make the protein and display it; the immune system learns to recognise it and keeps memory cells. The mRNA is broken down within days."),
        ],
        first_reply: None,
        python: "w07_reflection.py",
        python_extra: &[],
        tools: false,
    },
    Workload {
        id: "8",
        name: "Planning",
        file: "examples/08_planning.ais",
        args: &[
            ("objective", "Migrate the orders database from PostgreSQL 12 to 16"),
            ("constraints", "No downtime; every step can be undone within five minutes"),
        ],
        first_reply: Some(PLAN),
        python: "w08_planning.py",
        python_extra: &[],
        tools: false,
    },
    Workload {
        id: "9",
        name: "Conditional Routing",
        file: "examples/09_conditional_routing.ais",
        args: &[("ticket", "The app crashes every time I open the settings page since the last update.")],
        first_reply: Some(ROUTE),
        python: "w09_conditional_routing.py",
        python_extra: &[],
        tools: false,
    },
    Workload {
        id: "10",
        name: "Multi-Agent",
        file: "examples/10_multi_agent.ais",
        args: &[("topic", "small modular nuclear reactors")],
        first_reply: None,
        python: "w10_multi_agent.py",
        python_extra: &[],
        tools: true,
    },
];

/// Workload 3: the erroneous programs and the error code each must be
/// rejected with.
pub const TYPE_VERIFICATION: &[(&str, &str)] = &[
    ("tests/type-verification/01_undefined_variable.ais", "E0100"),
    ("tests/type-verification/02_type_mismatch.ais", "E0109"),
    ("tests/type-verification/03_void_use.ais", "E0110"),
    ("tests/type-verification/04_unknown_flow.ais", "E0107"),
    (
        "tests/type-verification/05_bad_capability_call.ais",
        "E0108",
    ),
];

/// The LangGraph script of workload 3.
pub const TYPE_VERIFICATION_PYTHON: &str = "w03_type_verification.py";

/// The repository root (this crate's parent directory).
pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// The workload with this id.
pub fn by_id(id: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.id == id)
}

/// The entry arguments as JSON strings.
pub fn args_json(w: &Workload) -> serde_json::Value {
    serde_json::Value::Object(
        w.args
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect(),
    )
}
