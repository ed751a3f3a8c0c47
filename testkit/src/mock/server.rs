//! The mock's event loop: one thread serves every connection.
//!
//! The mock shares the machine with the client it measures. A thread per
//! connection costs a thread wake-up for every request of a fan-out (on a
//! small virtual machine that is tens of µs of CPU each, taken from the
//! client); one thread polling every socket handles a burst of requests in
//! one wake-up, and writes every reply when it is due from the same place.
//!
//! Replies go out in request order on each connection (HTTP/1.1), each at
//! its due moment: the request's receipt plus its latency. Like
//! the VM's `wait_until`, the loop sleeps until
//! [`SPIN`] before a due moment and yields from there, so replies are not a
//! timer overshoot late.

use super::http1::{parse_request, Head, Parsed};
use super::{reply_for, MockRequest, Shared, MAX_CONNECTIONS};
use ais_vm::sync::{lock, SPIN};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use serde_json::Value;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) const LISTENER: Token = Token(0);
pub(super) const WAKER: Token = Token(1);

/// The longest the loop sleeps with nothing due.
const IDLE_POLL: Duration = Duration::from_millis(250);

/// A reply waiting for its moment.
pub(super) struct Pending {
    pub at: Instant,
    pub bytes: Vec<u8>,
    /// The connection ends once this is written.
    pub close: bool,
    /// The first / last piece of the reply to completion request N
    /// (noted in [`super::Arrival`]s).
    pub first: Option<usize>,
    pub last: Option<usize>,
}

struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
    /// Replies not yet due, in request order.
    pending: VecDeque<Pending>,
    /// Reply bytes due and not yet taken by the socket.
    output: Vec<u8>,
    written: usize,
    /// No more requests are read (the client hung up, or a reply ends the
    /// connection); it closes when its replies are out.
    reading_done: bool,
    /// A reply that ends the connection is in `output`.
    close_when_written: bool,
    /// When bytes last came in.
    received: Instant,
    /// The client closed its side.
    eof: bool,
    /// The due moment of this connection's entry in the timer heap.
    armed: Option<Instant>,
}

pub(super) struct EventLoop {
    pub poll: Poll,
    pub listener: TcpListener,
    pub shared: Arc<Shared>,
    conns: HashMap<usize, Conn>,
    next_id: usize,
    /// One entry per connection whose first pending reply is not yet due.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl EventLoop {
    pub fn new(poll: Poll, listener: TcpListener, shared: Arc<Shared>) -> EventLoop {
        EventLoop {
            poll,
            listener,
            shared,
            conns: HashMap::new(),
            next_id: WAKER.0 + 1,
            timers: BinaryHeap::new(),
        }
    }

