//! `aisc` run in a directory of its own, untouched by the caller's
//! environment: no provider keys, configuration, backend or store from the
//! outside, `HOME` in the directory, no colours.

use std::path::Path;
use std::process::Command;

pub fn aisc(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aisc"));
    c.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("APXM_CONFIG")
        .env_remove("APXM_BACKEND")
        .env_remove("AIS_STORE")
        .env("HOME", dir)
        .env("NO_COLOR", "1")
        .current_dir(dir);
    c
}
