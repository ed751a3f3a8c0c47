//! `read_file` / `write_file`, confined to the workspace directory.
//!
//! A path must be relative, must not contain `..` (or a drive prefix), and
//! after resolving symbolic links must still lie inside the workspace. A
//! symlink that points outside is refused, for reading and for writing.

use crate::{Settings, ToolError};
use serde_json::{json, Value as Json};
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

fn denied(path: &str, why: &str) -> ToolError {
    ToolError::new(
        "fs.outside_workspace",
        format!("`{path}` is not allowed: {why}"),
    )
    .with_payload(json!({"path": path}))
}

fn io_error(path: &str, what: &str, e: &std::io::Error) -> ToolError {
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => "fs.not_found",
        std::io::ErrorKind::PermissionDenied => "fs.permission",
        _ => "fs.io",
    };
    ToolError::new(code, format!("cannot {what} `{path}`: {e}")).with_payload(json!({"path": path}))
}

fn root(settings: &Settings) -> Result<PathBuf, ToolError> {
    settings.workspace.canonicalize().map_err(|e| {
        ToolError::new(
            "fs.workspace",
            format!(
                "the workspace directory `{}` is not usable: {e}",
                settings.workspace.display()
            ),
        )
    })
}

/// The runtime's label sidecar in the workspace root
/// (`ais_vm::catalogue::labels`): no tool reads or writes it.
pub const LABELS_SIDECAR: &str = ".ais-labels.json";

/// Checks the lexical form of `path` and joins it to the workspace root.
pub fn confine(settings: &Settings, path: &str) -> Result<(PathBuf, PathBuf), ToolError> {
    if path.is_empty() {
        return Err(denied(path, "the path is empty"));
    }
    let p = Path::new(path);
    let named = p
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>();
    if named.first().is_some_and(|f| f.starts_with(LABELS_SIDECAR)) {
        return Err(denied(path, "it is the runtime's label file"));
    }
    if path.contains('\0') {
        return Err(denied(path, "the path contains a NUL byte"));
    }
    let p = Path::new(path);
    for c in p.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(denied(path, "`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(denied(path, "absolute paths are not allowed"))
            }
        }
    }
    let root = root(settings)?;
    Ok((root.join(p), root))
}

/// Fails unless `real` (a canonical path) is inside `root`.
fn inside(root: &Path, real: &Path, path: &str) -> Result<(), ToolError> {
    if real == root.join(LABELS_SIDECAR) {
        return Err(denied(path, "it is the runtime's label file"));
    }
    if real.starts_with(root) {
        Ok(())
    } else {
        Err(denied(
            path,
            "it resolves outside the workspace (symbolic link)",
        ))
    }
}

pub fn read_file(args: &Json, settings: &Settings) -> Result<Json, ToolError> {
    let path = crate::str_arg(args, "read_file", "path")?;
    let (full, root) = confine(settings, path)?;
    let real = full
        .canonicalize()
        .map_err(|e| io_error(path, "read", &e))?;
    inside(&root, &real, path)?;
    let f = std::fs::File::open(&real).map_err(|e| io_error(path, "read", &e))?;
    let mut bytes = Vec::new();
    f.take(settings.max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, "read", &e))?;
    if bytes.len() as u64 > settings.max_bytes {
        return Err(ToolError::new(
            "fs.too_large",
            format!("`{path}` is larger than {} bytes", settings.max_bytes),
        ));
    }
    String::from_utf8(bytes)
        .map(Json::String)
        .map_err(|_| ToolError::new("fs.not_text", format!("`{path}` is not UTF-8 text")))
}

pub fn write_file(args: &Json, settings: &Settings) -> Result<Json, ToolError> {
    let path = crate::str_arg(args, "write_file", "path")?;
    let content = crate::str_arg(args, "write_file", "content")?;
    let append = args.get("append").and_then(Json::as_bool).unwrap_or(false);
    let (full, root) = confine(settings, path)?;
    let parent = full
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.clone());
    // Create missing directories one level at a time, checking each one.
    let rel_parent = parent.strip_prefix(&root).unwrap_or(Path::new(""));
    let mut dir = root.clone();
    for c in rel_parent.components() {
        dir.push(c);
        if !dir.exists() {
            std::fs::create_dir(&dir).map_err(|e| io_error(path, "create a directory for", &e))?;
        }
        let real = dir
            .canonicalize()
            .map_err(|e| io_error(path, "write", &e))?;
        inside(&root, &real, path)?;
    }
    // The file itself: an existing symlink must stay inside too.
    if let Ok(meta) = std::fs::symlink_metadata(&full) {
        if meta.file_type().is_symlink() {
            let real = full
                .canonicalize()
                .map_err(|_| denied(path, "it is a symbolic link whose target does not exist"))?;
            inside(&root, &real, path)?;
        } else if meta.is_dir() {
            return Err(ToolError::new(
                "fs.is_dir",
                format!("`{path}` is a directory"),
            ));
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&full)
        .map_err(|e| io_error(path, "write", &e))?;
    f.write_all(content.as_bytes())
        .map_err(|e| io_error(path, "write", &e))?;
    Ok(json!({"path": path, "bytes": content.len()}))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Settings) {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let s = Settings {
            workspace: ws,
            ..Settings::default()
        };
        (d, s)
    }

    #[test]
    fn round_trip_and_confinement() {
        let (d, s) = ws();
        let r = write_file(&json!({"path": "a/b.txt", "content": "hi"}), &s).unwrap();
        assert_eq!(r["bytes"], 2);
        write_file(
            &json!({"path": "a/b.txt", "content": "!", "append": true}),
            &s,
        )
        .unwrap();
        assert_eq!(
            read_file(&json!({"path": "a/b.txt"}), &s).unwrap(),
            json!("hi!")
        );
        for bad in ["../x", "/etc/passwd", "a/../../x", ""] {
            let e = read_file(&json!({"path": bad}), &s).unwrap_err();
            assert_eq!(e.code, "fs.outside_workspace", "{bad}");
            let e = write_file(&json!({"path": bad, "content": ""}), &s).unwrap_err();
            assert_eq!(e.code, "fs.outside_workspace", "{bad}");
        }
        std::fs::write(d.path().join("secret"), "s").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.path().join("secret"), s.workspace.join("link")).unwrap();
            std::os::unix::fs::symlink(d.path(), s.workspace.join("dirlink")).unwrap();
            assert_eq!(
                read_file(&json!({"path": "link"}), &s).unwrap_err().code,
                "fs.outside_workspace"
            );
            assert_eq!(
                write_file(&json!({"path": "link", "content": "x"}), &s)
                    .unwrap_err()
                    .code,
                "fs.outside_workspace"
            );
            assert_eq!(
                write_file(&json!({"path": "dirlink/new", "content": "x"}), &s)
                    .unwrap_err()
                    .code,
                "fs.outside_workspace"
            );
            assert_eq!(
                std::fs::read_to_string(d.path().join("secret")).unwrap(),
                "s"
            );
        }
        assert_eq!(
            read_file(&json!({"path": "missing"}), &s).unwrap_err().code,
            "fs.not_found"
        );
    }
}
