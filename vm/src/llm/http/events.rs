//! The event-driven transport for local servers: one I/O thread per
//! backend, no thread per call.
//!
//! With the thread transport every call wakes a thread to send its request
//! and keeps it blocked until the reply; on a small machine the wake-ups
//! of a wide fan-out cost more than the requests themselves (64 calls to a
//! local server: sent over 2.5–3.5 ms through threads, 0.6 ms from one
//! thread). Here the thread that starts a call writes the request itself
//! on a kept-alive connection, and one thread waits on every socket
//! (`mio`) and finishes calls as their replies come in.
//!
//! It serves plain-HTTP endpoints on the loopback interface (Ollama, vLLM,
//! llama.cpp, LM Studio, the mock): no TLS, no proxy, no DNS beyond
//! `localhost`. Remote endpoints use the thread transport, where the
//! network's latency dwarfs a wake-up.
//!
//! A call is one HTTP exchange; what the reply means (retries, repairs) is
//! decided by the caller. A kept-alive connection found closed before the
//! request could be written is replaced by a fresh one; once a request is
//! out, a lost connection is the call's failure (the server may have acted
//! on it), left to the retry policy.
//!
//! One file over the usual size: the connection states, the I/O loop and
//! the deadlines are one state machine whose invariant (each call's
//! `on_outcome` runs exactly once) reads best in one place. HTTP framing
//! is in `framing.rs`.

use super::super::wire;
use super::framing::{parse_partial, parse_reply, Parsed, MAX_BODY, MAX_HEAD};
use super::Exchange;

mod target;
use crate::llm::{CancelToken, LlmErrorKind};
use crate::sync::lock;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
pub(super) use target::Target;

/// How often in-flight calls are checked for cancellation.
const CANCEL_CHECK: Duration = Duration::from_millis(20);

const WAKER: Token = Token(usize::MAX);

/// What a call ended with, and how long its exchange took.
pub(super) enum Outcome {
    Done(Exchange, Duration),
    Cancelled,
}

/// Receives a call's outcome, on the I/O thread (or on the submitting
/// thread when the call cannot even be started). It must not block.
pub(super) type OnOutcome = Box<dyn FnOnce(Outcome) + Send>;

/// One request to send.
pub(super) struct Call {
    /// The whole request: head and body.
    pub bytes: Vec<u8>,
    /// When the attempt times out.
    pub deadline: Instant,
    pub cancel: CancelToken,
    pub on_outcome: OnOutcome,
    /// A streamed call: its reply's body goes out as it arrives.
    pub stream: Option<Box<StreamWatch>>,
}

/// Receives a reply's status, head and each new piece of its decoded body
/// as the bytes come in, on the I/O thread (it must not block), before
/// the call's outcome and with no lock of the transport held. The outcome
/// still carries the whole body.
pub(super) type OnBody = Arc<dyn Fn(u16, &[(String, String)], &[u8]) + Send + Sync>;

/// A piece of a streamed body to hand over once the state lock is released.
type BodyPiece = (OnBody, u16, Vec<(String, String)>, Vec<u8>);

/// How a streamed call is watched.
pub(super) struct StreamWatch {
    pub on_body: OnBody,
    /// The call times out when no bytes came for this long (instead of at
    /// a fixed deadline).
    pub idle: Duration,
}

/// A call in progress.
struct Active {
    call: Call,
    started: Instant,
    /// Addresses of the target tried so far for this call.
    tried: usize,
    /// Body bytes of a streamed reply handed over so far.
    fed: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Connecting,
    Busy,
    Idle,
}

struct Conn {
    stream: TcpStream,
    phase: Phase,
    active: Option<Active>,
    /// Bytes of the request written so far.
    written: usize,
    /// Reply bytes read so far.
    buf: Vec<u8>,
    /// The connection served an earlier call (the server may have closed it).
    reused: bool,
    /// When connecting gives up.
    connect_deadline: Instant,
    /// Interested in writability (a request not fully written yet).
    wants_write: bool,
}

