//! Short-term memory: one bounded, sharded in-memory store per agent.
//!
//! Keys hash to one of [`SHARDS`] shards, each behind its own lock, so
//! writes to different keys rarely contend. When an agent holds more than
//! `capacity` entries, LRU-K (O'Neil et al., as in the AIOS memory manager)
//! picks the victim: the entry whose K-th most recent access is oldest;
//! entries accessed fewer than K times count as infinitely old and go
//! first (oldest last access first). The entry just written is never the
//! victim. Victims are returned to the caller, which swaps them out to LTM.

use crate::host::HostError;
use crate::sync::lock;
use serde_json::Value as Json;
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const SHARDS: usize = 16;

#[derive(Clone, Debug)]
struct Slot {
    value: Json,
    /// Write sequence number (orders listings oldest first).
    written: u64,
    /// Access times, most recent first, at most K.
    hist: VecDeque<u64>,
}

/// An entry as listed: key, value, write sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct StmEntry {
    pub key: String,
    pub value: Json,
    pub seq: u64,
}

pub struct Stm {
    shards: Vec<Mutex<HashMap<String, Slot>>>,
    len: AtomicUsize,
    capacity: usize,
    k: usize,
    clock: Arc<AtomicU64>,
}

fn shard_of(key: &str) -> usize {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() as usize) % SHARDS
}

impl Stm {
    /// `clock` is shared by all agents' stores (a logical access clock).
    pub fn new(capacity: usize, k: usize, clock: Arc<AtomicU64>) -> Stm {
        Stm {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            len: AtomicUsize::new(0),
            capacity: capacity.max(1),
            k: k.max(1),
            clock,
        }
    }

    fn shard(&self, key: &str) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        let m = &self.shards[shard_of(key)];
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn touch(&self, slot: &mut Slot, now: u64) {
        slot.hist.push_front(now);
        slot.hist.truncate(self.k);
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts or replaces `key`; returns the entries evicted to make room.
    pub fn put(&self, key: &str, value: Json) -> Vec<StmEntry> {
        self.put_at(key, value, None)
    }

    /// Like [`Stm::put`], keeping the given write sequence (swap-in).
    pub fn put_at(&self, key: &str, value: Json, seq: Option<u64>) -> Vec<StmEntry> {
        let now = self.tick();
        {
            let mut sh = self.shard(key);
            match sh.get_mut(key) {
                Some(slot) => {
                    slot.value = value;
                    slot.written = seq.unwrap_or(now);
                    let mut s = slot.clone();
                    self.touch(&mut s, now);
                    *slot = s;
                }
                None => {
                    let mut slot = Slot {
                        value,
                        written: seq.unwrap_or(now),
                        hist: VecDeque::new(),
                    };
                    self.touch(&mut slot, now);
                    sh.insert(key.to_string(), slot);
                    self.len.fetch_add(1, Ordering::AcqRel);
                }
            }
        }
        let mut evicted = Vec::new();
        while self.len() > self.capacity {
            match self.evict_one(key) {
                Some(e) => evicted.push(e),
                None => break,
            }
        }
        evicted
    }

    /// Reads `key` (counts as an access).
    pub fn get(&self, key: &str) -> Option<Json> {
        let now = self.tick();
        let mut sh = self.shard(key);
        let slot = sh.get_mut(key)?;
        slot.hist.push_front(now);
        slot.hist.truncate(self.k);
        Some(slot.value.clone())
    }

    pub fn remove(&self, key: &str) -> Option<Json> {
        let r = self.shard(key).remove(key);
        if r.is_some() {
            self.len.fetch_sub(1, Ordering::AcqRel);
        }
        r.map(|s| s.value)
    }

    /// Every entry, oldest write first (not an access).
    pub fn entries(&self) -> Vec<StmEntry> {
        let mut all = Vec::new();
        for m in &self.shards {
            let sh = m.lock().unwrap_or_else(|e| e.into_inner());
            all.extend(sh.iter().map(|(k, s)| StmEntry {
                key: k.clone(),
                value: s.value.clone(),
                seq: s.written,
            }));
        }
        all.sort_by_key(|e| e.seq);
        all
    }

    pub fn clear(&self) {
        for m in &self.shards {
            let mut sh = m.lock().unwrap_or_else(|e| e.into_inner());
            self.len.fetch_sub(sh.len(), Ordering::AcqRel);
            sh.clear();
        }
    }

    /// Removes and returns the LRU-K victim (never `keep`).
    fn evict_one(&self, keep: &str) -> Option<StmEntry> {
        // (backward K-distance rank, last access, key): smallest goes.
        let mut best: Option<(u64, u64, String)> = None;
        for m in &self.shards {
            let sh = m.lock().unwrap_or_else(|e| e.into_inner());
            for (k, s) in sh.iter() {
                if k == keep {
                    continue;
                }
                let kth = if s.hist.len() >= self.k {
                    s.hist.get(self.k - 1).copied().unwrap_or(0)
                } else {
                    0
                };
                let last = s.hist.front().copied().unwrap_or(0);
                let cand = (kth, last, k.clone());
                if best.as_ref().is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                    best = Some(cand);
                }
            }
        }
        let (_, _, key) = best?;
        let slot = self.shard(&key).remove(&key)?;
        self.len.fetch_sub(1, Ordering::AcqRel);
        Some(StmEntry {
            key,
            value: slot.value,
            seq: slot.written,
        })
    }
}

