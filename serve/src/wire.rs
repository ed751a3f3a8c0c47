//! The wire formats the servers speak, in one place: JSON-RPC 2.0
//! envelopes (MCP and A2A) and Server-Sent Events framing (the run event
//! stream and A2A streams).
//!
//! Only `serde_json` is used here, on purpose: the runtime's clients
//! (`vm/src/aam/mcp.rs`, `vm/src/aam/remote.rs`) build the same envelopes,
//! and this module can move into a crate both sides depend on without
//! change.

use serde_json::{json, Value as Json};

/// JSON-RPC 2.0 (<https://www.jsonrpc.org/specification>).
pub mod rpc {
    use super::*;

    /// The `jsonrpc` member of every message.
    pub const VERSION: &str = "2.0";

    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;

    /// A request (`id` set) to send.
    pub fn request(id: Json, method: &str, params: Json) -> Json {
        json!({"jsonrpc": VERSION, "id": id, "method": method, "params": params})
    }

    /// A notification (no `id`) to send.
    pub fn notification(method: &str, params: Json) -> Json {
        json!({"jsonrpc": VERSION, "method": method, "params": params})
    }

    /// A success response.
    pub fn result(id: Json, result: Json) -> Json {
        json!({"jsonrpc": VERSION, "id": id, "result": result})
    }

    /// An error response; `data` is the error object's optional `data`.
    pub fn error(id: Json, code: i64, message: &str, data: Option<Json>) -> Json {
        let mut e = json!({"code": code, "message": message});
        if let Some(d) = data {
            e["data"] = d;
        }
        json!({"jsonrpc": VERSION, "id": id, "error": e})
    }

    /// Why a message is not a valid request (each server words it).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Invalid {
        NotAnObject,
        NoMethod,
        BadVersion,
    }

    /// One received message, classified.
    #[derive(Debug, PartialEq)]
    pub enum Incoming<'a> {
        /// A request: it gets a response with its `id`.
        Request {
            id: Json,
            method: &'a str,
            params: Json,
        },
        /// A notification: answered with nothing.
        Notification { method: &'a str, params: Json },
        /// Neither id nor method (a response to a request the server
        /// never sends, or junk): answered with nothing.
        Ignored,
        /// Answered with an `INVALID_REQUEST` error (`id` null when the
        /// message had none).
        Invalid { id: Json, why: Invalid },
    }

    /// Classifies a parsed message. The order of the checks is the one
    /// both servers have always answered in: not an object; no `id` (a
    /// notification, or nothing); no `method`; `jsonrpc` not `"2.0"`.
    pub fn classify(msg: &Json) -> Incoming<'_> {
        let Some(obj) = msg.as_object() else {
            return Incoming::Invalid {
                id: Json::Null,
                why: Invalid::NotAnObject,
            };
        };
        let method = obj.get("method").and_then(Json::as_str);
        let params = obj.get("params").cloned().unwrap_or(Json::Null);
        let Some(id) = obj.get("id").cloned() else {
            return match method {
                Some(method) => Incoming::Notification { method, params },
                None => Incoming::Ignored,
            };
        };
        let Some(method) = method else {
            return Incoming::Invalid {
                id,
                why: Invalid::NoMethod,
            };
        };
        if obj.get("jsonrpc").and_then(Json::as_str) != Some(VERSION) {
            return Incoming::Invalid {
                id,
                why: Invalid::BadVersion,
            };
        }
        Incoming::Request { id, method, params }
    }
}

/// Server-Sent Events (<https://html.spec.whatwg.org/multipage/server-sent-events.html>).
/// Data is always one line of JSON, so no field needs splitting.
pub mod sse {
    use super::*;

    /// The media type of an event stream.
    pub const CONTENT_TYPE: &str = "text/event-stream";

    /// A comment that keeps an idle stream (and its proxies) open.
    pub const KEEP_ALIVE: &str = ": keep-alive\n\n";

    /// An event with an id (for `Last-Event-ID`) and a type.
    pub fn event(id: u64, kind: &str, data: &Json) -> String {
        format!("id: {id}\nevent: {kind}\ndata: {data}\n\n")
    }

    /// An unnamed event carrying only data (A2A's JSON-RPC responses).
    pub fn data(data: &Json) -> String {
        format!("data: {data}\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::rpc::{classify, Incoming, Invalid};
    use super::*;

    #[test]
    fn messages_are_classified_in_the_servers_order() {
        assert_eq!(
            classify(&json!([1])),
            Incoming::Invalid {
                id: Json::Null,
                why: Invalid::NotAnObject
            }
        );
        assert_eq!(classify(&json!({"jsonrpc": "2.0"})), Incoming::Ignored);
        assert_eq!(
            classify(&json!({"method": "n"})),
            Incoming::Notification {
                method: "n",
                params: Json::Null
            }
        );
        assert_eq!(
            classify(&json!({"id": 1})),
            Incoming::Invalid {
                id: json!(1),
                why: Invalid::NoMethod
            }
        );
        assert_eq!(
            classify(&json!({"id": 1, "method": "m", "jsonrpc": "1.0"})),
            Incoming::Invalid {
                id: json!(1),
                why: Invalid::BadVersion
            }
        );
        assert_eq!(
            classify(&json!({"id": "a", "method": "m", "jsonrpc": "2.0", "params": {"x": 1}})),
            Incoming::Request {
                id: json!("a"),
                method: "m",
                params: json!({"x": 1})
            }
        );
    }

    #[test]
    fn frames_end_with_a_blank_line() {
        assert_eq!(
            sse::event(3, "op", &json!({"a": 1})),
            "id: 3\nevent: op\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(sse::data(&json!("x")), "data: \"x\"\n\n");
        assert_eq!(
            rpc::error(json!(1), rpc::INVALID_PARAMS, "m", None),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "m"}})
        );
    }
}
