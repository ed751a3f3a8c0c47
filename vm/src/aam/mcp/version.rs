//! Version negotiation: the `server/discover` probe of a modern server,
//! the `initialize` handshake of a legacy one, and the `_meta` every
//! modern request carries (see the module's documentation above).

use super::{
    client_info, err, McpClient, LEGACY_VERSIONS, MODERN_VERSION, PROBE_TIMEOUT, PROTOCOL_VERSIONS,
};
use crate::host::HostError;
use crate::llm::CancelToken;
use ais_wire::mcp::method;
use ais_wire::rpc;
use serde_json::{json, Value as Json};

/// What the `server/discover` probe found out.
pub(super) enum Probe {
    /// The server speaks [`MODERN_VERSION`].
    Modern(Json),
    /// A legacy server; `restart` when it did not answer cleanly.
    Legacy { restart: bool },
}

impl McpClient {
    /// `_meta` of a modern request.
    pub(super) fn meta() -> Json {
        let mut meta = serde_json::Map::new();
        meta.insert(
            ais_wire::mcp::meta::PROTOCOL_VERSION.into(),
            MODERN_VERSION.into(),
        );
        meta.insert(ais_wire::mcp::meta::CLIENT_INFO.into(), client_info());
        meta.insert(ais_wire::mcp::meta::CLIENT_CAPABILITIES.into(), json!({}));
        Json::Object(meta)
    }

    pub(super) fn is_modern(&self) -> bool {
        self.version.get().is_some_and(|v| v == MODERN_VERSION)
    }

    /// The negotiated protocol version (once started).
    pub fn protocol_version(&self) -> Option<&str> {
        self.version.get().map(String::as_str)
    }

    /// `mcp.protocol_version`: the server speaks `theirs`, none of ours.
    pub(super) fn version_error(&self, theirs: &[&str], ours: &str) -> HostError {
        let quoted = |vs: &[&str]| {
            vs.iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let said = match theirs {
            [] => "names no protocol version".to_string(),
            [one] => format!("speaks protocol version `{one}`"),
            many => format!("speaks protocol versions {}", quoted(many)),
        };
        err(
            &self.name,
            "mcp.protocol_version",
            format!(
                "the server {said}, but this client asked for `{ours}` and speaks only {}",
                quoted(PROTOCOL_VERSIONS)
            ),
        )
        .with_payload(json!({"server": self.name, "server_versions": theirs,
                             "requested": ours, "supported": PROTOCOL_VERSIONS}))
    }

    pub(super) fn discover(&self, cancel: &CancelToken) -> Result<Probe, HostError> {
        let params = json!({"_meta": McpClient::meta()});
        let wait = self.timeout.min(PROBE_TIMEOUT);
        match self.request_with(method::DISCOVER, params, cancel, wait, 0) {
            Ok(r) => {
                let versions: Vec<&str> = r
                    .get("supportedVersions")
                    .and_then(Json::as_array)
                    .map(|v| v.iter().filter_map(Json::as_str).collect())
                    .unwrap_or_default();
                if versions.contains(&MODERN_VERSION) {
                    Ok(Probe::Modern(
                        r.get("serverInfo").cloned().unwrap_or(Json::Null),
                    ))
                } else if versions.iter().any(|v| LEGACY_VERSIONS.contains(v)) {
                    // It answers the probe yet lists only handshake versions.
                    Ok(Probe::Legacy { restart: false })
                } else {
                    Err(self.version_error(&versions, MODERN_VERSION))
                }
            }
            Err(e) if e.code == "mcp.rpc_error" => {
                // UnsupportedProtocolVersionError: a modern server that lists
                // what it speaks in `data.supported`; it has no `initialize`.
                match e.payload["error"]["data"]["supported"].as_array() {
                    Some(list) => {
                        let theirs: Vec<&str> = list.iter().filter_map(Json::as_str).collect();
                        Err(self.version_error(&theirs, MODERN_VERSION))
                    }
                    None => Ok(Probe::Legacy { restart: false }),
                }
            }
            Err(e) if e.code == "mcp.timeout" || e.code == "mcp.closed" => {
                Ok(Probe::Legacy { restart: true })
            }
            Err(e) => Err(e),
        }
    }

    pub(super) fn initialize(&self, cancel: &CancelToken) -> Result<(), HostError> {
        let ours = LEGACY_VERSIONS[0];
        let init = self.request(
            method::INITIALIZE,
            json!({"protocolVersion": ours, "capabilities": {}, "clientInfo": client_info()}),
            cancel,
        )?;
        let Some(theirs) = init.get("protocolVersion").and_then(Json::as_str) else {
            return Err(err(
                &self.name,
                "mcp.protocol",
                "the `initialize` reply has no protocolVersion".into(),
            ));
        };
        if !LEGACY_VERSIONS.contains(&theirs) {
            return Err(self.version_error(&[theirs], ours));
        }
        let _ = self.version.set(theirs.to_string());
        let _ = self
            .server_info
            .set(init.get("serverInfo").cloned().unwrap_or(Json::Null));
        self.send(&rpc::notification(method::INITIALIZED, None))
    }
}
