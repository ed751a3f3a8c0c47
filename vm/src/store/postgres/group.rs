//! Group commit: journal writes from every thread of the process go
//! through one channel to a few writer threads; each drains what is
//! pending and commits it in one transaction (one WAL flush), then answers
//! each writer.
//! A 64-way fan-out pays a few commits, not 64.

use super::is_retryable;
use crate::store::rows::JournalError;
use crate::store::Entry;
use postgres::{Client, Config, NoTls, Statement};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Most writes in one transaction.
const MAX_BATCH: usize = 1024;
/// Attempts of one batch on serialization failures and deadlocks.
const ATTEMPTS: u32 = 5;
/// Writer threads (one connection each) per store.
const WRITERS: usize = 4;

type Reply = mpsc::SyncSender<Result<(), JournalError>>;

struct Job {
    run: String,
    fence: i64,
    entries: Vec<Entry>,
    reply: Reply,
}

pub(crate) struct GroupCommit {
    tx: Mutex<mpsc::Sender<Job>>,
    stats: Arc<Stats>,
}

/// Transactions committed and writes they carried (for tests and `aisc
/// store status`: writes / commits is the batching factor).
#[derive(Debug, Default)]
pub struct Stats {
    pub commits: AtomicU64,
    pub writes: AtomicU64,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GroupCommit")
    }
}

/// Fence-checked upsert of one run's entries: inserts nothing (0 rows)
/// when `fence` is not the run's token. The run row is share-locked until
/// commit, so a takeover (which updates it) waits for this transaction
/// and then reads these entries.
const UPSERT: &str = "WITH f AS (SELECT id FROM runs WHERE id = $1 AND fence = $2 FOR SHARE)
    INSERT INTO entries (run, key, seq, kind, op, input_hash, value, tokens, labels)
    SELECT f.id, u.key, u.seq, u.kind, u.op, u.h, u.v, u.t, u.l
    FROM f, unnest($3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[], $10::text[])
        AS u(key, seq, kind, op, h, v, t, l)
    ON CONFLICT (run, key) DO UPDATE SET seq = EXCLUDED.seq, kind = EXCLUDED.kind,
        op = EXCLUDED.op, input_hash = EXCLUDED.input_hash, value = EXCLUDED.value,
        tokens = EXCLUDED.tokens, labels = EXCLUDED.labels";

impl GroupCommit {
    pub(crate) fn start(config: Config, location: String) -> GroupCommit {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let stats = Arc::new(Stats::default());
        // Several writers: while one waits for its commit's WAL flush the
        // next batch forms and goes to another (PostgreSQL flushes
        // concurrent commits together). Without any thread the receiver is
        // gone and every write fails with "the store's writer thread
        // stopped".
        for i in 0..WRITERS {
            let (rx, s, config, location) =
                (rx.clone(), stats.clone(), config.clone(), location.clone());
            let _ = std::thread::Builder::new()
                .name(format!("ais-store-writer-{i}"))
                .spawn(move || writer(&config, &location, &rx, &s));
        }
        GroupCommit {
            tx: Mutex::new(tx),
            stats,
        }
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Queues the write and waits until it is durable (or refused).
    pub(crate) fn write(
        &self,
        run: &str,
        fence: i64,
        entries: &[Entry],
    ) -> Result<(), JournalError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            run: run.to_string(),
            fence,
            entries: entries.to_vec(),
            reply,
        };
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job)
            .is_ok();
        let gone = || JournalError::new("journal.write", "the store's writer thread stopped");
        if !sent {
            return Err(gone());
        }
        answer.recv().unwrap_or_else(|_| Err(gone()))
    }
}

/// Takes the next batch: waits for one job, then drains what is pending.
fn next_batch(rx: &Mutex<mpsc::Receiver<Job>>) -> Option<Vec<Job>> {
    let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
    let mut batch = vec![rx.recv().ok()?];
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(j) => batch.push(j),
            Err(_) => break,
        }
    }
    Some(batch)
}

