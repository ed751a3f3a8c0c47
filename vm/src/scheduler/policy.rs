//! Queue policies of the I/O executor: which waiting call goes next when a
//! backend is at its concurrency limit.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::str::FromStr;

/// The order in which queued blocking calls are started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Arrival order.
    #[default]
    Fifo,
    /// Longest estimated remaining path first (from latency classes); ties
    /// in arrival order.
    CriticalPath,
    /// One call per agent in turn, each agent's calls in arrival order
    /// (as AIOS does across agents).
    RoundRobin,
}

impl Policy {
    pub const ALL: [Policy; 3] = [Policy::Fifo, Policy::CriticalPath, Policy::RoundRobin];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::CriticalPath => "critical-path",
            Policy::RoundRobin => "round-robin",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Unknown policy name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown queue policy `{0}` (expected fifo, critical-path or round-robin)")]
pub struct UnknownPolicy(pub String);

impl FromStr for Policy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Policy, UnknownPolicy> {
        match s {
            "fifo" => Ok(Policy::Fifo),
            "critical-path" | "critical_path" | "cp" => Ok(Policy::CriticalPath),
            "round-robin" | "round_robin" | "rr" => Ok(Policy::RoundRobin),
            other => Err(UnknownPolicy(other.to_string())),
        }
    }
}

struct Prio<T> {
    prio: u64,
    seq: Reverse<u64>,
    item: T,
}

impl<T> PartialEq for Prio<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.prio, self.seq) == (o.prio, o.seq)
    }
}
impl<T> Eq for Prio<T> {}
impl<T> PartialOrd for Prio<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Prio<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.prio, self.seq).cmp(&(o.prio, o.seq))
    }
}

/// A queue ordered by a [`Policy`].
pub struct PolicyQueue<T> {
    policy: Policy,
    seq: u64,
    fifo: VecDeque<T>,
    heap: BinaryHeap<Prio<T>>,
    /// Round robin: per-agent queues in first-seen order, and the next turn.
    agents: Vec<(u32, VecDeque<T>)>,
    turn: usize,
    len: usize,
}

impl<T> PolicyQueue<T> {
    pub fn new(policy: Policy) -> PolicyQueue<T> {
        PolicyQueue {
            policy,
            seq: 0,
            fifo: VecDeque::new(),
            heap: BinaryHeap::new(),
            agents: Vec::new(),
            turn: 0,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues `item` with its priority (remaining path, ms) and agent.
    pub fn push(&mut self, item: T, prio: u64, agent: u32) {
        self.seq += 1;
        self.len += 1;
        match self.policy {
            Policy::Fifo => self.fifo.push_back(item),
            Policy::CriticalPath => self.heap.push(Prio {
                prio,
                seq: Reverse(self.seq),
                item,
            }),
            Policy::RoundRobin => match self.agents.iter_mut().find(|(a, _)| *a == agent) {
                Some((_, q)) => q.push_back(item),
                None => self.agents.push((agent, VecDeque::from([item]))),
            },
        }
    }

    pub fn pop(&mut self) -> Option<T> {
        let item = match self.policy {
            Policy::Fifo => self.fifo.pop_front(),
            Policy::CriticalPath => self.heap.pop().map(|p| p.item),
            Policy::RoundRobin => {
                let n = self.agents.len();
                let mut found = None;
                for k in 0..n {
                    let i = (self.turn + k) % n;
                    if let Some(x) = self.agents[i].1.pop_front() {
                        self.turn = (i + 1) % n;
                        found = Some(x);
                        break;
                    }
                }
                found
            }
        };
        if item.is_some() {
            self.len -= 1;
        }
        item
    }

    /// Empties the queue.
    pub fn clear(&mut self) {
        self.fifo.clear();
        self.heap.clear();
        self.agents.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(mut q: PolicyQueue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn policies_order_items() {
        let items = [
            ("a1", 5, 0),
            ("a2", 50, 0),
            ("b1", 10, 1),
            ("a3", 50, 0),
            ("c1", 1, 2),
        ];
        let fill = |p| {
            let mut q = PolicyQueue::new(p);
            for (n, prio, agent) in items {
                q.push(n, prio, agent);
            }
            q
        };
        assert_eq!(drain(fill(Policy::Fifo)), ["a1", "a2", "b1", "a3", "c1"]);
        assert_eq!(
            drain(fill(Policy::CriticalPath)),
            ["a2", "a3", "b1", "a1", "c1"]
        );
        assert_eq!(
            drain(fill(Policy::RoundRobin)),
            ["a1", "b1", "c1", "a2", "a3"]
        );
        assert_eq!("rr".parse::<Policy>(), Ok(Policy::RoundRobin));
        assert!("lifo".parse::<Policy>().is_err());
    }
}