/// The host's STM: one [`Stm`] per agent; evicted entries swap out to the
/// agent store (namespace `stm:<session>`, this process's only).
impl super::AamHost {
    /// Number of STM entries of `agent` held in memory (not swapped out).
    pub fn stm_len(&self, agent: &str) -> usize {
        self.stm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(agent)
            .map_or(0, |s| s.len())
    }

    fn stm_of(&self, agent: &str) -> Arc<Stm> {
        if let Some(s) = self
            .stm
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(agent)
        {
            return s.clone();
        }
        self.stm
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(agent.to_string())
            .or_insert_with(|| {
                Arc::new(Stm::new(
                    self.config.memory.stm_capacity,
                    self.config.memory.lru_k,
                    self.clock.clone(),
                ))
            })
            .clone()
    }

    fn swap_out(&self, agent: &str, evicted: Vec<StmEntry>) -> Result<(), HostError> {
        for e in evicted {
            self.ltm.put(
                agent,
                &self.swap_ns,
                &e.key,
                &e.value,
                Some(i64::try_from(e.seq).unwrap_or(i64::MAX)),
                // STM is labelled per tier for the run it lives in.
                &[],
            )?;
            lock(&self.swapped).insert((agent.to_string(), e.key));
        }
        Ok(())
    }

    pub(super) fn stm_put(&self, agent: &str, key: &str, value: &Json) -> Result<(), HostError> {
        let s = self.stm_of(agent);
        let was_swapped = lock(&self.swapped).remove(&(agent.to_string(), key.to_string()));
        if was_swapped {
            self.ltm.remove(agent, &self.swap_ns, key)?;
        }
        let ev = s.put(key, value.clone());
        self.swap_out(agent, ev)
    }

    fn stm_has_swapped(&self, agent: &str) -> bool {
        lock(&self.swapped).iter().any(|(a, _)| a == agent)
    }

    /// STM entries (in memory and swapped out), oldest write first.
    pub(super) fn stm_entries(&self, agent: &str) -> Result<Vec<(String, Json, u64)>, HostError> {
        let mut all: Vec<(String, Json, u64)> = self
            .stm_of(agent)
            .entries()
            .into_iter()
            .map(|e| (e.key, e.value, e.seq))
            .collect();
        if self.stm_has_swapped(agent) {
            for e in self.ltm.all(agent, &self.swap_ns)? {
                all.push((e.key, e.value, u64::try_from(e.seq).unwrap_or(0)));
            }
            all.sort_by_key(|e| e.2);
        }
        Ok(all)
    }

    pub(super) fn stm_get(&self, agent: &str, key: &str) -> Result<Option<Json>, HostError> {
        let s = self.stm_of(agent);
        if let Some(v) = s.get(key) {
            return Ok(Some(v));
        }
        if !lock(&self.swapped).contains(&(agent.to_string(), key.to_string())) {
            return Ok(None);
        }
        // Swap the entry back in.
        let Some(e) = self.ltm.get(agent, &self.swap_ns, key)? else {
            return Ok(None);
        };
        self.ltm.remove(agent, &self.swap_ns, key)?;
        lock(&self.swapped).remove(&(agent.to_string(), key.to_string()));
        let ev = s.put_at(
            key,
            e.value.clone(),
            Some(u64::try_from(e.seq).unwrap_or(0)),
        );
        s.get(key);
        self.swap_out(agent, ev)?;
        Ok(Some(e.value))
    }
}

impl Drop for super::AamHost {
    fn drop(&mut self) {
        // Swapped-out STM belongs to this process only.
        let _ = self.ltm.clear_ns_prefix(&self.swap_ns);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lru_k_evicts_the_rarely_used_first() {
        let s = Stm::new(3, 2, Arc::new(AtomicU64::new(0)));
        assert!(s.put("a", json!(1)).is_empty());
        assert!(s.put("b", json!(2)).is_empty());
        assert!(s.put("c", json!(3)).is_empty());
        // a and c get a second access; b has only one.
        s.get("a");
        s.get("c");
        let ev = s.put("d", json!(4));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].key, "b");
        // d has one access (infinite K-distance) but was just written: the
        // next insertion evicts d before a or c.
        let ev = s.put("e", json!(5));
        assert_eq!(ev[0].key, "d");
        assert_eq!(s.len(), 3);
        // Among entries with K accesses, the oldest K-th access goes.
        s.get("e");
        let ev = s.put("f", json!(6));
        assert_eq!(ev[0].key, "a");
        let keys: Vec<String> = s.entries().into_iter().map(|e| e.key).collect();
        assert_eq!(keys, ["c", "e", "f"]);
    }
}
