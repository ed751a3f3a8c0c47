//! AAM memory tiers: qmem/umem semantics per tier, persistence across
//! hosts, LRU-K eviction to LTM, fence ordering in a program, torn-tail
//! recovery of the episodic log, schema versioning.
#![allow(clippy::unwrap_used)]

mod ir_support;
use ir_support::program;

use ais_ir::Tier;
use ais_testkit::fake::FakeBackend;
use ais_vm::aam::config::AamConfig;
use ais_vm::aam::{content_key, AamHost, AamOptions, Storage};
use ais_vm::{Host, RunOptions};
use serde_json::{json, Value as Json};
use std::path::Path;
use std::sync::Arc;

fn host_in(dir: &Path) -> AamHost {
    AamHost::open(AamOptions {
        storage: Storage::Dir(dir.to_path_buf()),
        ..AamOptions::default()
    })
    .unwrap()
}

fn q(h: &AamHost, tier: Tier, query: &str) -> Json {
    h.mem_query("A", tier, &json!(query)).unwrap()
}

fn put(h: &AamHost, tier: Tier, v: Json, key: Option<&str>) {
    h.mem_update("A", tier, &v, key.map(|k| json!(k)).as_ref())
        .unwrap();
}

#[test]
fn query_forms_are_the_same_in_every_tier() {
    let h = AamHost::ephemeral();
    for tier in [Tier::Stm, Tier::Ltm, Tier::Episodic] {
        put(
            &h,
            tier,
            json!("Paris is the capital of France"),
            Some("geo:france"),
        );
        put(
            &h,
            tier,
            json!("Berlin is the capital of Germany"),
            Some("geo:germany"),
        );
        put(&h, tier, json!({"answer": 42}), Some("misc"));
        // exact key: the value itself
        assert_eq!(q(&h, tier, "misc"), json!({"answer": 42}), "{tier:?}");
        // prefix: values whose key starts with it, oldest first
        assert_eq!(
            q(&h, tier, "geo:*"),
            json!([
                "Paris is the capital of France",
                "Berlin is the capital of Germany"
            ]),
            "{tier:?}"
        );
        // search: every word must occur (case-insensitive, whole words)
        assert_eq!(
            q(&h, tier, "capital FRANCE"),
            json!(["Paris is the capital of France"])
        );
        assert_eq!(q(&h, tier, "capital").as_array().unwrap().len(), 2);
        // nothing matches: an empty list
        assert_eq!(q(&h, tier, "capital Spain"), json!([]), "{tier:?}");
        assert_eq!(q(&h, tier, "nokey*"), json!([]));
        assert_eq!(q(&h, tier, "?!"), json!([]));
        // everything, oldest first
        assert_eq!(q(&h, tier, "*").as_array().unwrap().len(), 3, "{tier:?}");
        assert_eq!(h.mem_query("B", tier, &json!("*")).unwrap(), json!([]));
    }
}

#[test]
fn umem_keys_replace_in_stm_and_ltm_and_append_in_episodic() {
    let h = AamHost::ephemeral();
    for tier in [Tier::Stm, Tier::Ltm] {
        put(&h, tier, json!(1), Some("k"));
        put(&h, tier, json!(2), Some("k"));
        assert_eq!(q(&h, tier, "k"), json!(2));
        // without a key: keyed by content, so the same value is stored once
        put(&h, tier, json!("note"), None);
        put(&h, tier, json!("note"), None);
        assert_eq!(q(&h, tier, "*"), json!([2, "note"]));
        assert_eq!(q(&h, tier, &content_key(&json!("note"))), json!("note"));
    }
    put(&h, Tier::Episodic, json!(1), Some("k"));
    put(&h, Tier::Episodic, json!(2), Some("k"));
    // the most recent note with that key
    assert_eq!(q(&h, Tier::Episodic, "k"), json!(2));
    assert_eq!(q(&h, Tier::Episodic, "k*"), json!([1, 2]));
}