#[derive(Default)]
struct State {
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    idle: Vec<usize>,
    /// Calls waiting for the I/O thread to open a connection.
    queued: VecDeque<Active>,
    closed: bool,
    running: bool,
}

struct Shared {
    target: Target,
    /// The address of `target` that answered last.
    preferred: std::sync::atomic::AtomicUsize,
    connect_timeout: Duration,
    /// Idle connections kept for reuse, at most.
    max_idle: usize,
    registry: Registry,
    waker: Waker,
    state: Mutex<State>,
    /// The poll, until the I/O thread takes it.
    poll: Mutex<Option<Poll>>,
}

/// A backend's event transport. Dropping it stops the I/O thread; calls in
/// flight then end with a connection error.
pub(super) struct EventTransport {
    shared: Arc<Shared>,
}

impl EventTransport {
    /// A transport to `target` keeping up to `max_idle` idle connections.
    pub fn new(
        target: Target,
        connect_timeout: Duration,
        max_idle: usize,
    ) -> io::Result<EventTransport> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        Ok(EventTransport {
            shared: Arc::new(Shared {
                target,
                preferred: std::sync::atomic::AtomicUsize::new(0),
                connect_timeout,
                max_idle: max_idle.max(1),
                registry,
                waker,
                state: Mutex::new(State::default()),
                poll: Mutex::new(Some(poll)),
            }),
        })
    }

    pub fn target(&self) -> &Target {
        &self.shared.target
    }

    /// Starts `calls`: each goes out at once on an idle connection from
    /// this thread, or to the I/O thread, which opens a connection for it.
    /// Each call's `on_outcome` runs exactly once.
    pub fn submit(&self, calls: Vec<Call>) {
        let shared = &self.shared;
        let mut failed: Vec<(OnOutcome, Exchange)> = Vec::new();
        let mut wake = false;
        {
            let mut st = lock(&shared.state);
            if !st.running {
                if let Err(e) = start_thread(shared) {
                    drop(st);
                    for call in calls {
                        (call.on_outcome)(Outcome::Done(
                            transport(
                                LlmErrorKind::Connect,
                                format!("cannot start the I/O thread: {e}"),
                            ),
                            Duration::ZERO,
                        ));
                    }
                    return;
                }
                st.running = true;
            }
            let now = Instant::now();
            for call in calls {
                let active = Active {
                    call,
                    started: now,
                    tried: 0,
                    fed: 0,
                };
                match st.idle.pop() {
                    Some(token) => {
                        if let Some(f) = send_on_idle(shared, &mut st, token, active) {
                            // The connection was dead: try a fresh one.
                            st.queued.push_back(f);
                            wake = true;
                        }
                    }
                    None => {
                        st.queued.push_back(active);
                        wake = true;
                    }
                }
            }
            if st.closed {
                while let Some(a) = st.queued.pop_front() {
                    failed.push((a.call.on_outcome, closed_exchange()));
                }
            }
        }
        for (f, x) in failed {
            f(Outcome::Done(x, Duration::ZERO));
        }
        if wake {
            let _ = shared.waker.wake();
        }
    }
}

impl Drop for EventTransport {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        let _ = self.shared.waker.wake();
    }
}

fn transport(kind: LlmErrorKind, message: String) -> Exchange {
    Exchange::Transport { kind, message }
}

fn closed_exchange() -> Exchange {
    transport(LlmErrorKind::Connect, "the backend was shut down".into())
}

fn start_thread(shared: &Arc<Shared>) -> io::Result<()> {
    let Some(poll) = lock(&shared.poll).take() else {
        return Err(io::Error::other("the I/O thread ended"));
    };
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("apxm-http-io".into())
        .spawn(move || run(&s, poll))
        .map(|_| ())
}

