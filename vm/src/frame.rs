//! Frames: one live instance of a region (a flow body for a call, or the
//! region of an `if`/`switch`/`loop`/`try_catch` taken at run time).
//!
//! A frame holds one write-once slot per value of its region and one atomic
//! pending counter per op; a value arriving in a slot decrements the
//! counters of the slot's consumers and an op whose counter reaches zero is
//! ready. `remaining` counts ops not yet completed: when it reaches zero the
//! frame is complete and its owner (the op that started it) completes with
//! the values the frame yielded or returned.

use crate::exec::Results;
use crate::tx::Tx;
use crate::value::Val;
use ais_ir::bytecode::{Program, RegionCode};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// What a frame does for the op that started it.
pub(crate) enum Role {
    /// Callee body of a `flow.call`.
    Call,
    /// The taken region of an `if` / `switch`.
    Branch,
    /// The `try` region; `settled` is claimed by the first of completion or failure.
    Try,
    /// The `catch` region (its arg is the error value).
    Catch,
    /// Iteration `index` of a `loop`.
    Iter { state: Arc<LoopState>, index: usize },
    /// An `on` handler started by a `communicate` op (the owner); it runs
    /// detached: its completion delivers nothing and its failures are not
    /// caught by the sender's `try`.
    Handler,
    /// The entry flow of an inner plan, started by a `solve` op (the owner);
    /// its return value is the op's.
    Plan,
}

impl Role {
    /// How a frame was started, as a tag and the loop index (0 outside a
    /// loop): the part of a frame's dynamic identity its owner op leaves
    /// open (the journal's `op_key`, the trace's [`path_key`]).
    pub(crate) fn tag_and_index(&self) -> (u8, u64) {
        match self {
            Role::Call => (1, 0),
            Role::Branch => (2, 0),
            Role::Try => (3, 0),
            Role::Catch => (4, 0),
            Role::Iter { index, .. } => (5, *index as u64),
            Role::Handler => (6, 0),
            Role::Plan => (7, 0),
        }
    }
}

/// A compiled program the run executes: the developer's, or an inner plan
/// linked while the run goes (`scheduler::inner_plan`). A frame's `flow`
/// indexes its unit's flows; in telemetry its flow id is `base + flow`, so
/// plan flows get ids past the program's own.
#[derive(Clone, Copy)]
pub(crate) struct Unit<'r> {
    pub program: &'r Program,
    pub base: u32,
    /// An inner plan's early calls (`scheduler::early_calls`), which its
    /// tool ops take their results from.
    pub prefetch: Option<&'r crate::prefetch::Prefetch>,
}

pub(crate) struct Owner<'r> {
    pub frame: Arc<Frame<'r>>,
    pub op: u32,
    pub role: Role,
}

/// Shared by the iterations of one `loop` instance.
pub(crate) struct LoopState {
    pub remaining: AtomicUsize,
    pub count: usize,
    /// Values yielded by the last iteration (the loop's results).
    pub last: OnceLock<Results>,
}

/// splitmix64's finaliser: spreads a value's bits (frame paths).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A frame's dynamic identity: its owner's path, the op that started it,
/// how (the loop index of an iteration), and the flow (telemetry id),
/// region and agent it runs. Like the journal's `op_key` it is the same in
/// every execution of a run whatever the scheduling order (frames are
/// started by ops, not by time), so a resumed attempt's frames have the
/// paths of the interrupted attempt's (trace span ids, `observe::otlp`).
/// A few multiplications per frame: no hashing of the whole chain.
pub(crate) fn path_key(owner: Option<&Owner<'_>>, flow: u32, region: u32, agent: u32) -> u64 {
    let mut h = match owner {
        None => mix(0x6169_732e_656e_7472), // "ais.entr"
        Some(o) => {
            let (tag, idx) = o.role.tag_and_index();
            let h = mix(o.frame.path ^ ((u64::from(o.op) << 8) | u64::from(tag)));
            mix(h.wrapping_add(idx))
        }
    };
    h = mix(h ^ ((u64::from(flow) << 32) | u64::from(region)));
    mix(h.wrapping_add(u64::from(agent)))
}