#[test]
fn ltm_and_episodic_survive_a_restart_stm_does_not() {
    let d = tempfile::tempdir().unwrap();
    let run1;
    {
        let h = host_in(d.path());
        run1 = h.run_id().to_string();
        put(&h, Tier::Ltm, json!("durable fact"), Some("fact"));
        put(&h, Tier::Stm, json!("scratch"), Some("tmp"));
        put(&h, Tier::Episodic, json!("did a thing"), Some("diary"));
    }
    let h = host_in(d.path());
    assert_ne!(h.run_id(), run1);
    assert_eq!(q(&h, Tier::Ltm, "fact"), json!("durable fact"));
    assert_eq!(q(&h, Tier::Ltm, "durable"), json!(["durable fact"]));
    assert_eq!(q(&h, Tier::Stm, "*"), json!([]));
    assert_eq!(q(&h, Tier::Episodic, "diary"), json!("did a thing"));
    // Two hosts on one database at the same time see each other's writes.
    let other = host_in(d.path());
    put(
        &other,
        Tier::Ltm,
        json!("from the other host"),
        Some("other"),
    );
    assert_eq!(q(&h, Tier::Ltm, "other"), json!("from the other host"));
    // The trace of the first run is readable.
    let t =
        ais_vm::aam::inspect::trace(&Storage::Dir(d.path().to_path_buf()), &run1, false).unwrap();
    assert!(t.contains("umem") && t.contains("durable fact"), "{t}");
    assert!(
        ais_vm::aam::inspect::trace(&Storage::Dir(d.path().to_path_buf()), "nope", false).is_err()
    );
}

#[test]
fn ephemeral_memory_leaves_nothing_behind() {
    let d = tempfile::tempdir().unwrap();
    let cwd_files = std::fs::read_dir(d.path()).unwrap().count();
    let h = AamHost::ephemeral();
    put(&h, Tier::Ltm, json!("x"), Some("x"));
    assert_eq!(q(&h, Tier::Ltm, "x"), json!("x"));
    drop(h);
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), cwd_files);
    assert!(ais_vm::aam::inspect::show(
        &Storage::Ephemeral,
        None,
        ais_vm::aam::inspect::Which::All,
        false
    )
    .is_err());
}

#[test]
fn stm_is_bounded_and_evicts_with_lru_k_into_ltm() {
    let d = tempfile::tempdir().unwrap();
    let mut config = AamConfig::default();
    config.memory.stm_capacity = 2;
    config.memory.lru_k = 2;
    let h = AamHost::open(AamOptions {
        storage: Storage::Dir(d.path().to_path_buf()),
        config,
        ..AamOptions::default()
    })
    .unwrap();
    put(&h, Tier::Stm, json!("alpha value"), Some("a"));
    put(&h, Tier::Stm, json!("beta value"), Some("b"));
    // `a` is used twice; `b` once: `b` is the LRU-K victim.
    assert_eq!(q(&h, Tier::Stm, "a"), json!("alpha value"));
    put(&h, Tier::Stm, json!("gamma value"), Some("c"));
    assert_eq!(h.stm_len("A"), 2);
    // The evicted entry is still STM: listed, searchable, and swapped back in.
    assert_eq!(
        q(&h, Tier::Stm, "*"),
        json!(["alpha value", "beta value", "gamma value"])
    );
    assert_eq!(q(&h, Tier::Stm, "beta"), json!(["beta value"]));
    // It is not part of the LTM tier.
    assert_eq!(q(&h, Tier::Ltm, "*"), json!([]));
    assert_eq!(q(&h, Tier::Stm, "b"), json!("beta value"));
    assert_eq!(h.stm_len("A"), 2);
    // Still three entries in all.
    assert_eq!(q(&h, Tier::Stm, "*").as_array().unwrap().len(), 3);
    // Swapped-out STM does not outlive the host.
    drop(h);
    let h = host_in(d.path());
    assert_eq!(q(&h, Tier::Stm, "*"), json!([]));
    assert_eq!(q(&h, Tier::Ltm, "*"), json!([]));
}

const FENCED: &str = r#"
agent @A {
  flow @main(%x: str) -> json entry {
    %0 = const {value = "k"} : str
    %1 = umem %x, %0 {tier = "stm"} : ord
    %2 = const {value = "note"} : str
    %3 = umem %x, %2 {tier = "ltm"} : ord
    %4 = umem %x {tier = "episodic"} : ord
    %5 = fence %1, %3, %4 : ord
    %6, %7 = qmem %0, %5 {tier = "stm"} : json, ord
    %8, %9 = qmem %2, %5 {tier = "ltm"} : json, ord
    %10 = const {value = "*"} : str
    %11, %12 = qmem %10, %5 {tier = "episodic", limit = 1} : json, ord
    %13 = wait_all %6, %8, %11 : json
    return %13
  }
}
"#;

#[test]
fn fence_orders_writes_before_reads_across_tiers() {
    let p = program(FENCED);
    for workers in [1, 4] {
        for _ in 0..20 {
            let host = Arc::new(AamHost::ephemeral());
            host.load_program(&p);
            let o = RunOptions {
                workers: Some(workers),
                args: vec![("x".into(), json!("v"))],
                ..RunOptions::default()
            };
            let r = ais_vm::run(&p, &o, Arc::new(FakeBackend::new()), host.clone());
            assert_eq!(r.outcome.unwrap(), json!(["v", "v", ["v"]]));
            // Every read is logged after every write.
            let ops: Vec<String> = host
                .episodic_records()
                .iter()
                .map(|r| r["op"].as_str().unwrap_or("").to_string())
                .collect();
            let last_write = ops
                .iter()
                .rposition(|o| o == "umem" || o == "note")
                .unwrap();
            let first_read = ops.iter().position(|o| o == "qmem").unwrap();
            assert!(last_write < first_read, "{ops:?}");
        }
    }
}

