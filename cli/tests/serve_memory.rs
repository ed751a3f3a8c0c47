//! The memory API of `aisc serve` (docs/serve.md, "Agent memory"): an
//! agent's long-term memory written over HTTP is what its runs read, and
//! what a run wrote is read over HTTP with its labels; search, delete,
//! unknown agents and keys.

#![allow(clippy::unwrap_used)]

mod serve_support;

use serde_json::{json, Value as Json};
use serve_support::{request, write, Server};

const KEEPER: &str = "agent Keeper {
    @entry flow main(k: str, v: str) -> str {
        umem(v, \"ltm\", k)
        fence()
        let got = qmem(\"fav\", \"ltm\")
        return \"fav is {got}\"
    }
}
";

fn send(s: &Server, method: &str, path: &str, body: Option<Json>) -> (u16, Json) {
    let text = body.map(|b| b.to_string());
    let r = request(
        s.addr,
        method,
        path,
        &[("Content-Type", "application/json")],
        text.as_deref().map(str::as_bytes),
    );
    (
        r.status,
        serde_json::from_str(r.body.trim()).unwrap_or(Json::Null),
    )
}

#[test]
fn an_agents_long_term_memory_is_read_and_written_over_http_and_shared_with_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "mem.ais", KEEPER);
    let s = Server::start(dir.path(), &[&p], &["--sim-delay-scale", "0"], &[]);

    let (st, j) = send(
        &s,
        "PUT",
        "/v1/agents/Keeper/memory/fav",
        Some(json!({"value": "tea"})),
    );
    assert_eq!(st, 200, "{j}");
    assert_eq!(
        (j["value"].as_str(), j["labels"].as_array().map(Vec::len)),
        (Some("tea"), Some(0))
    );

    // A run reads what HTTP wrote, and writes an entry of its own.
    let (st, r) = send(
        &s,
        "POST",
        "/v1/runs?wait=true",
        Some(json!({"program": "mem.ais", "args": {"k": "note 1", "v": "bees at dawn"}})),
    );
    assert_eq!(st, 201, "{r}");
    assert_eq!(r["result"], "fav is tea", "{r}");

    let (st, list) = send(&s, "GET", "/v1/agents/Keeper/memory", None);
    assert_eq!(st, 200);
    let keys: Vec<&str> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["key"].as_str())
        .collect();
    assert_eq!(keys, ["fav", "note 1"], "{list}");
    let (_, one) = send(&s, "GET", "/v1/agents/Keeper/memory/note%201", None);
    assert_eq!(one["value"], "bees at dawn");
    // The run's write keeps where its value came from (the run's input).
    assert!(
        one["labels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "@args"),
        "{one}"
    );
    let (_, found) = send(&s, "GET", "/v1/agents/Keeper/memory?q=bees", None);
    assert_eq!(
        found["entries"].as_array().map(Vec::len),
        Some(1),
        "{found}"
    );
    assert_eq!(found["entries"][0]["key"], "note 1");
    let (_, limited) = send(&s, "GET", "/v1/agents/Keeper/memory?limit=1", None);
    assert_eq!(limited["entries"][0]["key"], "note 1", "the newest");

    let (st, _) = send(&s, "DELETE", "/v1/agents/Keeper/memory/note%201", None);
    assert_eq!(st, 200);
    for (method, path, code, status) in [
        (
            "GET",
            "/v1/agents/Keeper/memory/note%201",
            "memory.not_found",
            404,
        ),
        (
            "DELETE",
            "/v1/agents/Keeper/memory/note%201",
            "memory.not_found",
            404,
        ),
        (
            "GET",
            "/v1/agents/Nobody/memory",
            "memory.unknown_agent",
            404,
        ),
        (
            "GET",
            "/v1/agents/Keeper/memory?limit=0",
            "request.bad_limit",
            400,
        ),
        ("GET", "/v1/agents/Keeper/memory/%ff", "memory.bad_key", 400),
        (
            "POST",
            "/v1/agents/Keeper/memory/fav",
            "request.method",
            405,
        ),
    ] {
        let (st, j) = send(&s, method, path, None);
        assert_eq!(
            (st, j["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {j}"
        );
    }
    let (st, j) = send(
        &s,
        "PUT",
        "/v1/agents/Keeper/memory/fav",
        Some(json!({"nope": 1})),
    );
    assert_eq!(
        (st, j["error"]["code"].as_str()),
        (400, Some("request.invalid"))
    );
}