/// Aligned to two cache lines so that, inside its `Arc`, the reference
/// count (written by any worker whenever a task of the frame is queued or
/// dropped) does not share a line with the fields every op reads.
#[repr(align(128))]
pub(crate) struct Frame<'r> {
    pub id: u64,
    /// The frame's dynamic identity ([`path_key`]): the same in every
    /// attempt of a run, where `id` counts frames as they start.
    pub path: u64,
    pub flow: u32,
    pub region: u32,
    pub agent: u32,
    pub code: &'r RegionCode,
    pub slots: Box<[OnceLock<Val>]>,
    /// Provenance label of each slot (`crate::ifc`), written before the
    /// slot's value is set (the value's release publishes it).
    pub labels: Box<[AtomicU64]>,
    /// Label of the control context: the conditions of the branches and
    /// loops (and the caller's context) this frame runs under; every value
    /// the frame computes carries it.
    pub pc: u64,
    /// Labels of the values its `yield` / `return` produced.
    pub ylab: AtomicU64,
    pub pending: Box<[AtomicU32]>,
    pub remaining: AtomicUsize,
    /// The program its code belongs to.
    pub unit: Unit<'r>,
    /// `None` for the entry frame.
    pub owner: Option<Owner<'r>>,
    pub cancelled: AtomicBool,
    /// Try frames: set once, by completion or by the first failure inside.
    pub settled: AtomicBool,
    /// Values of the region's `yield` / `return`.
    pub yielded: OnceLock<Results>,
    /// Loops: the next iteration, which receives this one's yields as its
    /// carried arguments. Taken when delivered.
    pub next_iter: Mutex<Option<Arc<Frame<'r>>>>,
    /// Estimated remaining path after this frame completes (priority base).
    pub tail_ms: u64,
    /// Call depth (entry = 0).
    pub depth: u32,
    /// The flow call it belongs to, for telemetry.
    pub invocation: crate::telemetry::Invocation,
    /// The run's live-frame count, released when the frame is dropped.
    frames: &'r FrameCount,
    /// The buffer of the innermost `try` body this frame belongs to
    /// (`None`: outside any; see `crate::tx`).
    pub tx: Option<Arc<Tx<'r>>>,
}

