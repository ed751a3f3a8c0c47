//! Record/replay. (Budgets are the scheduler's: vm/tests/reliability_journal.rs.)

use ais_testkit::llm::*;
use ais_testkit::mock::MockReply;
use ais_vm::llm::http::Protocol;
use ais_vm::llm::record::{
    canonical_json, recording_path, request_key, RecordingBackend, ReplayBackend,
};
use ais_vm::llm::sim::SimBackend;
use ais_vm::llm::{CancelToken, LlmBackend, LlmErrorKind, LlmOpKind};
use serde_json::json;
use std::sync::Arc;

#[test]
fn key_is_stable_and_covers_every_field() {
    let r = request(LlmOpKind::Ask, "hello");
    assert_eq!(request_key(&r), request_key(&r.clone()));
    assert_eq!(request_key(&r).len(), 64);
    let mut variants = Vec::new();
    let mut a = r.clone();
    a.prompt = "hello!".into();
    variants.push(a);
    let mut a = r.clone();
    a.kind = LlmOpKind::Think;
    variants.push(a);
    let mut a = r.clone();
    a.temperature = Some(0.0);
    variants.push(a);
    let mut a = r.clone();
    a.model = Some("m".into());
    variants.push(a);
    variants.push(with_context(r.clone(), "c", "t"));
    let mut a = r.clone();
    a.system = Some("s".into());
    variants.push(a);
    for v in variants {
        assert_ne!(request_key(&v), request_key(&r), "{v:?}");
    }
    assert_eq!(
        canonical_json(&json!({"b": 1, "a": [{"d": 2, "c": 3}]})),
        r#"{"a":[{"c":3,"d":2}],"b":1}"#
    );
}

#[test]
fn record_then_replay_without_network() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = mock();
    let live: Arc<dyn LlmBackend> = Arc::new(backend(&server, Protocol::OpenAi));
    let rec = RecordingBackend::new(live, dir.path()).expect("recorder");
    let reqs = [
        request(LlmOpKind::Ask, "one"),
        request(LlmOpKind::Plan, "two"),
    ];
    let live_replies: Vec<_> = reqs
        .iter()
        .map(|r| rec.complete(r, &CancelToken::new()).expect("live reply"))
        .collect();
    assert_eq!(server.request_count(), 2);
    let file = std::fs::read_to_string(recording_path(dir.path(), &request_key(&reqs[0])))
        .expect("recording");
    assert!(!file.contains("SECRETKEY"), "{file}");
    drop(server);

    let replay = ReplayBackend::new(dir.path()).expect("replay");
    for (r, live) in reqs.iter().zip(&live_replies) {
        let again = replay.complete(r, &CancelToken::new()).expect("replayed");
        assert_eq!(&again, live);
    }
}

#[test]
fn replay_of_an_unrecorded_request_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replay = ReplayBackend::new(dir.path()).expect("replay");
    let e = replay
        .complete(
            &request(LlmOpKind::Ask, "never recorded"),
            &CancelToken::new(),
        )
        .expect_err("missing");
    assert_eq!(e.kind, LlmErrorKind::Replay);
    assert!(
        e.message
            .starts_with("no recording for this ask request (key "),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("never calls a live model"),
        "{}",
        e.message
    );
}

#[test]
fn replay_rejects_a_missing_dir_and_corrupt_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(ReplayBackend::new(dir.path().join("absent")).is_err());
    let r = request(LlmOpKind::Ask, "x");
    std::fs::write(recording_path(dir.path(), &request_key(&r)), "{ not json").expect("write");
    let e = ReplayBackend::new(dir.path())
        .expect("replay")
        .complete(&r, &CancelToken::new())
        .expect_err("corrupt");
    assert_eq!(e.kind, LlmErrorKind::Replay);
    assert!(
        e.message.contains("is not a valid recording"),
        "{}",
        e.message
    );
}

#[test]
fn final_errors_are_recorded_and_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = mock();
    server.push(MockReply::error(400, "bad request"));
    let rec = RecordingBackend::new(Arc::new(backend(&server, Protocol::OpenAi)), dir.path())
        .expect("recorder");
    let r = request(LlmOpKind::Ask, "x");
    let live = rec.complete(&r, &CancelToken::new()).expect_err("400");
    let replayed = ReplayBackend::new(dir.path())
        .expect("replay")
        .complete(&r, &CancelToken::new())
        .expect_err("400");
    assert_eq!(live, replayed);
}

#[test]
fn simulated_replies_stay_labelled_through_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = RecordingBackend::new(
        Arc::new(SimBackend::new().with_delay_scale(0.0)),
        dir.path(),
    )
    .expect("recorder");
    assert!(rec.is_simulated());
    let r = request(LlmOpKind::Verify, "claim");
    rec.complete(&r, &CancelToken::new()).expect("reply");
    let again = ReplayBackend::new(dir.path())
        .expect("replay")
        .complete(&r, &CancelToken::new())
        .expect("replayed");
    assert!(again.simulated);
}
