//! Host steal: CPU time the hypervisor gave to other guests while this
//! virtual machine had work to run (the `steal` column of `/proc/stat`).
//!
//! The workloads' makespans are a few ms above their critical paths, so a
//! run during which the host took the CPUs away for a while says more
//! about the host than about the runtime. Each measured run records the
//! share of its CPU time stolen, so a slow run on a busy host shows as
//! such in the report.

/// The machine-wide steal counter, in `USER_HZ` ticks (1/100 s on Linux
/// whatever the kernel's tick rate); `None` where `/proc/stat` is missing
/// or has no steal column.
pub fn steal_ticks() -> Option<u64> {
    parse_steal(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The steal field of the aggregate `cpu` line: user nice system idle
/// iowait irq softirq **steal** ….
fn parse_steal(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// `ticks` of steal as a percentage of `cpus` CPUs over `wall_ms`.
pub fn percent(ticks: u64, wall_ms: f64, cpus: usize) -> f64 {
    let capacity_ms = wall_ms * cpus.max(1) as f64;
    if capacity_ms <= 0.0 {
        return 0.0;
    }
    (ticks as f64 * 10.0 / capacity_ms * 100.0).min(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steal_column_is_the_eighth_number_of_the_cpu_line() {
        let stat = "cpu  5268 12 1703 291520 355 0 61 4411 0 0\ncpu0 2634 6 851 145760 177 0 30 2205 0 0\nintr 1\n";
        assert_eq!(parse_steal(stat), Some(4411));
        assert_eq!(parse_steal("cpu  1 2 3 4\n"), None);
        assert_eq!(parse_steal("intr 1\n"), None);
    }

    #[test]
    fn percent_of_the_cpus_over_the_wall_time() {
        // 5 ticks = 50 ms stolen out of 2 CPUs × 100 ms.
        assert_eq!(percent(5, 100.0, 2), 25.0);
        assert_eq!(percent(0, 100.0, 2), 0.0);
        assert_eq!(percent(1000, 100.0, 2), 100.0);
        assert_eq!(percent(3, 0.0, 2), 0.0);
    }
}
