//! Configuration: parsing, errors with positions, precedence, masking,
//! `config show`, `doctor` and building the run backend.

use ais_testkit::llm::*;
use ais_vm::config::{BackendKind, Config, Env, Flags, Settings};
use ais_vm::llm::{CancelToken, LlmErrorKind, LlmOpKind};
use std::path::Path;

const FULL: &str = r#"
default_backend = "local"
token_budget = 50000

[[llm_backends]]
name = "local"
protocol = "openai"
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "LOCAL_KEY"
concurrency = 8
timeout_s = 30
retries = 2
backoff_ms = 100
structured_output = "json_object"
transport = "threads"
[llm_backends.models]
ask = "small"
think = "medium"
reason = "large"
[llm_backends.prices]
input_per_mtok = 0.5
output_per_mtok = 1.5

[[llm_backends]]
name = "claude"
protocol = "anthropic"
api_key_env = "ANTHROPIC_API_KEY"

[[llm_backends]]
name = "fast-sim"
protocol = "sim"
delay_scale = 0

[instruction]
ask = "Answer in one sentence."
"#;

fn parse(text: &str) -> Result<Config, ais_vm::config::ConfigError> {
    Config::parse(text, Path::new("cfg.toml"))
}

fn err(text: &str) -> ais_vm::config::ConfigError {
    match parse(text) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e,
    }
}

#[test]
fn parses_the_documented_shape() {
    let c = parse(FULL).expect("valid");
    let names: Vec<_> = c.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["local", "claude", "fast-sim", "sim"]);
    let local = c.backend("local").expect("local");
    assert_eq!(local.kind, BackendKind::OpenAi);
    assert_eq!(local.concurrency, 8);
    assert_eq!(local.timeout.as_secs(), 30);
    assert_eq!(local.retry.max_retries, 2);
    assert_eq!(local.transport, ais_vm::llm::http::HttpTransport::Threads);
    assert_eq!(
        c.backend("claude").expect("claude").transport,
        ais_vm::llm::http::HttpTransport::Auto
    );
    assert_eq!(
        local
            .models
            .for_class(ais_vm::llm::prompt::ModelClass::Reason),
        Some("large")
    );
    assert_eq!(
        local.prices.map(|p| p.cost(ais_vm::llm::Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 0,
            ..Default::default()
        })),
        Some(0.5)
    );
    assert_eq!(
        c.backend("claude").expect("claude").base_url,
        "https://api.anthropic.com"
    );
    assert_eq!(c.default_backend.as_deref(), Some("local"));
    assert_eq!(c.token_budget, Some(50000));
    assert_eq!(
        c.instructions.system_for(LlmOpKind::Ask),
        "Answer in one sentence."
    );
    assert!(c
        .instructions
        .system_for(LlmOpKind::Plan)
        .contains("planner"));
}

#[test]
fn syntax_errors_point_at_the_position() {
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = openai\n");
    assert_eq!(e.position(), Some((3, 12)));
    let text = e.to_string();
    assert!(text.starts_with("cfg.toml:3:12: "), "{text}");
    assert!(text.contains("3 | protocol = openai"), "{text}");
}

#[test]
fn unknown_protocol_points_at_the_value_with_a_hint() {
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"gemeni\"\n");
    assert_eq!(e.position(), Some((3, 12)));
    assert!(
        e.message().contains("unknown variant `gemeni`"),
        "{}",
        e.message()
    );
    assert_eq!(
        e.hint(),
        Some("protocol is one of openai, anthropic, ollama, gemini, sim")
    );
}

#[test]
fn an_unknown_transport_points_at_the_value() {
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\ntransport = \"fast\"\n");
    assert_eq!(e.position().map(|p| p.0), Some(4), "{e}");
    let text = e.to_string();
    assert!(text.contains("auto") && text.contains("threads"), "{text}");
}

#[test]
fn unknown_keys_are_errors() {
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"sim\"\nconcurrence = 3\n");
    assert_eq!(e.position(), Some((4, 1)));
    assert!(
        e.message().contains("unknown field `concurrence`"),
        "{}",
        e.message()
    );
}