    /// Serves until the server stops (or polling fails); the connections
    /// close when the loop is dropped.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            if self.shared.stop.load(Ordering::SeqCst) {
                return;
            }
            let timeout = self.timeout();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            // Read every ready socket before answering any: a request's
            // latency counts from its read, and answering takes longer.
            let mut ready = Vec::new();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(id) => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(id);
                        }
                        ready.push(id);
                    }
                }
            }
            for id in ready {
                self.queue_replies(id);
                self.progress(id);
            }
            self.fire_timers();
        }
    }

    /// How long to wait for events: until [`SPIN`] before the next due
    /// reply, then not at all (yielding the CPU between polls).
    fn timeout(&self) -> Option<Duration> {
        let Some(Reverse((at, _))) = self.timers.peek() else {
            // Stopping wakes the poll; the bound is only a backstop.
            return Some(IDLE_POLL);
        };
        let left = at.saturating_duration_since(Instant::now());
        // Whole milliseconds, rounded down: the poll rounds a fraction up.
        let sleep = left.saturating_sub(SPIN).as_millis() as u64;
        if sleep > 0 {
            return Some(Duration::from_millis(sleep).min(IDLE_POLL));
        }
        std::thread::yield_now();
        Some(Duration::ZERO)
    }

    fn accept(&mut self) {
        loop {
            let (mut stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: all taken. Other errors (out of descriptors):
                // the client's connect fails or waits; try again on the
                // next event.
                Err(_) => return,
            };
            if !peer.ip().is_loopback() || self.conns.len() >= MAX_CONNECTIONS {
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            }
            // Replies are written whole; no need to wait for ACKs.
            let _ = stream.set_nodelay(true);
            let id = self.next_id;
            self.next_id += 1;
            let interest = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut stream, Token(id), interest)
                .is_err()
            {
                continue;
            }
            self.conns.insert(
                id,
                Conn {
                    stream,
                    input: Vec::new(),
                    pending: VecDeque::new(),
                    output: Vec::new(),
                    written: 0,
                    reading_done: false,
                    close_when_written: false,
                    received: Instant::now(),
                    eof: false,
                    armed: None,
                },
            );
        }
    }

    /// Reads what connection `id` has, noting when.
    fn read(&mut self, id: usize) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.reading_done {
            return;
        }
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match conn.stream.read(&mut chunk) {
                Ok(0) => {
                    conn.eof = true;
                    break;
                }
                Ok(n) => {
                    conn.input.extend_from_slice(&chunk[..n]);
                    conn.received = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close(id);
                    return;
                }
            }
        }
    }

    /// Queues the replies to every whole request connection `id` has read.
    fn queue_replies(&mut self, id: usize) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        while !conn.reading_done {
            match parse_request(&conn.input) {
                Parsed::Incomplete => break,
                Parsed::Invalid => {
                    self.close(id);
                    return;
                }
                Parsed::Request { head, body, used } => {
                    conn.input.drain(..used);
                    // The latency counts from the read that completed the
                    // request, not from here.
                    let pieces = answer_request(&self.shared, head, &body, conn.received);
                    conn.reading_done = pieces.last().is_some_and(|p| p.close);
                    conn.pending.extend(pieces);
                }
            }
        }
        if conn.eof {
            conn.reading_done = true;
        }
    }

    /// Moves connection `id`'s due replies to its socket, arms its timer
    /// for the next one, and closes it when it is done.
    fn progress(&mut self, id: usize) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let now = Instant::now();
        while conn.pending.front().is_some_and(|p| p.at <= now) && !conn.close_when_written {
            if let Some(p) = conn.pending.pop_front() {
                if let Some(n) = p.first {
                    lock(&self.shared.replies_started).push(n);
                }
                if let Some(n) = p.last {
                    lock(&self.shared.replies_ended).push(n);
                }
                conn.output.extend_from_slice(&p.bytes);
                conn.close_when_written = p.close;
            }
        }
        if let Some(p) = conn.pending.front() {
            if !conn.close_when_written && conn.armed != Some(p.at) {
                conn.armed = Some(p.at);
                self.timers.push(Reverse((p.at, id)));
            }
        }
        while conn.written < conn.output.len() {
            match conn.stream.write(&conn.output[conn.written..]) {
                Ok(0) => {
                    self.close(id);
                    return;
                }
                Ok(n) => conn.written += n,
                // The rest goes when the socket is writable again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close(id);
                    return;
                }
            }
        }
        conn.output.clear();
        conn.written = 0;
        let done = conn.close_when_written || (conn.reading_done && conn.pending.is_empty());
        if done {
            self.close(id);
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if at > now {
                return;
            }
            self.timers.pop();
            if let Some(conn) = self.conns.get_mut(&id) {
                if conn.armed == Some(at) {
                    conn.armed = None;
                }
                self.progress(id);
            }
        }
    }

    fn close(&mut self, id: usize) {
        if let Some(mut conn) = self.conns.remove(&id) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            let _ = conn.stream.shutdown(Shutdown::Both);
        }
    }
}

/// Logs one request and makes its reply (scripted, or the normal one):
/// one piece, or a streamed reply's pieces in order.
fn answer_request(shared: &Shared, head: Head, body: &[u8], received: Instant) -> Vec<Pending> {
    let request = Arc::new(MockRequest {
        method: head.method,
        path: head.path,
        headers: head.headers,
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    });
    let close = request
        .header("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    // A request that is not a completion (a backend asking the server
    // about itself: `/props`, `/v1/models`, `/api/show`) is answered from
    // the configured routes, else 404, and kept apart: it is not counted
    // and takes no scripted reply.
    if request.method != "POST" || super::protocol_of(&request.path).is_none() {
        let path = request.path.split('?').next().unwrap_or(&request.path);
        let bytes = match lock(&shared.routes).get(path) {
            Some(v) => super::response_bytes(200, &[], &v.to_string()),
            None => {
                let body = serde_json::json!({"error": {"message": format!("no route for {} {}", request.method, request.path), "type": "not_found"}});
                super::response_bytes(404, &[], &body.to_string())
            }
        };
        lock(&shared.probes).push(Arc::clone(&request));
        return vec![Pending {
            at: received,
            bytes,
            close,
            first: None,
            last: None,
        }];
    }
    let n = {
        let mut requests = lock(&shared.requests);
        requests.push(Arc::clone(&request));
        requests.len() - 1
    };
    lock(&shared.arrivals).push(super::Arrival {
        replies_started: lock(&shared.replies_started).clone(),
        replies_ended: lock(&shared.replies_ended).clone(),
    });
    shared.count.fetch_add(1, Ordering::SeqCst);
    let scripted = lock(&shared.script).pop_front().unwrap_or_default();
    let mut pieces = reply_for(shared, &request, scripted, received);
    if let Some(first) = pieces.first_mut() {
        first.first = Some(n);
    }
    if let Some(last) = pieces.last_mut() {
        last.close |= close;
        last.last = Some(n);
    }
    pieces
}
