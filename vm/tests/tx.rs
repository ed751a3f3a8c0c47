//! Transactions of `try` bodies (`ais_vm::tx`): buffered effects reach the
//! host on commit, in order, and not at all when discarded.
#![allow(clippy::unwrap_used)]

use ais_ir::Tier;
use ais_testkit::MemoryHost;
use ais_vm::host::Message;
use ais_vm::tx::{Parent, Tx};
use ais_vm::Host;
use serde_json::json;
use std::sync::Arc;

#[test]
fn a_body_reads_its_writes_and_commits_in_order() {
    let host = MemoryHost::new();
    host.belief_set("A", "mood", &json!("calm")).unwrap();
    let outer = Arc::new(Tx::new(Parent::Host(&host)));
    let inner = Tx::new(Parent::Tx(outer.clone()));
    inner.print("A", "one");
    inner
        .mem_update("A", Tier::Stm, &json!("v"), Some(&json!("k")))
        .unwrap();
    inner.belief_set("A", "mood", &json!("busy")).unwrap();
    assert_eq!(
        inner.mem_query("A", Tier::Stm, &json!("k")).unwrap(),
        json!("v")
    );
    assert_eq!(inner.belief_get("A", "mood").unwrap(), json!("busy"));
    // Not visible outside the body yet.
    assert_eq!(outer.belief_get("A", "mood").unwrap(), json!("calm"));
    assert!(inner.commit().unwrap().messages.is_empty());
    assert!(host.printed().is_empty());
    assert_eq!(outer.belief_get("A", "mood").unwrap(), json!("busy"));
    outer.commit().unwrap();
    assert_eq!(host.printed(), vec!["one".to_string()]);
    assert_eq!(
        host.mem_query("A", Tier::Stm, &json!("k")).unwrap(),
        json!("v")
    );
    assert_eq!(host.belief_get("A", "mood").unwrap(), json!("busy"));
}

#[test]
fn a_discarded_body_leaves_nothing() {
    let host = MemoryHost::new();
    let tx = Tx::new(Parent::Host(&host));
    tx.print("A", "lost");
    tx.communicate(Message {
        from: "A".into(),
        to: "B".into(),
        body: json!("hi"),
        protocol: "direct".into(),
    })
    .unwrap();
    tx.discard();
    assert!(tx.commit().unwrap().messages.is_empty());
    assert!(host.printed().is_empty());
    assert!(host.outbox().is_empty());
}

#[test]
fn list_queries_see_buffered_writes() {
    let host = MemoryHost::new();
    host.mem_update("A", Tier::Ltm, &json!("old fact"), None)
        .unwrap();
    let tx = Tx::new(Parent::Host(&host));
    tx.mem_update("A", Tier::Ltm, &json!("new fact"), None)
        .unwrap();
    assert_eq!(
        tx.mem_query("A", Tier::Ltm, &json!("fact")).unwrap(),
        json!(["old fact", "new fact"])
    );
    assert_eq!(
        host.mem_query("A", Tier::Ltm, &json!("fact")).unwrap(),
        json!(["old fact"])
    );
}
