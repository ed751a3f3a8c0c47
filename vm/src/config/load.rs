//! Where the configuration comes from and how the sources combine:
//! command-line [`Flags`] over environment variables ([`Env`]) over the
//! config file, found by [`find_config_file`]. [`Settings`] is the result.

use super::backend::BackendConfig;
use super::env::Env;
use super::error::ConfigError;
use super::resolve::{list, Config};
use super::schema::BackendKind;
use super::{CONFIG_DIR, CONFIG_FILE};
use std::path::{Path, PathBuf};

/// Command-line settings (`aisc run`, `aisc config show`, `aisc doctor`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Flags {
    /// `--config PATH`
    pub config: Option<PathBuf>,
    /// `--backend NAME`
    pub backend: Option<String>,
    /// `--token-budget N`
    pub token_budget: Option<u64>,
    /// `--record DIR`
    pub record: Option<PathBuf>,
    /// `--replay DIR`
    pub replay: Option<PathBuf>,
    /// `--sim-delay-scale F` (0 = no simulated latency)
    pub sim_delay_scale: Option<f64>,
}

impl Config {
    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::in_file(path, format!("cannot read the config file: {e}"), None)
        })?;
        Config::parse(&text, path)
    }
}

/// The configuration a command runs with: file + env + flags.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    /// Name of the selected backend.
    pub backend: String,
    /// Why it was selected (`--backend`, `APXM_BACKEND`, `default_backend`…).
    pub backend_from: &'static str,
    pub token_budget: Option<u64>,
    pub token_budget_from: &'static str,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    /// Simulator delay factor override (flag or `APXM_SIM_DELAY_SCALE`).
    pub sim_delay_scale: Option<f64>,
    pub(crate) env: Env,
}

/// Finds the config file: flag, `$APXM_CONFIG`, project, home.
pub fn find_config_file(flags: &Flags, env: &Env) -> Option<PathBuf> {
    if let Some(p) = &flags.config {
        return Some(p.clone());
    }
    if let Some(p) = env.var("APXM_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let project = env.cwd.join(CONFIG_DIR).join(CONFIG_FILE);
    if project.is_file() {
        return Some(project);
    }
    let home = env.home.as_ref()?.join(CONFIG_DIR).join(CONFIG_FILE);
    home.is_file().then_some(home)
}

fn parse_env_number<T: std::str::FromStr>(env: &Env, name: &str) -> Result<Option<T>, ConfigError> {
    match env.var(name) {
        None => Ok(None),
        Some(v) => v.trim().parse::<T>().map(Some).map_err(|_| {
            ConfigError::plain(
                format!(
                    "environment variable {name} is not a valid number: `{}`",
                    v.trim()
                ),
                None,
            )
        }),
    }
}

impl Settings {
    /// Resolves flags over env over file. Errors point at the file position.
    pub fn load(flags: &Flags, env: &Env) -> Result<Settings, ConfigError> {
        let config = match find_config_file(flags, env) {
            Some(path) => Config::load(&path)?,
            None => Config::builtin(env),
        };
        Settings::resolve(config, flags, env)
    }

    /// Resolves flags and env over an already loaded config.
    pub fn resolve(config: Config, flags: &Flags, env: &Env) -> Result<Settings, ConfigError> {
        let (backend, backend_from) = if let Some(b) = &flags.backend {
            (b.clone(), "--backend")
        } else if let Some(b) = env.var("APXM_BACKEND") {
            (b.trim().to_string(), "APXM_BACKEND")
        } else if let Some(b) = &config.default_backend {
            (b.clone(), "default_backend")
        } else if config.path().is_some() {
            (
                config
                    .backends
                    .first()
                    .map(|b| b.name.clone())
                    .unwrap_or_else(|| "sim".into()),
                "first backend in the file",
            )
        } else if config.backend("openai").is_some() {
            ("openai".into(), "OPENAI_API_KEY is set")
        } else {
            ("sim".into(), "no configuration")
        };
        if config.backend(&backend).is_none() {
            return Err(ConfigError::plain(
                format!("unknown backend `{backend}` (from {backend_from})"),
                Some(format!("defined backends: {}", list(&config.backends))),
            ));
        }
        let env_budget: Option<u64> = parse_env_number(env, "APXM_TOKEN_BUDGET")?;
        let (token_budget, token_budget_from) = if let Some(t) = flags.token_budget {
            (Some(t), "--token-budget")
        } else if let Some(t) = env_budget {
            (Some(t), "APXM_TOKEN_BUDGET")
        } else if let Some(t) = config.token_budget {
            (Some(t), "config file")
        } else {
            (None, "unset")
        };
        if token_budget == Some(0) {
            return Err(ConfigError::plain(
                format!("the token budget (from {token_budget_from}) must be positive"),
                None,
            ));
        }
        let record = flags
            .record
            .clone()
            .or_else(|| env.var("APXM_RECORD").map(PathBuf::from));
        let replay = flags
            .replay
            .clone()
            .or_else(|| env.var("APXM_REPLAY").map(PathBuf::from));
        if record.is_some() && replay.is_some() {
            return Err(ConfigError::plain(
                "--record and --replay cannot be used together",
                Some("record a run first, then replay it".into()),
            ));
        }
        let sim_delay_scale = match flags.sim_delay_scale {
            Some(s) => Some(s),
            None => parse_env_number(env, "APXM_SIM_DELAY_SCALE")?,
        };
        if let Some(s) = sim_delay_scale {
            if !(s.is_finite() && s >= 0.0) {
                return Err(ConfigError::plain(
                    "the simulator delay scale must be zero or more",
                    None,
                ));
            }
        }
        Ok(Settings {
            config,
            backend,
            backend_from,
            token_budget,
            token_budget_from,
            record,
            replay,
            sim_delay_scale,
            env: env.clone(),
        })
    }

    /// The selected backend's configuration.
    pub fn selected(&self) -> &BackendConfig {
        // `resolve` checked that it exists.
        self.config
            .backend(&self.backend)
            .unwrap_or(&self.config.backends[0])
    }

    /// The line to print when the run's replies will be simulated.
    pub fn notice(&self) -> Option<String> {
        if self.replay.is_some() || self.selected().kind != BackendKind::Sim {
            return None;
        }
        if self.backend_from == "no configuration" {
            Some("note: no LLM backend configured (no .apxm/config.toml, OPENAI_API_KEY unset): using the offline simulator `sim`; replies are simulated".into())
        } else {
            Some(format!(
                "note: backend `{}` is the offline simulator; replies are simulated",
                self.backend
            ))
        }
    }
}