fn writer(config: &Config, location: &str, rx: &Mutex<mpsc::Receiver<Job>>, stats: &Stats) {
    let mut client: Option<(Client, Statement)> = None;
    while let Some(batch) = next_batch(rx) {
        let mut outcome = Err(JournalError::new("journal.write", "not attempted"));
        for _ in 0..ATTEMPTS {
            let (mut c, st) = match client.take().filter(|(c, _)| !c.is_closed()) {
                Some(c) => c,
                None => match connect(config) {
                    Ok(c) => c,
                    Err(e) => {
                        outcome = Err(write_err(location, &e));
                        continue;
                    }
                },
            };
            match commit(&mut c, &st, &batch) {
                Ok(fenced) => {
                    stats.commits.fetch_add(1, Ordering::Relaxed);
                    stats
                        .writes
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    outcome = Ok(fenced);
                    client = Some((c, st));
                    break;
                }
                Err(e) => {
                    let retry = is_retryable(&e) || c.is_closed();
                    outcome = Err(write_err(location, &e));
                    if !c.is_closed() {
                        client = Some((c, st));
                    }
                    if !retry {
                        break;
                    }
                }
            }
        }
        for job in batch {
            let r = match &outcome {
                Ok(fenced) if fenced.contains(&(job.run.clone(), job.fence)) => {
                    Err(crate::store::fenced(&job.run, job.fence))
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e.clone()),
            };
            let _ = job.reply.send(r);
        }
    }
}

fn write_err(location: &str, e: &postgres::Error) -> JournalError {
    JournalError::new(
        "journal.write",
        format!(
            "cannot write the run journal `{location}`: {}",
            super::describe(e)
        ),
    )
}

/// Commits a batch in one transaction; returns the `(run, fence)` pairs
/// whose fence was stale (their entries were not written).
/// A writer's connection with its upsert prepared once.
fn connect(config: &Config) -> Result<(Client, Statement), postgres::Error> {
    let mut c = config.connect(NoTls)?;
    let st = c.prepare(UPSERT)?;
    Ok((c, st))
}

fn commit(
    c: &mut Client,
    st: &Statement,
    batch: &[Job],
) -> Result<Vec<(String, i64)>, postgres::Error> {
    // Group by (run, fence), keeping each key's last write.
    let mut groups: Vec<((String, i64), Vec<Entry>)> = Vec::new();
    let mut index: HashMap<(String, i64), usize> = HashMap::new();
    for j in batch {
        let k = (j.run.clone(), j.fence);
        let i = *index.entry(k.clone()).or_insert_with(|| {
            groups.push((k, Vec::new()));
            groups.len() - 1
        });
        for e in &j.entries {
            let es = &mut groups[i].1;
            match es.iter_mut().find(|x| x.key == e.key) {
                Some(x) => *x = e.clone(),
                None => es.push(e.clone()),
            }
        }
    }
    let mut tx = c.transaction()?;
    let mut fenced = Vec::new();
    for ((run, fence), es) in &groups {
        let keys: Vec<&str> = es.iter().map(|e| e.key.as_str()).collect();
        let seqs: Vec<i64> = es.iter().map(|e| e.seq).collect();
        let kinds: Vec<&str> = es.iter().map(|e| e.kind.as_str()).collect();
        let ops: Vec<&str> = es.iter().map(|e| e.op.as_str()).collect();
        let hashes: Vec<&str> = es.iter().map(|e| e.hash.as_str()).collect();
        let values: Vec<Option<&str>> = es.iter().map(|e| e.value.as_deref()).collect();
        let tokens: Vec<i64> = es.iter().map(|e| e.tokens).collect();
        let labels: Vec<Option<&str>> = es.iter().map(|e| e.labels.as_deref()).collect();
        let n = tx.execute(
            st,
            &[
                run, fence, &keys, &seqs, &kinds, &ops, &hashes, &values, &tokens, &labels,
            ],
        )?;
        if n == 0 && !es.is_empty() {
            fenced.push((run.clone(), *fence));
        }
    }
    tx.commit()?;
    Ok(fenced)
}