#[test]
fn a_key_in_the_file_is_refused_and_not_echoed() {
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\napi_key = \"sk-live-abcdef123456\"\n");
    assert_eq!(e.position(), Some((4, 1)));
    let text = e.to_string();
    assert!(!text.contains("abcdef123456"), "{text}");
    assert!(
        e.hint().is_some_and(|h| h.contains("api_key_env")),
        "{text}"
    );
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\napi_key_env = \"sk-live-abcdef123456\"\n");
    assert_eq!(e.position(), Some((4, 15)));
    assert!(!format!("{e} {e:?}").contains("abcdef123456"));
}

#[test]
fn semantic_errors_point_at_the_value() {
    let cases = [
        (
            "[[llm_backends]]\nname = \"x\"\nprotocol = \"sim\"\nconcurrency = 0\n",
            (4, 15),
            "concurrency must be a positive integer",
        ),
        (
            "[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nbase_url = \"ftp://h\"\n",
            (4, 12),
            "base_url must be an http:// or https:// URL",
        ),
        (
            "[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\ntimeout_s = -1\n",
            (4, 13),
            "timeout_s must be a positive number of seconds",
        ),
        (
            "[[llm_backends]]\nname = \"\"\nprotocol = \"sim\"\n",
            (2, 8),
            "backend name must be a non-empty word",
        ),
        (
            "default_backend = \"nope\"\n",
            (1, 19),
            "default_backend `nope` is not defined",
        ),
        (
            "token_budget = 0\n",
            (1, 16),
            "token_budget must be a positive integer",
        ),
        (
            "[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\ntemperature = 3.5\n",
            (4, 15),
            "temperature must be between 0 and 2",
        ),
        (
            "[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nretries = 21\n",
            (4, 11),
            "retries must be at most 20",
        ),
    ];
    for (text, pos, message) in cases {
        let e = err(text);
        assert_eq!((e.position(), e.message()), (Some(pos), message), "{text}");
    }
}

#[test]
fn duplicate_names_are_rejected_at_the_second() {
    let e = err("[[llm_backends]]\nname = \"a\"\nprotocol = \"sim\"\n[[llm_backends]]\nname = \"a\"\nprotocol = \"sim\"\n");
    assert_eq!(e.position(), Some((5, 8)));
    assert_eq!(e.message(), "backend `a` is defined twice");
}

#[test]
fn missing_fields_have_a_hint() {
    let e = err("[[llm_backends]]\nname = \"x\"\n");
    assert!(
        e.message().contains("missing field `protocol`"),
        "{}",
        e.message()
    );
    assert!(e.hint().is_some());
    assert!(e.position().is_some());
}

#[test]
fn no_config_no_key_is_sim_with_a_notice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Settings::load(&Flags::default(), &Env::empty(dir.path())).expect("settings");
    assert_eq!(s.backend, "sim");
    assert_eq!(s.notice().as_deref(), Some("note: no LLM backend configured (no .apxm/config.toml, OPENAI_API_KEY unset): using the offline simulator `sim`; replies are simulated"));
    let run = s.build_run().expect("backend");
    assert!(run.simulated);
    assert_eq!(run.notice, s.notice());
    let resp = run
        .backend
        .complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new())
        .expect("reply");
    assert!(resp.simulated);
}

