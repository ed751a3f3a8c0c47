//! The agents' state besides LTM — mailboxes, goals, beliefs, the episodic
//! log — with the same assertions on the in-process/SQLite side and on the
//! shared PostgreSQL store (a private server started by the test), plus
//! what only a shared store does: two hosts (two processes of a fleet) on
//! one database see one mailbox, one goal list, one set of beliefs.
//!
//! The PostgreSQL test is ignored by plain `cargo test` ("needs
//! PostgreSQL: run ./test"); run without PostgreSQL it fails, naming the fix.
#![allow(clippy::unwrap_used)]

use ais_testkit::pg::PgServer;
use ais_vm::aam::{AamHost, AamOptions, Storage};
use ais_vm::host::{Host, Message};
use ais_vm::llm::CancelToken;
use serde_json::{json, Value as Json};

fn host(store: Option<&str>, dir: Option<&std::path::Path>) -> AamHost {
    let mut h = AamHost::open(AamOptions {
        storage: dir.map_or(Storage::Ephemeral, |d| Storage::Dir(d.to_path_buf())),
        ..AamOptions::default()
    })
    .unwrap();
    if let Some(url) = store {
        h.use_store(url).unwrap();
    }
    h
}

fn tool(h: &AamHost, agent: &str, name: &str, args: Json) -> Result<Json, String> {
    h.invoke_tool(agent, name, &args, &CancelToken::new())
        .map_err(|e| e.code)
}

fn send(h: &AamHost, from: &str, to: &str, body: Json) {
    h.communicate(Message {
        from: from.into(),
        to: to.into(),
        body,
        protocol: "note".into(),
    })
    .unwrap();
}

/// Mailboxes, goals, beliefs and the episodic log of one host.
fn one_host(h: &AamHost) {
    // Mailbox: in order, kept until taken, taken once.
    send(h, "Ann", "Bob", json!("first"));
    send(h, "Ann", "Bob", json!({"n": 2}));
    let peek = tool(h, "Bob", "inbox", json!({})).unwrap();
    assert_eq!(peek.as_array().unwrap().len(), 2);
    assert_eq!(h.received("Bob").len(), 2);
    let taken = tool(h, "Bob", "inbox", json!({"clear": true})).unwrap();
    assert_eq!(taken[0]["body"], "first");
    assert_eq!(taken[0]["from"], "Ann");
    assert_eq!(taken[1]["body"], json!({"n": 2}));
    assert_eq!(
        tool(h, "Bob", "inbox", json!({"clear": true})).unwrap(),
        json!([])
    );
    assert!(h.received("Ann").is_empty());

    // Goals: priority order, updates, completion, drop.
    tool(h, "Ann", "goals_add", json!({"name": "b", "priority": 2})).unwrap();
    tool(h, "Ann", "goals_add", json!({"name": "a", "priority": 1})).unwrap();
    assert_eq!(
        tool(h, "Ann", "goals_next", json!({})).unwrap()["name"],
        "a"
    );
    tool(
        h,
        "Ann",
        "update_goal",
        json!({"name": "a", "status": "done"}),
    )
    .unwrap();
    assert_eq!(
        tool(h, "Ann", "goals_next", json!({})).unwrap()["name"],
        "b"
    );
    tool(h, "Ann", "update_goal", json!({"name": "c", "priority": 0})).unwrap();
    assert_eq!(
        tool(h, "Ann", "goals_next", json!({})).unwrap()["name"],
        "c"
    );
    tool(
        h,
        "Ann",
        "update_goal",
        json!({"name": "c", "status": "dropped"}),
    )
    .unwrap();
    assert_eq!(
        tool(h, "Ann", "goals_complete", json!({"name": "zzz"})),
        Err("goal.unknown".to_string())
    );
    let names: Vec<(String, bool)> = h
        .goals("Ann")
        .into_iter()
        .map(|g| (g.name, g.done))
        .collect();
    assert_eq!(names, vec![("b".into(), false), ("a".into(), true)]);
    assert!(h.goals("Bob").is_empty());

    // Beliefs: typed.
    h.belief_set("Ann", "mood", &json!("calm")).unwrap();
    assert_eq!(h.belief_get("Ann", "mood").unwrap(), "calm");
    assert_eq!(
        h.belief_set("Ann", "mood", &json!(3)).unwrap_err().code,
        "belief.type"
    );
    h.belief_set("Ann", "mood", &Json::Null).unwrap();
    h.belief_set("Ann", "mood", &json!(3)).unwrap();
    assert_eq!(h.belief_get("Ann", "mood").unwrap(), 3);
    assert_eq!(
        h.belief_get("Bob", "mood").unwrap_err().code,
        "belief.unknown"
    );
    h.belief_init("Bob", "mood", &json!("new")).unwrap();
    assert_eq!(h.belief_get("Bob", "mood").unwrap(), "new");

    // Episodic: every transition, with the run id; notes apart.
    let recs = h.episodic_records();
    let ops: Vec<&str> = recs
        .iter()
        .filter(|r| r["run"] == h.run_id())
        .filter_map(|r| r["op"].as_str())
        .collect();
    assert_eq!(ops.iter().filter(|o| **o == "send").count(), 2);
    assert_eq!(ops.iter().filter(|o| **o == "receive").count(), 2);
    assert!(ops.contains(&"belief.set"));
    h.mem_update(
        "Ann",
        ais_ir::Tier::Episodic,
        &json!("met Bob"),
        Some(&json!("k1")),
    )
    .unwrap();
    let trace = h
        .mem_query("Ann", ais_ir::Tier::Episodic, &json!("@trace"))
        .unwrap();
    assert!(trace
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["op"] != "note" && r["agent"] == "Ann"));
    assert_eq!(
        h.mem_query("Ann", ais_ir::Tier::Episodic, &json!("k1"))
            .unwrap(),
        "met Bob"
    );
}

