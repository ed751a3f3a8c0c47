//! The workspace's label sidecar: the information-flow sources of what
//! the runtime's tools wrote into the workspace (`write_file`, `bash`,
//! any tool the catalogue declares as writing it), kept next to the files
//! so a later read — in the same run, in a later run, or through `bash cat`
//! — carries them (`crate::ifc`, tier `workspace`).
//!
//! One set for the whole workspace, not per file: a tool that reads the
//! workspace carries the sources of everything written there
//! (conservative, like memory tiers). Sources are kept by name, before the
//! write, and judged by the reading run's policy. The file is JSON
//! (`{"sources": [...]}`), written whole to a temporary file and renamed;
//! `read_file`/`write_file` refuse it and `bash` sees it read-only. To
//! start clean, delete it with the files it describes.

use crate::host::HostError;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::path::Path;

/// Its name, in the workspace's root.
pub const SIDECAR: &str = ais_stdlib::fs::LABELS_SIDECAR;

fn error(workspace: &Path, what: &str, e: impl std::fmt::Display) -> HostError {
    HostError::new(
        "workspace.labels",
        format!(
            "cannot {what} the workspace's label file `{}`: {e}",
            workspace.join(SIDECAR).display()
        ),
    )
}

/// The sources recorded for `workspace` (none when it has no sidecar).
pub fn load(workspace: &Path) -> Result<Vec<String>, HostError> {
    let path = workspace.join(SIDECAR);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(error(workspace, "read", e)),
    };
    let v: Json = serde_json::from_str(&text).map_err(|e| error(workspace, "parse", e))?;
    Ok(v.get("sources")
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Json::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default())
}

/// Adds `names` to the sources recorded for `workspace`.
pub fn store(workspace: &Path, names: &[String]) -> Result<(), HostError> {
    if names.is_empty() || !workspace.is_dir() {
        return Ok(());
    }
    let mut all: BTreeSet<String> = load(workspace)?.into_iter().collect();
    let before = all.len();
    all.extend(names.iter().cloned());
    if all.len() == before {
        return Ok(());
    }
    let tmp = workspace.join(format!("{SIDECAR}.{}.tmp", std::process::id()));
    let text = json!({"sources": all}).to_string();
    std::fs::write(&tmp, text).map_err(|e| error(workspace, "write", e))?;
    std::fs::rename(&tmp, workspace.join(SIDECAR)).map_err(|e| error(workspace, "write", e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sources_accumulate_across_stores() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path()).unwrap().is_empty());
        store(d.path(), &["http_get".into()]).unwrap();
        store(d.path(), &["@args".into(), "http_get".into()]).unwrap();
        assert_eq!(
            load(d.path()).unwrap(),
            vec!["@args".to_string(), "http_get".into()]
        );
    }
}