#[test]
fn no_config_with_openai_key_uses_openai_at_openai_base_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = mock();
    let env = Env::empty(dir.path())
        .with_var("OPENAI_API_KEY", KEY)
        .with_var("OPENAI_BASE_URL", &server.openai_url());
    let s = Settings::load(&Flags::default(), &env).expect("settings");
    assert_eq!(s.backend, "openai");
    assert_eq!(s.notice(), None);
    let run = s.build_run().expect("backend");
    assert!(!run.simulated);
    let resp = run
        .backend
        .complete(&request(LlmOpKind::Ask, "hi"), &CancelToken::new())
        .expect("reply");
    assert_eq!(resp.model, "gpt-4o-mini");
    assert_eq!(
        server
            .last_request()
            .expect("request")
            .header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[test]
fn file_lookup_project_then_home_then_flag() {
    let project = tempfile::tempdir().expect("tempdir");
    let home = tempfile::tempdir().expect("tempdir");
    let write = |root: &Path, name: &str| {
        std::fs::create_dir_all(root.join(".apxm")).expect("mkdir");
        let text = format!("[[llm_backends]]\nname = \"{name}\"\nprotocol = \"sim\"\n");
        std::fs::write(root.join(".apxm/config.toml"), text).expect("write");
    };
    write(home.path(), "from-home");
    let env = Env::empty(project.path()).with_home(home.path());
    assert_eq!(
        Settings::load(&Flags::default(), &env)
            .expect("home")
            .backend,
        "from-home"
    );
    write(project.path(), "from-project");
    assert_eq!(
        Settings::load(&Flags::default(), &env)
            .expect("project")
            .backend,
        "from-project"
    );
    let other = project.path().join("other.toml");
    std::fs::write(
        &other,
        "[[llm_backends]]\nname = \"from-flag\"\nprotocol = \"sim\"\n",
    )
    .expect("write");
    let flags = Flags {
        config: Some(other.clone()),
        ..Flags::default()
    };
    assert_eq!(
        Settings::load(&flags, &env).expect("flag").backend,
        "from-flag"
    );
    let env2 = env
        .clone()
        .with_var("APXM_CONFIG", &other.display().to_string());
    assert_eq!(
        Settings::load(&Flags::default(), &env2)
            .expect("env")
            .backend,
        "from-flag"
    );
    let missing = Flags {
        config: Some(project.path().join("absent.toml")),
        ..Flags::default()
    };
    let e = Settings::load(&missing, &env).expect_err("missing");
    assert!(e.to_string().contains("cannot read the config file"), "{e}");
}

#[test]
fn flags_over_env_over_file() {
    let c = parse(FULL).expect("valid");
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::empty(dir.path());
    let s = Settings::resolve(c.clone(), &Flags::default(), &env).expect("file");
    assert_eq!((s.backend.as_str(), s.token_budget), ("local", Some(50000)));
    let env = env
        .with_var("APXM_BACKEND", "claude")
        .with_var("APXM_TOKEN_BUDGET", "700");
    let s = Settings::resolve(c.clone(), &Flags::default(), &env).expect("env");
    assert_eq!(
        (s.backend.as_str(), s.backend_from, s.token_budget),
        ("claude", "APXM_BACKEND", Some(700))
    );
    let flags = Flags {
        backend: Some("fast-sim".into()),
        token_budget: Some(9),
        ..Flags::default()
    };
    let s = Settings::resolve(c.clone(), &flags, &env).expect("flags");
    assert_eq!(
        (s.backend.as_str(), s.backend_from, s.token_budget),
        ("fast-sim", "--backend", Some(9))
    );
    let bad = Flags {
        backend: Some("nope".into()),
        ..Flags::default()
    };
    let e = Settings::resolve(c.clone(), &bad, &env).expect_err("unknown");
    assert_eq!(e.message(), "unknown backend `nope` (from --backend)");
    assert_eq!(
        e.hint(),
        Some("defined backends: local, claude, fast-sim, sim")
    );
    let env = Env::empty(dir.path()).with_var("APXM_TOKEN_BUDGET", "lots");
    assert!(Settings::resolve(c.clone(), &Flags::default(), &env).is_err());
    let both = Flags {
        record: Some("a".into()),
        replay: Some("b".into()),
        ..Flags::default()
    };
    assert!(Settings::resolve(c, &both, &Env::empty(dir.path())).is_err());
}

#[test]
fn missing_key_variable_is_an_error_at_api_key_env() {
    let c = parse(FULL).expect("valid");
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Settings::resolve(c, &Flags::default(), &Env::empty(dir.path())).expect("settings");
    let e = s.build_run().expect_err("no key");
    assert_eq!(
        e.message(),
        "environment variable LOCAL_KEY (api_key_env of backend `local`) is not set"
    );
    assert_eq!(e.position(), Some((9, 15)));
}

#[test]
fn show_masks_keys_and_lists_everything() {
    let c = parse(FULL).expect("valid");
    let dir = tempfile::tempdir().expect("tempdir");
    let env = Env::empty(dir.path()).with_var("LOCAL_KEY", KEY);
    let s = Settings::resolve(c, &Flags::default(), &env).expect("settings");
    let text = s.show();
    assert!(!text.contains("SECRETKEY"), "{text}");
    assert!(!format!("{s:?}").contains("SECRETKEY"));
    assert!(
        text.contains("api_key_env = \"LOCAL_KEY\"  # set, value hidden"),
        "{text}"
    );
    assert!(
        text.contains("api_key_env = \"ANTHROPIC_API_KEY\"  # NOT SET"),
        "{text}"
    );
    assert!(
        text.contains("# selected backend: local (default_backend)"),
        "{text}"
    );
    assert!(
        text.contains("ask = \"Answer in one sentence.\"\n"),
        "{text}"
    );
    assert!(text.contains("  # default"), "{text}");
    assert!(
        text.contains("structured_output = \"json_object\""),
        "{text}"
    );
    assert!(text.contains("transport = \"threads\""), "{text}");
    assert!(text.contains("accept_incomplete = false"), "{text}");
    // The output is itself a valid config (comments aside).
    let reparsed: toml::Table = toml::from_str(&text).expect("show output is TOML");
    assert!(reparsed.contains_key("llm_backends"));
}

#[test]
fn doctor_reports_each_backend() {
    let server = mock();
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "[[llm_backends]]\nname = \"up\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n\n[[llm_backends]]\nname = \"nokey\"\nprotocol = \"anthropic\"\napi_key_env = \"NOPE_KEY\"\n\n[[llm_backends]]\nname = \"ol\"\nprotocol = \"ollama\"\nbase_url = \"{}\"\n",
        server.openai_url(),
        server.url()
    );
    let c = parse(&text).expect("valid");
    let s = Settings::resolve(c, &Flags::default(), &Env::empty(dir.path())).expect("settings");
    server.push(ais_testkit::mock::MockReply::error(500, "down"));
    let report = s.doctor();
    let oks: Vec<_> = report
        .entries
        .iter()
        .map(|e| (e.backend.as_str(), e.ok))
        .collect();
    assert_eq!(
        oks,
        [("up", false), ("nokey", false), ("ol", true), ("sim", true)]
    );
    assert!(report.entries[0].detail.contains("down"), "{report}");
    assert!(report.entries[1].detail.contains("NOPE_KEY"), "{report}");
    assert!(!report.all_ok());
    assert!(!report.selected_ok());
    let shown = report.to_string();
    assert!(shown.ends_with("4 backend(s) checked, 2 failed"), "{shown}");
    assert!(shown.contains("FAIL up (selected) [openai "), "{shown}");
    // The probe does not retry.
    assert_eq!(server.request_count(), 2);
}

