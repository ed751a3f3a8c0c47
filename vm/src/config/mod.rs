//! Run configuration: LLM backends, system prompts, token budget,
//! record/replay, limits, and the Agent Abstract Machine's sections.
//!
//! Sources, highest priority first: command-line [`Flags`], environment
//! variables ([`Env`]), the config file. The file is `--config PATH`, else
//! `$APXM_CONFIG`, else `.apxm/config.toml` in the working directory, else
//! `~/.apxm/config.toml`. With no file, the `openai` backend is used when
//! `OPENAI_API_KEY` is set (at `OPENAI_BASE_URL` if set), else the offline
//! `sim` backend, with a one-line notice. The file format is documented in
//! `docs/backends.md` and `docs/runtime.md`.
//!
//! Keys never live in the file: a backend names the environment variable
//! that holds its key (`api_key_env`), and the value is only read when the
//! backend is built, into a masked `Secret`.
//!
//! - `schema`: the serde structs of every section (`deny_unknown_fields`);
//! - `resolve` and `backend`: values checked, defaults filled in ([`Config`]);
//!   `backend::resilience` a backend's `hedge` and `fallback` keys;
//! - `load`: flags, environment and file discovery ([`Settings`]);
//! - `env`: the environment it reads ([`Env`]) and variable names;
//! - `error`: the one [`ConfigError`], with the file's path and span;
//! - `show`: `aisc config show`.
//!
//! - `factory`: the [`LlmBackend`](crate::llm::LlmBackend)s a
//!   configuration names, and the wrapped backend of a run;
//! - `doctor`: `aisc doctor`.
//!
//! The AAM's runtime settings are `crate::aam::config`. The dependency
//! runs one way: `config` builds `llm` backends; `llm` knows no
//! configuration.

mod backend;
mod doctor;
mod env;
mod error;
mod factory;
mod load;
mod resolve;
pub mod schema;
mod show;
pub mod telemetry;
mod text;
pub mod webhooks;

pub use backend::{BackendConfig, FleetLimits, HeaderValue, Origin, MAX_RETRIES};
pub use doctor::{DoctorEntry, DoctorReport};
pub use env::Env;
pub use error::{ConfigError, InFile};
pub use factory::RunBackend;
pub use load::{find_config_file, Flags, Settings};
pub(crate) use resolve::{list, secs};
pub use resolve::{Config, Limits};
pub use schema::{BackendKind, Prices};
pub use text::{TextPolicy, DEFAULT_TEXT_LIMIT};

/// Directory of the config file, in the project and in the home directory.
pub const CONFIG_DIR: &str = ".apxm";
pub const CONFIG_FILE: &str = "config.toml";
