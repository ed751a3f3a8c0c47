//! The environment a configuration is resolved in ([`Env`]), and what a
//! variable's name may be (config keys that name a variable, `$VAR` header
//! values, and the redaction of `*_env` keys in quoted config lines).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The environment the configuration is resolved in: variables, working
/// directory and home directory. Tests build one by hand; the CLI uses
/// [`Env::from_process`]. `Debug` lists variable names only.
#[derive(Clone, Default)]
pub struct Env {
    vars: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("home", &self.home)
            .finish()
    }
}

impl Env {
    /// The process environment, working directory and `$HOME`.
    pub fn from_process() -> Env {
        let vars: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let home = vars
            .get("HOME")
            .or_else(|| vars.get("USERPROFILE"))
            .map(PathBuf::from);
        Env {
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            home,
            vars,
        }
    }

    /// No variables, no home, the given working directory.
    pub fn empty(cwd: impl Into<PathBuf>) -> Env {
        Env {
            vars: BTreeMap::new(),
            cwd: cwd.into(),
            home: None,
        }
    }

    pub fn with_var(mut self, name: &str, value: &str) -> Env {
        self.vars.insert(name.to_string(), value.to_string());
        self
    }

    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Env {
        self.home = Some(home.into());
        self
    }

    /// A non-empty variable.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

/// A name an environment variable can have: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