#[test]
fn run_backend_records_and_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec_dir = dir.path().join("rec");
    let env = Env::empty(dir.path());
    let flags = Flags {
        record: Some(rec_dir.clone()),
        sim_delay_scale: Some(0.0),
        ..Flags::default()
    };
    let run = Settings::load(&flags, &env)
        .expect("settings")
        .build_run()
        .expect("backend");
    let r = request(LlmOpKind::Plan, "a plan");
    let live = run
        .backend
        .complete(&r, &CancelToken::new())
        .expect("reply");
    assert!(live.usage.total() > 0);

    // The token budget is a setting the run's scheduler enforces (one
    // implementation, `budget.tokens`), not a backend wrapper: a replaying
    // backend with a budget of 1 still answers a direct call.
    let flags = Flags {
        replay: Some(rec_dir.clone()),
        token_budget: Some(1),
        ..Flags::default()
    };
    let settings = Settings::load(&flags, &env).expect("settings");
    assert_eq!(settings.token_budget, Some(1));
    let run = settings.build_run().expect("backend");
    assert!(run
        .notice
        .as_deref()
        .is_some_and(|n| n.starts_with("note: replaying")));
    assert_eq!(
        run.backend
            .complete(&r, &CancelToken::new())
            .expect("replayed"),
        live
    );

    let flags = Flags {
        replay: Some(rec_dir),
        ..Flags::default()
    };
    let run = Settings::load(&flags, &env)
        .expect("settings")
        .build_run()
        .expect("backend");
    assert_eq!(
        run.backend
            .complete(&r, &CancelToken::new())
            .expect("replayed"),
        live
    );
    let e = run
        .backend
        .complete(&request(LlmOpKind::Ask, "new"), &CancelToken::new())
        .expect_err("missing");
    assert_eq!(e.kind, LlmErrorKind::Replay);
}

