//! Issue 35's credential defect: a server that echoes the request it got
//! (headers included) must not get any configured secret into a reply, an
//! error or streamed text, in any encoding: the key, a header value, and
//! `base_url`'s `user:password` (sent only as an explicit `Basic`
//! authorization, never in the URL), as written, base64 (standard and
//! URL-safe, padded or not, inside a longer base64 text), percent-encoded
//! or JSON-escaped.

use ais_vm::llm::http::{HttpBackend, HttpOptions, HttpTransport, Protocol, RetryPolicy};
use ais_vm::llm::secret::{base64, Secret};
use ais_vm::llm::{CancelToken, LlmBackend, LlmOpKind, LlmRequest};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::thread::JoinHandle;
use std::time::Duration;

const KEY: &str = "sk-echo-KEY-0123456789abcdef";
const PASSWORD: &str = "pa55:w/rd+Q";
const HEADER: &str = "gw-TOKEN-abcdef987654";

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Serves `n` requests, one per connection, answering each with `status`
/// and a body in `protocol`'s shape whose text is the whole request as
/// received (request line, headers, body), in several encodings.
fn echo_server(protocol: &'static str, status: u16, n: usize) -> (String, JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..n {
            let Ok((stream, _)) = listener.accept() else {
                break;
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                let end = line == "\r\n";
                head.push_str(&line);
                if end {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            seen.push(head.clone());
            // The echo: as received, base64 (both alphabets), and as a
            // JSON string inside the text.
            let echo = format!(
                "{head}\n{}\n{}\n{}",
                base64(head.as_bytes(), STD, true),
                base64(head.as_bytes(), URL, false),
                serde_json::to_string(&head).unwrap_or_default()
            );
            let body = reply(protocol, status, &echo).to_string();
            let out = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut stream = reader.into_inner();
            let _ = stream.write_all(out.as_bytes());
        }
        seen
    });
    (
        format!(
            "http://me:{}@{addr}",
            PASSWORD
                .replace(':', "%3A")
                .replace('/', "%2F")
                .replace('+', "%2B")
        ),
        handle,
    )
}

fn reply(protocol: &str, status: u16, text: &str) -> Value {
    if status != 200 {
        return json!({"error": {"message": format!("bad request: {text}"), "type": "invalid_request"}});
    }
    match protocol {
        "anthropic" => {
            json!({"content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "model": "m",
                              "usage": {"input_tokens": 1, "output_tokens": 1}})
        }
        "gemini" => {
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                           "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}})
        }
        "ollama" => {
            json!({"message": {"role": "assistant", "content": text}, "done": true, "done_reason": "stop"})
        }
        _ => {
            json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], "model": "m",
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        }
    }
}

fn backend(protocol: Protocol, base_url: &str, with_header: bool) -> HttpBackend {
    let mut o = HttpOptions::new("echo", protocol, base_url);
    o.api_key = Some(Secret::new(KEY));
    if with_header {
        o.headers = vec![("x-gateway".into(), Secret::new(HEADER))];
    }
    o.transport = HttpTransport::Threads;
    o.timeout = Duration::from_secs(10);
    o.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    HttpBackend::new(o)
}

/// Every form a secret must never appear in.
fn forbidden() -> Vec<String> {
    let mut out = Vec::new();
    for secret in [KEY, PASSWORD, HEADER, &format!("me:{PASSWORD}")] {
        out.push(secret.to_string());
        for alphabet in [STD, URL] {
            let full = base64(secret.as_bytes(), alphabet, true);
            out.push(full.trim_end_matches('=').to_string());
            // Any 8 characters of the middle of its base64 text.
            let core = &full[4..full.len().saturating_sub(4)];
            if core.len() >= 8 {
                out.push(core[..8].to_string());
            }
        }
    }
    out.push("pa55%3Aw%2Frd%2BQ".into());
    out.push("pa55:w\\/rd+Q".into());
    out
}

