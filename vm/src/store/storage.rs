//! Where a run keeps its memory and journal: a directory, or nothing on
//! disk. (Defined with the stores; `crate::aam` re-exports it.)

use std::path::PathBuf;

/// Default memory directory.
pub const DEFAULT_DIR: &str = ".apxm";

/// Where memory lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// `DIR/memory.db` (LTM) and `DIR/episodic.log`.
    Dir(PathBuf),
    /// Nothing touches the disk (`--memory :memory:`).
    Ephemeral,
}

impl Storage {
    /// From a `--memory` value: `None` is `.apxm`, `:memory:` is ephemeral.
    pub fn from_arg(arg: Option<&str>) -> Storage {
        match arg {
            Some(":memory:") => Storage::Ephemeral,
            Some(d) => Storage::Dir(PathBuf::from(d)),
            None => Storage::Dir(PathBuf::from(DEFAULT_DIR)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Storage::Dir(d) => d.display().to_string(),
            Storage::Ephemeral => ":memory:".into(),
        }
    }
}