#[test]
fn agent_state_in_process_and_sqlite() {
    one_host(&host(None, None));
    let d = tempfile::tempdir().unwrap();
    one_host(&host(None, Some(d.path())));
}

#[test]
#[ignore = "needs PostgreSQL: run ./test"]
fn agent_state_in_postgres_shared_by_two_hosts() {
    let server = PgServer::start();
    one_host(&host(Some(&server.database("one")), None));

    let url = server.database("two");
    let a = host(Some(&url), None);
    let b = host(Some(&url), None);
    // A message sent on one host is received once, on the other.
    send(&a, "Ann", "Bob", json!("hello"));
    let got = tool(&b, "Bob", "inbox", json!({"clear": true})).unwrap();
    assert_eq!(got.as_array().unwrap().len(), 1);
    assert_eq!(got[0]["body"], "hello");
    assert_eq!(
        tool(&a, "Bob", "inbox", json!({"clear": true})).unwrap(),
        json!([])
    );
    assert_eq!(
        tool(&b, "Bob", "inbox", json!({"clear": true})).unwrap(),
        json!([])
    );

    // Two hosts emptying one inbox at once: every message taken once.
    for i in 0..50 {
        send(&a, "Ann", "Cy", json!(i));
    }
    let (ta, tb) = std::thread::scope(|s| {
        let ja = s.spawn(|| {
            let mut n = Vec::new();
            for _ in 0..20 {
                n.extend(
                    tool(&a, "Cy", "inbox", json!({"clear": true}))
                        .unwrap()
                        .as_array()
                        .unwrap()
                        .clone(),
                );
            }
            n
        });
        let jb = s.spawn(|| {
            let mut n = Vec::new();
            for _ in 0..20 {
                n.extend(
                    tool(&b, "Cy", "inbox", json!({"clear": true}))
                        .unwrap()
                        .as_array()
                        .unwrap()
                        .clone(),
                );
            }
            n
        });
        (ja.join().unwrap(), jb.join().unwrap())
    });
    let mut bodies: Vec<i64> = ta
        .iter()
        .chain(&tb)
        .map(|m| m["body"].as_i64().unwrap())
        .collect();
    bodies.sort_unstable();
    assert_eq!(bodies, (0..50).collect::<Vec<i64>>());

    // A goal updated on one host is seen on the other.
    tool(
        &a,
        "Ann",
        "goals_add",
        json!({"name": "ship", "priority": 2}),
    )
    .unwrap();
    tool(
        &b,
        "Ann",
        "update_goal",
        json!({"name": "ship", "priority": 1, "description": "v2"}),
    )
    .unwrap();
    let next = tool(&a, "Ann", "goals_next", json!({})).unwrap();
    assert_eq!(next["name"], "ship");
    assert_eq!(next["description"], "v2");
    tool(&a, "Ann", "goals_complete", json!({"name": "ship"})).unwrap();
    assert_eq!(
        tool(&b, "Ann", "goals_next", json!({})).unwrap(),
        Json::Null
    );
    assert!(b.goals("Ann")[0].done);

    // Beliefs set on one host are read, and type-checked, on the other,
    // and outlive both hosts.
    a.belief_set("Ann", "city", &json!("Oslo")).unwrap();
    assert_eq!(b.belief_get("Ann", "city").unwrap(), "Oslo");
    assert_eq!(
        b.belief_set("Ann", "city", &json!(1)).unwrap_err().code,
        "belief.type"
    );
    // The episodic log of one is read by the other.
    assert!(b
        .episodic_records()
        .iter()
        .any(|r| r["run"] == a.run_id() && r["op"] == "send"));
    drop((a, b));
    let c = host(Some(&url), None);
    assert_eq!(c.belief_get("Ann", "city").unwrap(), "Oslo");
    // A new run's initial value does not overwrite a persisted belief.
    c.belief_init("Ann", "city", &json!("Rome")).unwrap();
    assert_eq!(c.belief_get("Ann", "city").unwrap(), "Oslo");
    assert!(c.goals("Ann").iter().any(|g| g.name == "ship" && g.done));
}
