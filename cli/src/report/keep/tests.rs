//! The keeper's tests: attempts kept apart, runs racing the writer,
//! replayed marks, completing and discarding.

use super::*;
use ais_ir::Opcode;

fn program() -> Program {
    Program {
        source: None,
        types: Vec::new(),
        consts: Vec::new(),
        agents: Vec::new(),
        flows: Vec::new(),
    }
}

fn event(op: u32, opcode: Opcode, track: Track) -> OpEvent {
    OpEvent {
        frame: 0,
        frame_key: 0,
        flow: 0,
        region: 0,
        op,
        opcode,
        agent: 0,
        invocation: Default::default(),
        track,
        worker: 0,
        ready_ns: 1,
        start_ns: 2,
        end_ns: 3,
        status: Status::Ok,
        llm: None,
        detail: None,
    }
}

fn lines(dir: &Path, kept: &Kept) -> Vec<Json> {
    kept.read(dir)
        .expect("kept")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

#[test]
fn each_attempt_is_kept_apart_and_streams_its_events() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Attempts of a run are sequential: the first is placed (by the
    // writer, or `placed`) before the second starts. A new run's first
    // attempt is kept in the segments, a resume in a file of its own.
    let first = Keeper::start(dir.path(), "r-1", true).expect("first");
    assert_eq!(first.placed().expect("placed").0, 1);
    let second = Keeper::start(dir.path(), "r-1", false).expect("second");
    assert_eq!(second.placed().expect("placed").0, 2);
    assert_eq!(
        first.placed().expect("placed").1,
        Kept::Segment("r-1".into())
    );
    let Kept::File(path) = second.placed().expect("placed").1 else {
        panic!("a resume is kept in a file");
    };
    assert!(path.ends_with("telemetry/r-1.2.jsonl"));
    // Another run whose id starts the same is not an attempt of this one.
    let other = Keeper::start(dir.path(), "r-10", true).expect("other");
    assert_eq!(other.placed().expect("placed").0, 1);
    // A worker's takeover of a run no attempt of which was kept: 1.
    let taken = Keeper::start(dir.path(), "r-2", false).expect("taken");
    assert_eq!(taken.placed().expect("placed").0, 1);
    let found: Vec<u32> = attempts(dir.path(), "r-1").iter().map(|a| a.0).collect();
    assert_eq!(found, [1, 2]);

    let e = event(4, Opcode::Ask, Track::Worker(0));
    second.op(&OpUpdate {
        event: &e,
        flow: "A.main",
        agent: "A",
    });
    second.stop();
    let kept = lines(dir.path(), &second.placed().expect("placed").1);
    assert_eq!(kept[0]["type"], "attempt");
    assert_eq!(kept[0]["state"], "running");
    assert_eq!(kept[1]["op"], 4);
    assert_eq!(kept[1]["flow"], "A.main");
    // An LLM op that completed on a worker in a later attempt: replayed.
    assert_eq!(kept[1]["replayed"], true);
}

#[test]
fn runs_ending_while_the_writer_works_each_complete_their_own_file() {
    // The process's one writer and each run's end race to create and
    // append: every file still gets its header once, every event once
    // and in order, then the end, without being rewritten.
    let dir = tempfile::tempdir().expect("tempdir");
    let p = program();
    let events: Vec<OpEvent> = (0..3)
        .map(|i| event(i, Opcode::Const, Track::Worker(0)))
        .collect();
    let report = ais_vm::RunReport {
        outcome: Ok(Json::Null),
        summary: RunSummary::default(),
        events: events.clone(),
        plans: Vec::new(),
    };
    let runs: Vec<String> = (0..40).map(|i| format!("r{i}")).collect();
    std::thread::scope(|s| {
        for id in &runs {
            let (dir, p, events, report) = (dir.path(), &p, &events, &report);
            s.spawn(move || {
                let k = Keeper::start(dir, id, true).expect("start");
                for e in events {
                    k.op(&OpUpdate {
                        event: e,
                        flow: "A.main",
                        agent: "A",
                    });
                }
                k.finish(p, report);
            });
        }
    });
    for id in &runs {
        let kept = lines(dir.path(), &Kept::Segment(id.clone()));
        let types: Vec<&str> = kept.iter().map(line_type).collect();
        assert_eq!(
            types,
            ["attempt", "op", "op", "op", "end", "summary"],
            "{id}"
        );
        assert_eq!(kept[0]["state"], "running", "{id}: appended, not rewritten");
        let ops: Vec<u64> = kept[1..4].iter().filter_map(|l| l["op"].as_u64()).collect();
        assert_eq!(ops, [0, 1, 2], "{id}");
        assert_eq!(attempts(dir.path(), id).len(), 1, "{id}: one attempt");
    }
    // One segment and its index for the forty runs.
    let files = std::fs::read_dir(dir.path().join("telemetry"))
        .expect("dir")
        .count();
    assert_eq!(files, 2);
}

#[test]
fn only_later_attempts_mark_calls_answered_on_a_worker_as_replayed() {
    let on_worker = event(0, Opcode::Ask, Track::Worker(0));
    let on_lane = event(0, Opcode::Ask, Track::Llm(0));
    let pure = event(0, Opcode::Const, Track::Worker(0));
    assert!(!is_replayed(&on_worker, 1));
    assert!(is_replayed(&on_worker, 2));
    assert!(!is_replayed(&on_lane, 2));
    assert!(!is_replayed(&pure, 2));
}

fn line_type(l: &Json) -> &str {
    l["type"].as_str().unwrap_or("")
}

#[test]
fn finishing_completes_the_file_and_a_failed_write_costs_only_the_telemetry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = program();
    let e = event(1, Opcode::Const, Track::Worker(0));
    let report = ais_vm::RunReport {
        outcome: Ok(Json::Null),
        summary: RunSummary::default(),
        events: vec![e.clone()],
        plans: Vec::new(),
    };
    // Every event streamed: the end and summary lines are appended.
    let k = Keeper::start(dir.path(), "r", true).expect("start");
    k.op(&OpUpdate {
        event: &e,
        flow: "A.main",
        agent: "A",
    });
    k.finish(&p, &report);
    let kept = lines(dir.path(), &k.placed().expect("placed").1);
    let types: Vec<&str> = kept.iter().map(line_type).collect();
    assert_eq!(types, ["attempt", "op", "end", "summary"]);
    assert_eq!(kept[0]["state"], "running");
    assert_eq!(kept[2]["outcome"], "ok");
    // An event the attempt missed: written whole again, complete (a
    // file replaced, a segment's lines from the second header on).
    for fresh in [true, false] {
        let k = Keeper::start(dir.path(), &format!("q{fresh}"), fresh).expect("start");
        k.finish(&p, &report);
        let kept = lines(dir.path(), &k.placed().expect("placed").1);
        let types: Vec<&str> = kept.iter().map(line_type).collect();
        assert_eq!(types, ["attempt", "op", "end", "summary"], "{fresh}");
        assert_eq!(kept[0]["state"], "complete");
        assert_eq!(kept[2]["outcome"], "ok");
    }

    // A discarded run leaves no attempt, in a segment or a file.
    for fresh in [true, false] {
        let id = format!("d{fresh}");
        let k = Keeper::start(dir.path(), &id, fresh).expect("start");
        let _ = k.placed();
        assert_eq!(attempts(dir.path(), &id).len(), 1);
        k.discard();
        assert!(attempts(dir.path(), &id).is_empty(), "{fresh}");
    }

    let gone = Keeper::start(dir.path(), "s", false).expect("start");
    // Once its file exists, the directory goes away.
    let _ = gone.placed();
    std::fs::remove_dir_all(dir.path().join("telemetry")).expect("remove");
    gone.finish(&p, &report);
    assert!(gone.warn.0.load(Ordering::SeqCst), "warned");
    let Kept::File(path) = gone.placed().expect("placed").1 else {
        panic!("a file");
    };
    assert!(!path.exists());
}
