//! Whether a running run is still owned by a live process: its lease.
//!
//! The process that runs a run names itself in the run's row (its
//! *owner*: `host:pid:start`, `start` being the process's start time in
//! clock ticks since boot, so a pid the kernel reused later names another
//! process) and keeps the row's lease fresh with a heartbeat
//! ([`HEARTBEAT_MS`]). A run is live while its lease has not expired, and,
//! when its owner ran on this host, while that very process (same pid, same
//! start time) still exists: a process killed on this machine frees its run
//! at once; one on another host (a shared directory) when its lease runs
//! out. A pid alone says nothing: a dead run whose pid now belongs to an
//! unrelated process is resumable.

/// How often the owner of a running run renews its lease.
pub const HEARTBEAT_MS: i64 = 2_000;

/// How long a lease lasts without renewal: several missed heartbeats.
pub const LEASE_MS: i64 = 5 * HEARTBEAT_MS;

/// The name of this host (for owners).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// The start time of process `pid` (clock ticks since boot, field 22 of
/// `/proc/PID/stat`); `None` where there is no `/proc` or no such process.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // are counted after its closing parenthesis (field 3 is index 0).
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process as a run's owner: `host:pid:start`.
pub fn this_process() -> String {
    static ME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id();
        format!(
            "{}:{pid}:{}",
            host_name(),
            start_ticks(pid).map_or_else(|| "?".to_string(), |t| t.to_string())
        )
    })
    .clone()
}

/// Whether the process an owner names still exists: `Some(false)` when it
/// ran on this host and no process has that pid and start time now;
/// `None` when this cannot be told (another host, no `/proc`, an owner
/// written without a start time): then only the lease decides.
pub fn owner_alive(owner: &str) -> Option<bool> {
    let mut parts = owner.rsplitn(3, ':');
    let start: u64 = parts.next()?.parse().ok()?;
    let pid: u32 = parts.next()?.parse().ok()?;
    let host = parts.next()?;
    if host != host_name() || !std::path::Path::new("/proc/self/stat").exists() {
        return None;
    }
    Some(start_ticks(pid) == Some(start))
}

/// Is a running run with this owner and lease live (owned by a process
/// that is not this one)? `now_ms` and `lease_until` in ms since the epoch.
pub fn held_elsewhere(owner: Option<&str>, lease_until: Option<i64>, now_ms: i64) -> bool {
    let Some(owner) = owner else {
        // Written by a build without leases: its owner cannot be renewing.
        return false;
    };
    if owner == this_process() {
        return false;
    }
    lease_until.is_some_and(|l| l >= now_ms) && owner_alive(owner) != Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_names_one_process() {
        let me = this_process();
        assert!(
            start_ticks(std::process::id()).is_some(),
            "the tests run where /proc exists"
        );
        assert_eq!(owner_alive(&me), Some(true));
        // The same pid with another start time: a reused pid.
        let (head, start) = me.rsplit_once(':').expect("host:pid:start");
        let start: u64 = start.parse().expect("ticks");
        assert_eq!(owner_alive(&format!("{head}:{}", start + 1)), Some(false));
        // Another host: only the lease can tell.
        assert_eq!(owner_alive(&format!("elsewhere.example:1:{start}")), None);
    }
}