#[test]
fn retries_above_the_limit_are_rejected_naming_key_and_limit() {
    let ok = parse("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nretries = 20\n")
        .expect("20 is allowed");
    assert_eq!(ok.backend("x").expect("x").retry.max_retries, 20);
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nretries = 1000000000000\n");
    assert_eq!(e.message(), "retries must be at most 20");
}

#[test]
fn concurrency_above_the_limit_is_rejected_not_clamped() {
    let ok = parse("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nconcurrency = 4096\n")
        .expect("4096 is allowed");
    assert_eq!(ok.backend("x").expect("x").concurrency, 4096);
    let e = err("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\nconcurrency = 5000\n");
    assert_eq!(e.message(), "concurrency must be at most 4096 (found 5000)");
    assert_eq!(e.position(), Some((4, 15)));
}

#[test]
fn accept_incomplete_is_a_backend_key_off_by_default() {
    let c =
        parse("[[llm_backends]]\nname = \"x\"\nprotocol = \"openai\"\naccept_incomplete = true\n")
            .expect("valid");
    assert!(c.backend("x").expect("x").accept_incomplete);
    assert!(!c.backend("sim").expect("sim").accept_incomplete);
}

#[test]
fn doctor_does_not_cap_a_reasoning_model_and_accepts_a_cut_off_probe() {
    let server = mock();
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "[[llm_backends]]\nname = \"r\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n[llm_backends.models]\nask = \"o3-mini\"\n\n[[llm_backends]]\nname = \"plain\"\nprotocol = \"openai\"\nbase_url = \"{}\"\n",
        server.openai_url(),
        server.openai_url()
    );
    let c = parse(&text).expect("valid");
    let s = Settings::resolve(c, &Flags::default(), &Env::empty(dir.path())).expect("settings");
    server.push(ais_testkit::mock::MockReply::Normal);
    server.push(ais_testkit::mock::MockReply::openai_finish("length"));
    let report = s.doctor();
    let bodies: Vec<_> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "o3-mini");
    // No tiny cap: the `ask` default, as `max_completion_tokens`.
    for key in ["max_tokens", "temperature"] {
        assert!(bodies[0].get(key).is_none(), "{key}: {}", bodies[0]);
    }
    assert_eq!(bodies[0]["max_completion_tokens"], 1024, "{}", bodies[0]);
    assert_eq!(bodies[1]["max_tokens"], 8);
    assert!(report.entries[0].ok, "{report}");
    assert!(
        report.entries[1].ok,
        "a cut-off probe still answered: {report}"
    );
}

#[test]
fn base_url_credentials_are_redacted() {
    use ais_vm::llm::secret::redact_url;
    assert_eq!(
        redact_url("https://user:pa55word@h.example/v1?api-key=SECRETQ1&x=1#f"),
        "https://****@h.example/v1?api-key=****&x=****#f"
    );
    assert_eq!(
        redact_url("http://127.0.0.1:8000/v1"),
        "http://127.0.0.1:8000/v1"
    );

    let server = mock();
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server
        .openai_url()
        .replace("http://", "http://user:pa55word@")
        + "?api-key=SECRETQ1";
    let text =
        format!("[[llm_backends]]\nname = \"gw\"\nprotocol = \"openai\"\nbase_url = \"{url}\"\n");
    let s = Settings::resolve(
        parse(&text).expect("valid"),
        &Flags::default(),
        &Env::empty(dir.path()),
    )
    .expect("settings");
    let shown = s.show();
    assert!(
        shown.contains("base_url = \"http://****@127.0.0.1:"),
        "{shown}"
    );
    assert!(shown.contains("?api-key=****"), "{shown}");
    // The server echoes the URL it was called with in its error.
    server.push(ais_testkit::mock::MockReply::error(
        500,
        &format!("cannot route {url}; password pa55word, key SECRETQ1"),
    ));
    let report = s.doctor().to_string();
    for (what, text) in [("config show", &shown), ("doctor", &report)] {
        assert!(!text.contains("pa55word"), "{what}: {text}");
        assert!(!text.contains("SECRETQ1"), "{what}: {text}");
    }
    assert!(report.contains("****@127.0.0.1"), "{report}");
    assert!(
        report.contains("cannot route"),
        "the echo was received: {report}"
    );
    assert_eq!(server.request_count(), 1);
}