impl<'r> Frame<'r> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        unit: Unit<'r>,
        flow: u32,
        region: u32,
        agent: u32,
        code: &'r RegionCode,
        owner: Option<Owner<'r>>,
        tail_ms: u64,
        depth: u32,
        frames: &'r FrameCount,
        tx: Option<Arc<Tx<'r>>>,
    ) -> Frame<'r> {
        let slots = (0..code.n_slots()).map(|_| OnceLock::new()).collect();
        let labels = (0..code.n_slots()).map(|_| AtomicU64::new(0)).collect();
        let pending = code.pending.iter().map(|&p| AtomicU32::new(p)).collect();
        let path = path_key(
            owner.as_ref(),
            unit.base.saturating_add(flow),
            region,
            agent,
        );
        let invocation = match &owner {
            None => crate::telemetry::Invocation {
                id,
                caller: None,
                key: path,
                caller_key: None,
            },
            Some(o) if matches!(o.role, Role::Call | Role::Handler | Role::Plan) => {
                crate::telemetry::Invocation {
                    id,
                    caller: Some(o.frame.invocation.id),
                    key: path,
                    caller_key: Some(o.frame.invocation.key),
                }
            }
            Some(o) => o.frame.invocation,
        };
        Frame {
            id,
            path,
            flow,
            region,
            agent,
            code,
            slots,
            labels,
            pc: 0,
            ylab: AtomicU64::new(0),
            pending,
            remaining: AtomicUsize::new(code.ops.len()),
            unit,
            owner,
            cancelled: AtomicBool::new(false),
            settled: AtomicBool::new(false),
            yielded: OnceLock::new(),
            next_iter: Mutex::new(None),
            tail_ms,
            depth,
            invocation,
            frames,
            tx,
        }
    }

    /// The flow's id in telemetry (see [`Unit`]).
    pub fn flow_id(&self) -> u32 {
        self.unit.base.saturating_add(self.flow)
    }

    /// Cancelled itself or below a cancelled frame (an abandoned `try`).
    ///
    /// The walk stops at an `on` handler: a handler runs detached from the
    /// op that started it, so abandoning the sender's `try` must not cancel
    /// it (a cancelled handler frame never completes, so the run would wait
    /// for it forever and stall).
    pub fn is_cancelled(&self) -> bool {
        let mut f = self;
        loop {
            if f.cancelled.load(Ordering::Acquire) {
                return true;
            }
            match &f.owner {
                Some(Owner {
                    role: Role::Handler,
                    ..
                })
                | None => return false,
                Some(o) => f = &o.frame,
            }
        }
    }

    pub fn is_try(&self) -> bool {
        matches!(
            self.owner,
            Some(Owner {
                role: Role::Try,
                ..
            })
        )
    }

    /// Counts one arrived input of op `op`; true when it was the last.
    pub fn input_arrived(&self, op: u32) -> bool {
        // With a single input this is the only arrival: skip the locked
        // read-modify-write on its counter.
        if self.code.pending.get(op as usize) == Some(&1) {
            return true;
        }
        self.pending
            .get(op as usize)
            .is_some_and(|p| p.fetch_sub(1, Ordering::AcqRel) == 1)
    }

    pub fn slot(&self, s: u32) -> Option<&Val> {
        self.slots.get(s as usize).and_then(OnceLock::get)
    }

    /// The label of slot `s` (0: none, or no such slot).
    pub fn label(&self, s: u32) -> u64 {
        self.labels
            .get(s as usize)
            .map_or(0, |l| l.load(Ordering::Relaxed))
    }

    /// Adds `l` to slot `s`'s label.
    pub fn add_label(&self, s: u32, l: u64) {
        if l != 0 {
            if let Some(x) = self.labels.get(s as usize) {
                x.fetch_or(l, Ordering::Relaxed);
            }
        }
    }

    /// The union of the labels of `slots`, with the frame's context.
    pub fn label_of(&self, slots: &[u32]) -> u64 {
        slots.iter().fold(self.pc, |a, &s| a | self.label(s))
    }

    pub fn take_next(&self) -> Option<Arc<Frame<'r>>> {
        self.next_iter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

impl<'r> Drop for Frame<'r> {
    /// Frames form chains (callee → caller, iteration → next iteration) that
    /// can be long; unlink them iteratively so dropping never recurses deeply.
    fn drop(&mut self) {
        self.frames.release();
        let mut work: Vec<Arc<Frame<'r>>> = Vec::new();
        if let Some(o) = self.owner.take() {
            work.push(o.frame);
        }
        if let Some(n) = self
            .next_iter
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            work.push(n);
        }
        while let Some(f) = work.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(f) {
                if let Some(o) = inner.owner.take() {
                    work.push(o.frame);
                }
                if let Some(n) = inner
                    .next_iter
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                {
                    work.push(n);
                }
            }
        }
    }
}

/// Counts live frames against a limit (`crate::scheduler::limits`).
pub(crate) struct FrameCount {
    pub live: AtomicUsize,
    pub max: usize,
}

impl FrameCount {
    pub fn new(max: usize) -> FrameCount {
        FrameCount {
            live: AtomicUsize::new(0),
            max,
        }
    }

    /// Claims a frame; `false` (claiming nothing) when at the limit.
    pub fn claim(&self) -> bool {
        let n = self.live.fetch_add(1, Ordering::Relaxed);
        if n >= self.max {
            self.live.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A frame was dropped.
    pub fn release(&self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}