/// Puts `active` on idle connection `token` and writes its request.
/// Returns the call back when the connection proved dead before any of
/// it was sent (the caller queues it for a fresh connection).
fn send_on_idle(shared: &Shared, st: &mut State, token: usize, active: Active) -> Option<Active> {
    let Some(conn) = st.conns.get_mut(token).and_then(Option::as_mut) else {
        return Some(active);
    };
    // A server closing an idle connection may not have been noticed by
    // the I/O thread yet: look before sending on it.
    let mut probe = [0u8; 1];
    let open =
        matches!(conn.stream.peek(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    if !open {
        close(shared, st, token);
        return Some(active);
    }
    conn.phase = Phase::Busy;
    conn.reused = true;
    conn.written = 0;
    conn.buf.clear();
    conn.active = Some(active);
    match pump_write(shared, conn, token) {
        Ok(()) => None,
        Err(_) => {
            let active = conn.active.take();
            close(shared, st, token);
            active
        }
    }
}

/// Writes as much of the connection's request as the socket takes; asks
/// for writability when some is left.
fn pump_write(shared: &Shared, conn: &mut Conn, token: usize) -> io::Result<()> {
    let Some(active) = conn.active.as_ref() else {
        return Ok(());
    };
    let bytes = &active.call.bytes;
    while conn.written < bytes.len() {
        match conn.stream.write(&bytes[conn.written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => conn.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let want = conn.written < bytes.len();
    if want != conn.wants_write {
        let interest = if want {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        shared
            .registry
            .reregister(&mut conn.stream, Token(token), interest)?;
        conn.wants_write = want;
    }
    Ok(())
}

fn close(shared: &Shared, st: &mut State, token: usize) {
    if let Some(mut conn) = st.conns.get_mut(token).and_then(Option::take) {
        let _ = shared.registry.deregister(&mut conn.stream);
        st.free.push(token);
        st.idle.retain(|t| *t != token);
    }
}

/// The I/O thread.
fn run(shared: &Arc<Shared>, mut poll: Poll) {
    let mut events = Events::with_capacity(256);
    loop {
        let timeout = {
            let st = lock(&shared.state);
            next_timeout(&st)
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                fail_all(shared, &format!("the I/O thread's poll failed: {e}"));
                return;
            }
        }
        let mut finished: Vec<(OnOutcome, Outcome)> = Vec::new();
        let mut bodies: Vec<BodyPiece> = Vec::new();
        let closed = {
            let mut st = lock(&shared.state);
            if !st.closed {
                open_queued(shared, &mut st, &mut finished);
                for event in events.iter() {
                    if event.token() != WAKER {
                        on_event(shared, &mut st, event.token().0, &mut finished, &mut bodies);
                    }
                }
                expire(shared, &mut st, &mut finished);
            }
            st.closed
        };
        // Body pieces first: a call's outcome is judged from what its
        // pieces fed.
        for (f, status, headers, bytes) in bodies {
            f(status, &headers, &bytes);
        }
        for (f, outcome) in finished {
            f(outcome);
        }
        if closed {
            fail_all(shared, "the backend was shut down");
            return;
        }
    }
}

/// Ends every call in flight or queued with a connection error.
fn fail_all(shared: &Shared, message: &str) {
    let mut ended: Vec<OnOutcome> = Vec::new();
    {
        let mut st = lock(&shared.state);
        st.closed = true;
        st.running = false;
        for token in 0..st.conns.len() {
            if let Some(a) = st.conns[token].as_mut().and_then(|c| c.active.take()) {
                ended.push(a.call.on_outcome);
            }
            close(shared, &mut st, token);
        }
        while let Some(a) = st.queued.pop_front() {
            ended.push(a.call.on_outcome);
        }
    }
    for f in ended {
        f(Outcome::Done(
            transport(LlmErrorKind::Connect, message.to_string()),
            Duration::ZERO,
        ));
    }
}

/// How long the poll may sleep: until the earliest deadline, and no longer
/// than the cancellation check while calls are in flight.
fn next_timeout(st: &State) -> Option<Duration> {
    let now = Instant::now();
    let mut earliest: Option<Instant> = None;
    for conn in st.conns.iter().flatten() {
        if let Some(a) = &conn.active {
            let d = if conn.phase == Phase::Connecting {
                a.call.deadline.min(conn.connect_deadline)
            } else {
                a.call.deadline
            };
            earliest = Some(earliest.map_or(d, |e| e.min(d)));
        }
    }
    earliest.map(|e| e.saturating_duration_since(now).min(CANCEL_CHECK))
}

/// Opens a connection for every queued call.
fn open_queued(shared: &Shared, st: &mut State, finished: &mut Vec<(OnOutcome, Outcome)>) {
    let mut retry = VecDeque::new();
    while let Some(active) = st.queued.pop_front() {
        let mut stream = match TcpStream::connect(shared.addr()) {
            Ok(s) => s,
            Err(e) => {
                match shared.next_address(active) {
                    Ok(a) => retry.push_back(a),
                    Err(a) => {
                        let x = transport(
                            LlmErrorKind::Connect,
                            format!("cannot connect to {}: {e}", shared.target.authority),
                        );
                        let took = a.started.elapsed();
                        finished.push((a.call.on_outcome, Outcome::Done(x, took)));
                    }
                }
                continue;
            }
        };
        let token = st.free.pop().unwrap_or_else(|| {
            st.conns.push(None);
            st.conns.len() - 1
        });
        if let Err(e) = shared.registry.register(
            &mut stream,
            Token(token),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            st.free.push(token);
            let x = transport(
                LlmErrorKind::Connect,
                format!("cannot watch the connection: {e}"),
            );
            let took = active.started.elapsed();
            finished.push((active.call.on_outcome, Outcome::Done(x, took)));
            continue;
        }
        st.conns[token] = Some(Conn {
            stream,
            phase: Phase::Connecting,
            active: Some(active),
            written: 0,
            buf: Vec::new(),
            reused: false,
            connect_deadline: Instant::now() + shared.connect_timeout,
            wants_write: true,
        });
    }
    if !retry.is_empty() {
        st.queued = retry;
        let _ = shared.waker.wake();
    }
}

impl Shared {
    fn addr(&self) -> SocketAddr {
        let i = self.preferred.load(std::sync::atomic::Ordering::Relaxed);
        self.target.addrs[i % self.target.addrs.len()]
    }

    /// After a failed connection: the call again, to try the target's next
    /// address (which becomes the preferred one), or back when every
    /// address has been tried.
    fn next_address(&self, mut active: Active) -> Result<Active, Active> {
        active.tried += 1;
        if active.tried >= self.target.addrs.len() {
            return Err(active);
        }
        let n = self.target.addrs.len();
        let _ = self.preferred.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |i| Some((i + 1) % n),
        );
        Ok(active)
    }
}

/// What an event on a connection calls for.
enum Step {
    Nothing,
    /// Drop the connection (an idle one the server closed).
    Close,
    /// End the call with a transport error and drop the connection.
    Fail(LlmErrorKind, String),
    /// The connection could not be made: try the target's next address,
    /// or fail.
    Unreachable(String),
    /// A reused connection turned out closed: send the call again on a
    /// fresh one.
    Fresh,
    /// The reply is in.
    Reply(Exchange, bool),
}

fn on_event(
    shared: &Shared,
    st: &mut State,
    token: usize,
    finished: &mut Vec<(OnOutcome, Outcome)>,
    bodies: &mut Vec<BodyPiece>,
) {
    let Some(conn) = st.conns.get_mut(token).and_then(Option::as_mut) else {
        return;
    };
    match step(shared, conn, token, bodies) {
        Step::Nothing => {}
        Step::Close => close(shared, st, token),
        Step::Fail(kind, message) => end(shared, st, token, kind, message, finished),
        Step::Unreachable(message) => {
            let Some(active) = detach(shared, st, token) else {
                return;
            };
            match shared.next_address(active) {
                Ok(a) => {
                    st.queued.push_back(a);
                    let _ = shared.waker.wake();
                }
                Err(a) => {
                    let x = transport(LlmErrorKind::Connect, message);
                    finished.push((a.call.on_outcome, Outcome::Done(x, a.started.elapsed())));
                }
            }
        }
        Step::Fresh => retry_fresh(shared, st, token),
        Step::Reply(exchange, reusable) => {
            let Some(active) = conn.active.take() else {
                return;
            };
            if reusable && st.idle.len() < shared.max_idle {
                conn.phase = Phase::Idle;
                conn.buf.clear();
                st.idle.push(token);
            } else {
                close(shared, st, token);
            }
            let took = active.started.elapsed();
            finished.push((active.call.on_outcome, Outcome::Done(exchange, took)));
        }
    }
}

/// Advances a connection after an event: finishes connecting, writes what
/// is left of the request, reads what arrived.
fn step(shared: &Shared, conn: &mut Conn, token: usize, bodies: &mut Vec<BodyPiece>) -> Step {
    let cannot_connect = |e: &dyn std::fmt::Display| {
        Step::Unreachable(format!(
            "cannot connect to {}: {e}",
            shared.target.authority
        ))
    };
    if conn.phase == Phase::Connecting {
        // Writable (or an error) once the connection is made.
        match conn.stream.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => return cannot_connect(&e),
        }
        match conn.stream.peer_addr() {
            Ok(_) => conn.phase = Phase::Busy,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return Step::Nothing,
            Err(e) => return cannot_connect(&e),
        }
        let _ = conn.stream.set_nodelay(true);
    }
    if conn.phase == Phase::Busy && conn.active.is_some() {
        if let Err(e) = pump_write(shared, conn, token) {
            if conn.reused && conn.buf.is_empty() {
                return Step::Fresh;
            }
            return Step::Fail(LlmErrorKind::Connect, format!("sending the request: {e}"));
        }
    }
    // Read whatever arrived.
    let before = conn.buf.len();
    let mut eof = false;
    let mut failure: Option<io::Error> = None;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match conn.stream.read(&mut chunk) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                conn.buf.extend_from_slice(&chunk[..n]);
                if conn.buf.len() > MAX_HEAD + MAX_BODY + 4096 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if conn.phase == Phase::Idle {
        // An idle connection that the server closed, or that sent bytes
        // nobody asked for, is not reused.
        if eof || failure.is_some() || !conn.buf.is_empty() {
            return Step::Close;
        }
        return Step::Nothing;
    }
    let Some(active) = conn.active.as_mut() else {
        return Step::Nothing;
    };
    let ended = eof || failure.is_some();
    let parsed = match active.call.stream.as_mut() {
        Some(watch) if conn.buf.len() > before => {
            // Bytes came: the stream is alive for another idle period.
            active.call.deadline = Instant::now() + watch.idle;
            match parse_partial(&conn.buf, ended) {
                Parsed::Partial {
                    status,
                    headers,
                    mut body,
                } => {
                    if body.len() > active.fed {
                        let piece = body.split_off(active.fed);
                        active.fed += piece.len();
                        bodies.push((Arc::clone(&watch.on_body), status, headers, piece));
                    }
                    Parsed::Incomplete
                }
                Parsed::Reply {
                    status,
                    headers,
                    body,
                    keep_alive,
                    used,
                } => {
                    if body.len() > active.fed {
                        let piece = body[active.fed..].to_vec();
                        active.fed = body.len();
                        bodies.push((Arc::clone(&watch.on_body), status, headers.clone(), piece));
                    }
                    Parsed::Reply {
                        status,
                        headers,
                        body,
                        keep_alive,
                        used,
                    }
                }
                other => other,
            }
        }
        _ => parse_reply(&conn.buf, ended),
    };
    match parsed {
        Parsed::Incomplete if !ended => Step::Nothing,
        Parsed::Incomplete | Parsed::Partial { .. } => {
            // Not retried here even on a reused connection: the server may
            // have acted on the request; the call's retry policy decides.
            let message = match (&failure, conn.buf.is_empty()) {
                (Some(e), _) => format!("reading the reply: {e}"),
                (None, true) => "the server closed the connection without replying".into(),
                (None, false) => {
                    "the server closed the connection in the middle of the reply".into()
                }
            };
            Step::Fail(LlmErrorKind::Connect, message)
        }
        Parsed::Invalid(message) => Step::Fail(LlmErrorKind::InvalidResponse, message),
        Parsed::Reply {
            status,
            headers,
            body,
            keep_alive,
            used,
        } => {
            let reusable = keep_alive && !ended && used == conn.buf.len();
            let exchange = match String::from_utf8(body) {
                Ok(body) => Exchange::Status {
                    status,
                    retry_after: super::retry_after(|k| wire::header(&headers, k)),
                    body,
                },
                Err(_) => transport(
                    LlmErrorKind::InvalidResponse,
                    "the reply body is not UTF-8".into(),
                ),
            };
            Step::Reply(exchange, reusable)
        }
    }
}

/// Ends the call on `token` with a transport error and drops the
/// connection.
fn end(
    shared: &Shared,
    st: &mut State,
    token: usize,
    kind: LlmErrorKind,
    message: String,
    finished: &mut Vec<(OnOutcome, Outcome)>,
) {
    if let Some(a) = detach(shared, st, token) {
        let took = a.started.elapsed();
        finished.push((
            a.call.on_outcome,
            Outcome::Done(transport(kind, message), took),
        ));
    }
}

/// The call on `token`, taken off its connection, which is closed.
fn detach(shared: &Shared, st: &mut State, token: usize) -> Option<Active> {
    let active = st
        .conns
        .get_mut(token)
        .and_then(Option::as_mut)
        .and_then(|c| c.active.take());
    close(shared, st, token);
    active
}

/// A kept-alive connection failed while the request was being written on
/// it: send the call again on a fresh connection (which is not reused, so
/// this happens once per call).
fn retry_fresh(shared: &Shared, st: &mut State, token: usize) {
    if let Some(a) = detach(shared, st, token) {
        st.queued.push_back(a);
        let _ = shared.waker.wake();
    }
}

/// Ends calls that are cancelled or past their deadline.
fn expire(shared: &Shared, st: &mut State, finished: &mut Vec<(OnOutcome, Outcome)>) {
    let now = Instant::now();
    for token in 0..st.conns.len() {
        let Some(conn) = st.conns[token].as_ref() else {
            continue;
        };
        let Some(a) = conn.active.as_ref() else {
            continue;
        };
        if a.call.cancel.is_cancelled() {
            if let Some(a) = detach(shared, st, token) {
                finished.push((a.call.on_outcome, Outcome::Cancelled));
            }
        } else if conn.phase == Phase::Connecting
            && now >= conn.connect_deadline.min(a.call.deadline)
        {
            let message = format!(
                "timed out connecting to {} (after {} ms)",
                shared.target.authority,
                a.started.elapsed().as_millis()
            );
            end(shared, st, token, LlmErrorKind::Timeout, message, finished);
        } else if now >= a.call.deadline {
            let message = match &a.call.stream {
                Some(w) => format!(
                    "timed out (the stream was idle for {} ms)",
                    w.idle.as_millis()
                ),
                None => format!(
                    "timed out (no complete reply within {} ms)",
                    a.call
                        .deadline
                        .saturating_duration_since(a.started)
                        .as_millis()
                ),
            };
            end(shared, st, token, LlmErrorKind::Timeout, message, finished);
        }
    }
}