#[test]
fn configured_headers_are_sent_and_their_values_stay_hidden() {
    let server = mock();
    let dir = tempfile::tempdir().expect("tempdir");
    for transport in ["auto", "threads"] {
        let text = format!(
            "[[llm_backends]]\nname = \"az\"\nprotocol = \"openai\"\nbase_url = \"{}?api-version=2024-06-01\"\ntransport = \"{transport}\"\nheaders = {{ \"api-key\" = \"$AZ_KEY\", \"OpenAI-Organization\" = \"org-LITERAL1\" }}\n",
            server.openai_url()
        );
        let env = Env::empty(dir.path()).with_var("AZ_KEY", "az-SECRET-VALUE-1");
        let s = Settings::resolve(parse(&text).expect("valid"), &Flags::default(), &env)
            .expect("settings");
        let shown = s.show();
        assert!(shown.contains("\"api-key\" = \"$AZ_KEY\""), "{shown}");
        assert!(
            !shown.contains("az-SECRET-VALUE-1") && !shown.contains("org-LITERAL1"),
            "{shown}"
        );
        // The server echoes the key in its error: it is masked there too.
        server.push(ais_testkit::mock::MockReply::error(
            400,
            "bad api-key az-SECRET-VALUE-1",
        ));
        let b = s.build_backend("az").expect("backend");
        let err = b
            .complete(&request(LlmOpKind::Ask, "x"), &CancelToken::new())
            .expect_err("400");
        assert!(
            !err.message.contains("az-SECRET-VALUE-1"),
            "{}",
            err.message
        );
        let got = server.last_request().expect("request");
        assert_eq!(
            got.header("api-key"),
            Some("az-SECRET-VALUE-1"),
            "{transport}"
        );
        assert_eq!(got.header("openai-organization"), Some("org-LITERAL1"));
        assert!(
            got.path
                .ends_with("/chat/completions?api-version=2024-06-01"),
            "{}",
            got.path
        );
    }
}

#[test]
fn header_values_with_line_breaks_are_refused_naming_the_header_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "[[llm_backends]]\nname = \"gw\"\nprotocol = \"openai\"\nheaders = { \"x-gw\" = \"$GW\" }\n";
    let env = Env::empty(dir.path()).with_var("GW", "v1\r\nx-evil: INJECTED");
    let s =
        Settings::resolve(parse(text).expect("valid"), &Flags::default(), &env).expect("settings");
    let e = match s.build_backend("gw") {
        Ok(_) => panic!("a header value with a line break was accepted"),
        Err(e) => e,
    };
    assert!(e.message().contains("`x-gw`"), "{}", e.message());
    assert!(!e.message().contains("INJECTED"), "{}", e.message());
    let e = err("[[llm_backends]]\nname = \"gw\"\nprotocol = \"openai\"\nheaders = { \"x-gw\" = \"a\\r\\nb: INJECTED\" }\n");
    assert_eq!(
        e.message(),
        "the value of header `x-gw` contains a line break"
    );
    let e = err("[[llm_backends]]\nname = \"gw\"\nprotocol = \"openai\"\nheaders = { \"bad name\" = \"v\" }\n");
    assert!(
        e.message().contains("not a valid header name"),
        "{}",
        e.message()
    );
}