fn assert_clean(what: &str, text: &str) {
    for f in forbidden() {
        assert!(!text.contains(&f), "{what} contains `{f}`:\n{text}");
    }
}

fn ask() -> LlmRequest {
    let mut r = LlmRequest {
        cache: Default::default(),
        critical: false,
        attained: Default::default(),
        kind: LlmOpKind::Ask,
        agent: "T".into(),
        system: None,
        prompt: "hi".into(),
        context: Vec::new(),
        model: Some("m".into()),
        temperature: None,
        max_tokens: None,
        json_schema: None,
        budget_tokens: None,
        backend: None,
        tools: Vec::new(),
        turns: Vec::new(),
        on_text: None,
    };
    r.model = Some("m".into());
    r
}

#[test]
fn an_echoed_request_leaves_no_secret_in_replies_or_errors() {
    for name in ["openai", "anthropic", "gemini", "ollama"] {
        let Some(protocol) = Protocol::named(name) else {
            panic!("{name} is registered");
        };
        // A reply that echoes; an error that echoes.
        for status in [200u16, 400] {
            let (url, server) = echo_server(name, status, 1);
            let b = backend(protocol, &url, true);
            let out = match b.complete(&ask(), &CancelToken::new()) {
                Ok(r) => r.text,
                Err(e) => e.to_string(),
            };
            let seen = server.join().expect("server");
            let head = seen.first().cloned().unwrap_or_default();
            // It was echoed (the test would pass vacuously otherwise)...
            assert!(out.contains("x-gateway"), "{name} {status}: {out}");
            assert!(head.contains(HEADER), "{name}: the header was sent");
            // ...and the URL never carried the credentials.
            let request_line = head.lines().next().unwrap_or("");
            assert!(!request_line.contains("me:"), "{request_line}");
            assert_clean(&format!("{name} {status}"), &out);
        }
    }
}

#[test]
fn url_credentials_go_as_basic_only_when_nothing_else_authorizes() {
    // Anthropic authorizes with x-api-key: the gateway's Basic credential
    // is sent, explicitly.
    let (url, server) = echo_server("anthropic", 200, 1);
    let Some(anthropic) = Protocol::named("anthropic") else {
        panic!("registered");
    };
    let r = backend(anthropic, &url, false)
        .complete(&ask(), &CancelToken::new())
        .expect("reply");
    let head = server.join().expect("server").concat();
    let basic = base64(format!("me:{PASSWORD}").as_bytes(), STD, true);
    assert!(
        head.to_ascii_lowercase().contains(&format!(
            "authorization: basic {}",
            basic.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(r.text.contains("****"), "masked in the reply: {}", r.text);
    assert_clean("anthropic reply", &r.text);
    // OpenAI's bearer key authorizes: no second authorization.
    let (url, server) = echo_server("openai", 200, 1);
    backend(Protocol::OpenAi, &url, false)
        .complete(&ask(), &CancelToken::new())
        .expect("reply");
    let head = server.join().expect("server").concat().to_ascii_lowercase();
    assert_eq!(head.matches("authorization:").count(), 1, "{head}");
    assert!(head.contains("authorization: bearer"), "{head}");
}

#[test]
fn telemetry_text_scrubs_every_encoding_of_a_secret() {
    let p = ais_vm::telemetry::TextPolicy {
        secrets: vec![KEY.to_string()],
        ..Default::default()
    };
    let basic = base64(format!("user:{KEY}").as_bytes(), STD, true);
    for text in [
        format!("raw {KEY}"),
        format!("b64 {}", base64(KEY.as_bytes(), STD, true)),
        format!("url-safe {}", base64(KEY.as_bytes(), URL, false)),
        format!("Authorization: Basic {basic}"),
    ] {
        let kept = p.keep(&text).unwrap_or_default();
        assert!(kept.contains("[secret]"), "{text} -> {kept}");
        assert_clean("telemetry text", &kept);
    }
}
