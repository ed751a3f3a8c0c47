//! The pass manager and the optimization passes (see `docs/passes.md`).
//!
//! ```
//! use ais_ir::passes::{OptLevel, PassManager};
//! let mut m = ais_ir::parse_module(
//!     "agent @A {\n  flow @main(%x: str) -> str entry {\n    %0 = ask %x : str\n    %1 = ask %0 : str\n    return %1\n  }\n}\n",
//! ).expect("valid IR");
//! let mut pm = PassManager::new(OptLevel::O1);
//! pm.verify_each(true);
//! let stats = pm.run(&mut m).expect("passes keep the IR valid");
//! assert_eq!(stats.llm_calls_after(), 1);
//! let estimate = ais_ir::passes::critical_path(&m);
//! assert_eq!(estimate.flows[0].makespan_ms, 1000);
//! ```
//!
//! - [`Pass`]: one transformation (`name`, `run(&mut Module) -> Changed`).
//! - [`Pipeline`]: parsed from `canonicalize,fuse-ask{max-depth=3},cse,dce`
//!   or a preset ([`OptLevel`]); [`PASSES`] is the registry.
//! - [`PassManager`]: runs a pipeline, verifies after each pass if asked,
//!   dumps IR under MLIR-style headers, collects [`Stats`].
//! - [`critical_path()`]: the makespan analysis.

pub mod cache_layout;
mod canonicalize;
pub mod critical_path;
mod cse;
mod dce;
mod failure;
pub mod fuse_ask;
mod manager;
mod pipeline;
pub(crate) mod util;

#[cfg(test)]
mod deep_tests;
#[cfg(test)]
mod tests;

pub use cache_layout::{cache_estimate, CacheClass, CacheEstimate, CacheLayout};
pub use canonicalize::Canonicalize;
pub use critical_path::{critical_path, Estimate, FlowEstimate, PathStep, Phase};
pub use cse::Cse;
pub use dce::Dce;
pub use fuse_ask::FuseAsk;
pub use manager::{PassManager, PassStats, PrintOptions, Stats, VerifyFailure};
pub use pipeline::{create_pass, pass_names, OptLevel, PassSpec, Pipeline, PipelineError, PASSES};

use crate::Module;

/// Whether a pass changed the module.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Changed {
    #[default]
    No,
    Yes,
}

impl Changed {
    pub fn changed(self) -> bool {
        self == Changed::Yes
    }
}

impl From<bool> for Changed {
    fn from(b: bool) -> Changed {
        if b {
            Changed::Yes
        } else {
            Changed::No
        }
    }
}

impl std::ops::BitOrAssign for Changed {
    fn bitor_assign(&mut self, rhs: Changed) {
        if rhs == Changed::Yes {
            *self = Changed::Yes;
        }
    }
}

/// A transformation of a whole module.
///
/// Precondition: the module verifies without errors. Postcondition: it
/// still does (the pass manager checks this with `verify_each`), and the
/// observable behaviour (effects, their order, the flows' results) is
/// unchanged, except that `fuse-ask` reduces the number of LLM calls.
pub trait Pass {
    /// The registry name (`cse`).
    fn name(&self) -> &'static str;
    /// Runs the pass; returns [`Changed::Yes`] iff the module changed.
    fn run(&mut self, m: &mut Module) -> Changed;
    /// Pass-specific counters of the last run (`("fused calls", 4)`).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