/// The episodic log is a table of `memory.db`: what was appended survives
/// the process (one committed row per record), and an old framed
/// `episodic.log` is imported once (its torn tail reported), while a file
/// that is not a log is refused and left as it is.
#[test]
fn episodic_records_are_durable_and_a_legacy_log_is_imported() {
    let d = tempfile::tempdir().unwrap();
    {
        let h = host_in(d.path());
        put(&h, Tier::Episodic, json!("first"), Some("n"));
        put(&h, Tier::Episodic, json!("second"), Some("n"));
    }
    let h = host_in(d.path());
    assert!(h.warnings().is_empty(), "{:?}", h.warnings());
    assert_eq!(q(&h, Tier::Episodic, "n*"), json!(["first", "second"]));
    drop(h);
    // A legacy log with one record and a torn tail.
    let record = serde_json::to_vec(
        &json!({"run": "old", "agent": "A", "op": "note", "key": "n", "value": "legacy"}),
    )
    .unwrap();
    let mut bytes = b"APXMEPI1".to_vec();
    bytes.extend((record.len() as u32).to_le_bytes());
    bytes.extend(crc32fast::hash(&record).to_le_bytes());
    bytes.extend(&record);
    bytes.extend([9, 0, 0]);
    let log = d.path().join("episodic.log");
    std::fs::write(&log, &bytes).unwrap();
    let h = host_in(d.path());
    assert_eq!(h.warnings().len(), 1, "{:?}", h.warnings());
    assert!(
        h.warnings()[0].contains("imported 1 records"),
        "{:?}",
        h.warnings()
    );
    assert!(
        h.warnings()[0].contains("partial record header"),
        "{:?}",
        h.warnings()
    );
    assert!(!log.exists());
    assert_eq!(
        q(&h, Tier::Episodic, "n*"),
        json!(["first", "second", "legacy"])
    );
    drop(h);
    // Garbage instead of a log is refused, not truncated.
    std::fs::write(&log, b"definitely not a log").unwrap();
    let e = AamHost::open(AamOptions {
        storage: Storage::Dir(d.path().to_path_buf()),
        ..AamOptions::default()
    })
    .err()
    .unwrap();
    assert_eq!(e.code, "memory.episodic");
    assert_eq!(std::fs::read(&log).unwrap(), b"definitely not a log");
}

#[test]
fn a_newer_or_corrupt_database_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    {
        let c = rusqlite::Connection::open(d.path().join("memory.db")).unwrap();
        c.execute_batch("PRAGMA user_version = 99;").unwrap();
    }
    let e = AamHost::open(AamOptions {
        storage: Storage::Dir(d.path().to_path_buf()),
        ..AamOptions::default()
    })
    .err()
    .unwrap();
    assert_eq!(e.code, "memory.schema");
    assert!(e.message.contains("99"), "{}", e.message);
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("memory.db"), vec![7u8; 8192]).unwrap();
    let e = AamHost::open(AamOptions {
        storage: Storage::Dir(d.path().to_path_buf()),
        ..AamOptions::default()
    })
    .err()
    .unwrap();
    assert!(e.code.starts_with("memory."), "{e:?}");
}

#[test]
fn beliefs_are_typed_and_logged() {
    let h = AamHost::ephemeral();
    assert_eq!(h.belief_get("A", "m").unwrap_err().code, "belief.unknown");
    h.belief_set("A", "m", &json!("calm")).unwrap();
    h.belief_set("A", "m", &json!("busy")).unwrap();
    assert_eq!(
        h.belief_set("A", "m", &json!(3)).unwrap_err().code,
        "belief.type"
    );
    assert_eq!(h.belief_get("A", "m").unwrap(), json!("busy"));
    let ops: Vec<Json> = h
        .episodic_records()
        .iter()
        .map(|r| r["op"].clone())
        .collect();
    assert_eq!(
        ops,
        [
            json!("belief.get"),
            json!("belief.set"),
            json!("belief.set"),
            json!("belief.set"),
            json!("belief.get")
        ]
    );
    let failed = &h.episodic_records()[3];
    assert_eq!(failed["error"]["code"], "belief.type");
    assert_eq!(failed["agent"], "A");
    assert!(failed["dur_us"].is_u64() && failed["time"].is_string());
}
