//! JSON-RPC 2.0 (<https://www.jsonrpc.org/specification>): the envelopes
//! both sides build, the standard error codes, and the classification of a
//! received message (a server's view: [`classify`]; a client's view:
//! [`classify_reply`]).

use serde_json::{json, Value as Json};

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

/// A notification (no `id`) to send; `params` omitted when `None`.
pub fn notification(method: &str, params: Option<Json>) -> Json {
    match params {
        Some(params) => json!({"jsonrpc": VERSION, "method": method, "params": params}),
        None => json!({"jsonrpc": VERSION, "method": method}),
    }
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

/// One message a server received, classified.
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

/// Classifies a message a server received. The order of the checks is the
/// one both servers have always answered in: not an object; no `id` (a
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

/// One message a client received, classified.
#[derive(Debug, PartialEq)]
pub enum Reply<'a> {
    /// The answer to one of the client's requests: its `result`, or its
    /// `error` object as sent (code, message, data).
    Response {
        id: &'a Json,
        outcome: Result<&'a Json, &'a Json>,
    },
    /// A request from the peer (it expects a response with this id).
    Request { id: &'a Json, method: &'a str },
    /// A notification from the peer.
    Notification { method: &'a str },
    /// Neither id nor method, or not an object.
    Junk,
}

static NULL: Json = Json::Null;

/// Classifies a message a client received. A response without `result`
/// or `error` reads as a `null` result (lenient, as the clients always were).
pub fn classify_reply(msg: &Json) -> Reply<'_> {
    let Some(obj) = msg.as_object() else {
        return Reply::Junk;
    };
    let method = obj.get("method").and_then(Json::as_str);
    match (obj.get("id"), method) {
        (Some(id), Some(method)) => Reply::Request { id, method },
        (None, Some(method)) => Reply::Notification { method },
        (Some(id), None) => Reply::Response {
            id,
            outcome: match obj.get("error") {
                Some(e) => Err(e),
                None => Ok(obj.get("result").unwrap_or(&NULL)),
            },
        },
        (None, None) => Reply::Junk,
    }
}

/// The `message` of an error object (`"error"` when it has none).
pub fn error_message(e: &Json) -> &str {
    e.get("message").and_then(Json::as_str).unwrap_or("error")
}

#[cfg(test)]
mod tests {
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
    fn replies_are_classified_for_a_client() {
        let ok = json!({"jsonrpc": "2.0", "id": 3, "result": {"a": 1}});
        assert_eq!(
            classify_reply(&ok),
            Reply::Response {
                id: &json!(3),
                outcome: Ok(&json!({"a": 1}))
            }
        );
        let bad = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}});
        match classify_reply(&bad) {
            Reply::Response {
                outcome: Err(e), ..
            } => assert_eq!(error_message(e), "no"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            classify_reply(&json!({"id": 1})),
            Reply::Response {
                id: &json!(1),
                outcome: Ok(&Json::Null)
            }
        );
        assert_eq!(
            classify_reply(&json!({"id": 9, "method": "roots/list"})),
            Reply::Request {
                id: &json!(9),
                method: "roots/list"
            }
        );
        assert_eq!(
            classify_reply(&json!({"method": "notifications/progress"})),
            Reply::Notification {
                method: "notifications/progress"
            }
        );
        assert_eq!(classify_reply(&json!({"jsonrpc": "2.0"})), Reply::Junk);
        assert_eq!(classify_reply(&json!("x")), Reply::Junk);
    }

    #[test]
    fn envelopes() {
        assert_eq!(
            error(json!(1), INVALID_PARAMS, "m", None),
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "m"}})
        );
        assert_eq!(
            error(json!(1), INVALID_PARAMS, "m", Some(json!({"k": 2})))["error"]["data"],
            json!({"k": 2})
        );
        assert_eq!(
            notification("notifications/initialized", None),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        );
        assert_eq!(
            request(json!(4), "tools/list", json!({})),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}})
        );
        assert_eq!(
            result(json!("s"), json!(true)),
            json!({"jsonrpc": "2.0", "id": "s", "result": true})
        );
    }
}
