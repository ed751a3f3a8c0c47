//! A2A 0.3 at the edge: its method names and shapes translated from and
//! to 1.0's, and the version a request names.

use super::*;
use ais_wire::a2a::TaskState;

/// The A2A 0.3 methods answered (JSON-RPC binding).
pub(super) const LEGACY_METHODS: [&str; 5] = [
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    "tasks/resubscribe",
];

/// Whether a request's `A2A-Version` means 0.3 (absent means 0.3).
pub(super) fn is_0_3(v: Option<&str>) -> bool {
    let v = v.map(str::trim).unwrap_or("");
    v.is_empty() || v == "0.3" || v.starts_with("0.3.")
}

/// A 0.3 request's params in 1.0 terms: `role: "user"`, and
/// `configuration.blocking: false` for `returnImmediately`.
pub(super) fn legacy_params(params: &mut Json) {
    if let Some(m) = params.get_mut("message") {
        if m["role"] == "user" {
            m["role"] = "ROLE_USER".into();
        }
    }
    if params["configuration"]["blocking"] == false {
        params["configuration"]["returnImmediately"] = true.into();
    }
}

/// A 1.0 result (`{"task": …}`, a `StreamResponse`, a Task) in 0.3 shapes:
/// `kind` discriminators, lower-case states and roles, a `final` flag on
/// status updates.
pub(super) fn to_0_3(v: Json) -> Json {
    let Json::Object(mut o) = v else { return v };
    if let Some(t) = o.remove("task") {
        return task_0_3(t);
    }
    if let Some(m) = o.remove("message") {
        return message_0_3(m);
    }
    if let Some(Json::Object(mut u)) = o.remove("statusUpdate") {
        let status = u.remove("status").map_or(Json::Null, status_0_3);
        let last = status["state"]
            .as_str()
            .and_then(TaskState::parse)
            .is_some_and(|s| s.is_terminal() || s.is_interrupted());
        u.insert("status".into(), status);
        u.insert("final".into(), last.into());
        u.insert("kind".into(), "status-update".into());
        return Json::Object(u);
    }
    if let Some(Json::Object(mut u)) = o.remove("artifactUpdate") {
        if let Some(a) = u.remove("artifact") {
            u.insert("artifact".into(), artifact_0_3(a));
        }
        u.insert("kind".into(), "artifact-update".into());
        return Json::Object(u);
    }
    if o.contains_key("status") && o.contains_key("id") {
        return task_0_3(Json::Object(o));
    }
    Json::Object(o)
}

pub(super) fn task_0_3(mut t: Json) -> Json {
    if let Some(s) = t.get_mut("status") {
        *s = status_0_3(s.take());
    }
    if let Some(Json::Array(a)) = t.get_mut("artifacts") {
        for x in a.iter_mut() {
            *x = artifact_0_3(x.take());
        }
    }
    if let Some(Json::Array(h)) = t.get_mut("history") {
        for m in h.iter_mut() {
            *m = message_0_3(m.take());
        }
    }
    t["kind"] = "task".into();
    t
}

pub(super) fn status_0_3(mut s: Json) -> Json {
    let state = s["state"]
        .as_str()
        .and_then(TaskState::parse)
        .map_or("unknown", TaskState::name_0_3);
    s["state"] = state.into();
    if let Some(m) = s.get_mut("message") {
        *m = message_0_3(m.take());
    }
    s
}

pub(super) fn message_0_3(mut m: Json) -> Json {
    let role = match m["role"].as_str() {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    m["role"] = role.into();
    if let Some(Json::Array(p)) = m.get_mut("parts") {
        for x in p.iter_mut() {
            *x = part_0_3(x.take());
        }
    }
    m["kind"] = "message".into();
    m
}

pub(super) fn artifact_0_3(mut a: Json) -> Json {
    if let Some(Json::Array(p)) = a.get_mut("parts") {
        for x in p.iter_mut() {
            *x = part_0_3(x.take());
        }
    }
    a
}

/// A 0.3 part: `kind` text or data (0.3 data is an object: other values
/// are wrapped as `{"result": value}`).
pub(super) fn part_0_3(p: Json) -> Json {
    if p.get("kind").is_some() {
        return p;
    }
    if let Some(t) = p.get("text") {
        return json!({"kind": "text", "text": t});
    }
    match p.get("data") {
        Some(d @ Json::Object(_)) => json!({"kind": "data", "data": d}),
        Some(d) => json!({"kind": "data", "data": {"result": d}}),
        None => p,
    }
}

pub(super) fn check_version(v: Option<&str>) -> Result<(), RpcError> {
    let v = v.map(str::trim).unwrap_or("");
    let given = if v.is_empty() { "0.3" } else { v };
    let mut it = given.split('.');
    let (major, minor) = (it.next(), it.next().unwrap_or("0"));
    if major == Some("1") && minor == "0" {
        return Ok(());
    }
    Err(RpcError::new(
        VERSION_NOT_SUPPORTED,
        "VERSION_NOT_SUPPORTED",
        format!(
            "A2A version {given}{} is not supported: this agent speaks A2A {PROTOCOL_VERSION} (send the header `A2A-Version: {PROTOCOL_VERSION}`)",
            if v.is_empty() { " (no A2A-Version header)" } else { "" }
        ),
    )
    .with("requestedVersion", given)
    .with("supportedVersions", json!([PROTOCOL_VERSION])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_version_1_0_is_spoken_and_no_header_means_0_3() {
        assert!(check_version(Some("1.0")).is_ok());
        assert!(check_version(Some("1.0.3")).is_ok());
        assert_eq!(
            check_version(None).err().map(|e| e.code),
            Some(VERSION_NOT_SUPPORTED)
        );
        assert_eq!(
            check_version(Some("0.3")).err().map(|e| e.code),
            Some(VERSION_NOT_SUPPORTED)
        );
    }
}
