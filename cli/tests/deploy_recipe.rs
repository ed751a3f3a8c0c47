//! The deployment recipe (deploy/: compose.yaml and k8s/, issue 39
//! deliverable 7), checked as far as a machine without containers allows:
//! both recipes give the workers and the server the same commands, every
//! probe points at an endpoint those commands serve, the autoscaler's
//! metric is one the workers export, and the recipe's own commands,
//! started here as processes against a PostgreSQL, serve their probes and
//! run a request end to end (server → store → worker → LLM).
//!
//! Ignored by plain `cargo test` ("needs PostgreSQL and the python venv:
//! run ./test"); the YAML is read with the venv's PyYAML.
#![allow(clippy::unwrap_used)]

mod serve_support;

use ais_testkit::mock::{MockReply, MockServer};
use ais_testkit::pg::PgServer;
use serde_json::{json, Value as Json};
use serve_support::{mock_config, probes_address, request, sdk_venv, Server};
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Every YAML document of `file`, as JSON (PyYAML's safe loader).
fn yaml(python: &Path, file: &Path) -> Vec<Json> {
    let o = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml\nprint(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The value after `flag` in a command line.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    &args[i + 1]
}

/// The manifest of `kind` named `name` among `docs`.
fn manifest<'a>(docs: &'a [Json], kind: &str, name: &str) -> &'a Json {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// `args` with the listen address moved to a free loopback port, and the
/// container's paths moved to `here`.
fn local(args: &[String], here: &Path) -> Vec<String> {
    args.iter()
        .map(|a| {
            if a.starts_with("0.0.0.0:") {
                "127.0.0.1:0".to_string()
            } else if let Some(p) = a.strip_prefix("/programs/") {
                here.join("programs").join(p).display().to_string()
            } else {
                a.clone()
            }
        })
        .collect()
}

#[test]
#[ignore = "needs PostgreSQL and the python venv: run ./test"]
fn the_deployment_recipes_agree_and_their_commands_serve_their_probes() {
    let python = sdk_venv("PyYAML", &["pyyaml==6.0.3"], "import yaml");
    let compose = yaml(&python, &deploy().join("compose.yaml")).remove(0);
    let mut k8s = Vec::new();
    for f in ["store", "config", "worker", "server", "autoscale"] {
        k8s.extend(yaml(&python, &deploy().join(format!("k8s/{f}.yaml"))));
    }
    let services = &compose["services"];
    let worker_args = strings(&services["worker"]["command"]);
    let server_args = strings(&services["server"]["command"]);
    assert_eq!(worker_args[0], "worker");
    assert_eq!(server_args[0], "serve");
    assert!(server_args.contains(&"--enqueue".to_string()));

    // One command per role, whichever recipe starts it.
    let worker = manifest(&k8s, "Deployment", "ais-worker");
    let server = manifest(&k8s, "Deployment", "ais-server");
    let wc = &worker["spec"]["template"]["spec"]["containers"][0];
    let sc = &server["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(strings(&wc["args"]), worker_args);
    assert_eq!(strings(&sc["args"]), server_args);

    // The probes point where the worker listens, at what it serves.
    let port: u64 = flag(&worker_args, "--listen")
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(wc["livenessProbe"]["httpGet"]["path"], "/health");
    assert_eq!(wc["livenessProbe"]["httpGet"]["port"], port);
    assert_eq!(wc["readinessProbe"]["httpGet"]["path"], "/ready");
    assert_eq!(wc["readinessProbe"]["httpGet"]["port"], port);
    assert!(services["worker"]["healthcheck"]["test"][1]
        .as_str()
        .unwrap()
        .contains(&format!("/dev/tcp/127.0.0.1/{port}")));
    // Stopping waits longer than the worker drains.
    let grace: u64 = flag(&worker_args, "--grace-secs").parse().unwrap();
    let k8s_grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    assert!(k8s_grace > grace, "{k8s_grace} <= {grace}");
    let compose_grace = services["worker"]["stop_grace_period"].as_str().unwrap();
    assert!(
        compose_grace.trim_end_matches('s').parse::<u64>().unwrap() > grace,
        "{compose_grace}"
    );
    // Every secret a container reads exists, with that key.
    for c in [wc, sc] {
        for e in c["env"].as_array().unwrap() {
            if let Some(r) = e["valueFrom"]["secretKeyRef"].as_object() {
                let s = manifest(&k8s, "Secret", r["name"].as_str().unwrap());
                assert!(
                    s["stringData"][r["key"].as_str().unwrap()].is_string(),
                    "{e}"
                );
            }
        }
    }
    // The ConfigMaps hold the same files as deploy/.
    let config = manifest(&k8s, "ConfigMap", "ais-config");
    assert_eq!(
        config["data"]["config.toml"].as_str().unwrap(),
        std::fs::read_to_string(deploy().join("config.toml"))
            .unwrap()
            .lines()
            .skip_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    let programs = manifest(&k8s, "ConfigMap", "ais-programs");
    for (name, text) in programs["data"].as_object().unwrap() {
        assert_eq!(
            text.as_str().unwrap(),
            std::fs::read_to_string(deploy().join("programs").join(name)).unwrap(),
            "{name}"
        );
    }
    let hpa = manifest(&k8s, "HorizontalPodAutoscaler", "ais-worker");
    let metric = hpa["spec"]["metrics"][0]["external"]["metric"]["name"]
        .as_str()
        .unwrap()
        .to_string();

    // The recipe's commands, as processes: the store, two workers, the
    // server; the LLM is a mock instead of the recipe's provider.
    let pg = PgServer::start();
    let url = pg.database("deploy");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mock = MockServer::start().unwrap();
    mock.push_n(
        MockReply::Content("Bees dance to share directions.".into()),
        4,
    );
    let config = dir.join(mock_config(dir, &mock.openai_url()));
    let config = config.to_str().unwrap();
    let env = [("AIS_STORE", url.as_str()), ("APXM_CONFIG", config)];
    let args = local(&worker_args[1..], &deploy());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut workers: Vec<_> = (0..2)
        .map(|_| {
            let mut w = serve_support::worker(dir, &args, &env);
            let addr = probes_address(&mut w);
            (w, addr)
        })
        .collect();
    for (_, addr) in &workers {
        assert_eq!(request(*addr, "GET", "/health", &[], None).status, 200);
        let mut ready = request(*addr, "GET", "/ready", &[], None);
        for _ in 0..200 {
            if ready.status == 200 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            ready = request(*addr, "GET", "/ready", &[], None);
        }
        assert_eq!((ready.status, ready.body.as_str()), (200, "ready\n"));
        let metrics = request(*addr, "GET", "/metrics", &[], None).body;
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(&format!("{metric} "))
                    || l.starts_with(&format!("{metric}{{"))),
            "the autoscaler's {metric} is not in the worker's /metrics:\n{metrics}"
        );
    }
    let token = "deploy-test-token";
    let sargs = local(&server_args[1..], &deploy());
    let (files, extra): (Vec<&str>, Vec<&str>) = {
        let all: Vec<&str> = sargs.iter().map(String::as_str).collect();
        let file = *all.last().unwrap();
        (vec![file], all[..all.len() - 1].to_vec())
    };
    let mut env = env.to_vec();
    env.push(("AIS_SERVE_TOKEN", token));
    let server = Server::start(dir, &files, &extra, &env);
    let auth = format!("Bearer {token}");
    let r = request(
        server.addr,
        "POST",
        "/v1/runs?wait=true",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        Some(
            json!({"program": "hello.ais", "args": {"topic": "bees"}})
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["status"], "succeeded", "{}", r.body);
    assert_eq!(r.json()["result"], "Bees dance to share directions.");
    // A worker ran it: the store has it completed, owned by one of the
    // workers (`host:pid:start`), and the mock saw the one call.
    assert_eq!(mock.requests().len(), 1);
    let owner = pg.psql(&url, "SELECT owner FROM runs WHERE status = 'completed'");
    let pid = owner.split(':').nth(1).unwrap_or_default().to_string();
    assert!(
        workers.iter().any(|(w, _)| w.id().to_string() == pid),
        "owner {owner:?} is not one of the workers"
    );
    drop(server);
    // SIGTERM, as an orchestrator stops a pod: each worker drains and exits 0.
    for (w, _) in &mut workers {
        let killed = Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        assert!(w.wait().unwrap().success());
    }
}
