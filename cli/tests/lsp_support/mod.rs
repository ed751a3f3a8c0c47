//! A scripted `aisc lsp` session over stdio, shared by the LSP tests.

#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: i64,
}

pub const URI: &str = "file:///work/brief.ais";

impl Session {
    pub fn start() -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_aisc"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("aisc lsp starts");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut s = Session {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        let init = s.request("initialize", json!({"capabilities": {}}));
        let caps = &init["result"]["capabilities"];
        assert_eq!(caps["hoverProvider"], json!(true), "{init}");
        assert_eq!(caps["documentFormattingProvider"], json!(true));
        s.notify("initialized", json!({}));
        s
    }

    pub fn send(&mut self, msg: &Value) {
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.stdin.flush().expect("flush");
    }

    pub fn recv(&mut self) -> Value {
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("header");
            let line = line.trim();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length: ") {
                len = v.parse().expect("length");
            }
        }
        let mut body = vec![0u8; len];
        self.stdout.read_exact(&mut body).expect("body");
        serde_json::from_slice(&body).expect("json")
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its response (notifications received
    /// meanwhile are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let m = self.recv();
            if m["id"] == json!(id) {
                return m;
            }
        }
    }

    /// Opens (or replaces) the document and returns its published diagnostics.
    pub fn open(&mut self, text: &str) -> Vec<Value> {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": URI, "languageId": "ais", "version": 1, "text": text}}),
        );
        self.diagnostics()
    }

    pub fn change(&mut self, text: &str) -> Vec<Value> {
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": text}]}),
        );
        self.diagnostics()
    }

    pub fn diagnostics(&mut self) -> Vec<Value> {
        loop {
            let m = self.recv();
            if m["method"] == "textDocument/publishDiagnostics" {
                assert_eq!(m["params"]["uri"], URI);
                return m["params"]["diagnostics"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
            }
        }
    }

    pub fn at(&mut self, method: &str, line: u32, character: u32) -> Value {
        let mut params = json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": character}});
        if method == "textDocument/references" {
            params["context"] = json!({"includeDeclaration": true});
        }
        self.request(method, params)["result"].clone()
    }

    pub fn finish(mut self) {
        let r = self.request("shutdown", Value::Null);
        assert_eq!(r["result"], Value::Null);
        self.notify("exit", Value::Null);
        let status = self.child.wait().expect("exits");
        assert!(status.success(), "{status}");
    }
}

pub fn range(line: u32, start: u32, end: u32) -> Value {
    json!({"start": {"line": line, "character": start}, "end": {"line": line, "character": end}})
}
