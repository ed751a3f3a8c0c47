//! Server-Sent Events responses: a run's event log (`GET
//! /v1/runs/{id}/events`) or an A2A task's updates, streamed by a task on
//! the async runtime (no thread per stream). Bounded: at most
//! `max_streams` streams at once (503) and `max_streams_per_run` on one
//! run (429); each stream holds at most [`QUEUED`] chunks of at most
//! [`BATCH`] events for a client that reads slowly (the events themselves
//! are the run's, shared).

use super::{Body, Ctx};
use crate::a2a::TaskFrames;
use crate::error::ApiError;
use crate::events::{Event, EventLog};
use ais_wire::sse;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// Events per chunk at most.
pub(crate) const BATCH: usize = 256;
/// Chunks waiting for a slow client at most.
pub(crate) const QUEUED: usize = 4;
/// A comment after this long without an event keeps the stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What a stream sends, made from a run's events.
pub(crate) trait Frames: Send + 'static {
    /// The log followed.
    fn log(&self) -> Arc<EventLog>;
    /// The text sent first, and whether the stream ends with it.
    fn start(&mut self) -> (String, bool);
    /// The text for the next events (`done`: the log has ended), and
    /// whether the stream ends with it.
    fn next(&mut self, events: &[Arc<Event>], done: bool) -> (String, bool);
}

/// The run's events as they are, one SSE event each.
pub(crate) struct LogFrames(pub Arc<EventLog>);

impl Frames for LogFrames {
    fn log(&self) -> Arc<EventLog> {
        self.0.clone()
    }

    fn start(&mut self) -> (String, bool) {
        (String::new(), false)
    }

    fn next(&mut self, events: &[Arc<Event>], done: bool) -> (String, bool) {
        (events.iter().map(|e| e.sse()).collect(), done)
    }
}

impl Frames for TaskFrames {
    fn log(&self) -> Arc<EventLog> {
        TaskFrames::log(self).clone()
    }

    fn start(&mut self) -> (String, bool) {
        TaskFrames::start(self)
    }

    fn next(&mut self, events: &[Arc<Event>], done: bool) -> (String, bool) {
        TaskFrames::next(self, events, done)
    }
}

/// A place among the open streams; given back when dropped.
struct Slot {
    ctx: Arc<Ctx>,
    log: Arc<EventLog>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.ctx.streams.fetch_sub(1, Ordering::SeqCst);
        self.log.subscribers.fetch_sub(1, Ordering::SeqCst);
    }
}

fn take_slot(ctx: &Arc<Ctx>, log: &Arc<EventLog>) -> Result<Slot, ApiError> {
    let max = ctx.config.max_streams;
    if ctx.streams.fetch_add(1, Ordering::SeqCst) >= max {
        ctx.streams.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::new(
            503,
            "server.too_many_streams",
            format!("{max} event streams are open"),
            "retry after the number of seconds in Retry-After (the limit is `--max-streams`)",
        )
        .with_retry_after(1));
    }
    let per_run = ctx.config.max_streams_per_run;
    if log.subscribers.fetch_add(1, Ordering::SeqCst) >= per_run {
        log.subscribers.fetch_sub(1, Ordering::SeqCst);
        ctx.streams.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::new(
            429,
            "run.too_many_streams",
            format!("{per_run} event streams follow this run already"),
            "retry after the number of seconds in Retry-After, or share one stream (the limit is `--max-streams-per-run`)",
        )
        .with_retry_after(1));
    }
    Ok(Slot {
        ctx: ctx.clone(),
        log: log.clone(),
    })
}

/// The body of a stream: the chunks its task sends.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// Starts streaming `frames` from the events after `after`: the body of a
/// `200 text/event-stream` response, or the refusal when the limits are
/// reached.
pub(crate) fn open(ctx: &Arc<Ctx>, frames: impl Frames, after: u64) -> Result<Body, ApiError> {
    let slot = take_slot(ctx, &frames.log())?;
    let (tx, rx) = mpsc::channel(QUEUED);
    tokio::spawn(drive(frames, after, tx, slot));
    Ok(ChannelBody(rx).boxed())
}

/// Sends `text`; false when the client is gone.
async fn send(tx: &mpsc::Sender<Bytes>, text: String) -> bool {
    text.is_empty() || tx.send(Bytes::from(text)).await.is_ok()
}

async fn drive(mut frames: impl Frames, mut after: u64, tx: mpsc::Sender<Bytes>, _slot: Slot) {
    let (text, end) = frames.start();
    if !send(&tx, text).await || end {
        return;
    }
    let log = frames.log();
    loop {
        // Wait for events, or for the client to go away (its body is
        // dropped), whichever comes first.
        let next = {
            let mut wait = std::pin::pin!(log.next_after(after, BATCH, KEEP_ALIVE));
            let mut gone = std::pin::pin!(tx.closed());
            std::future::poll_fn(|cx| {
                if gone.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(None);
                }
                wait.as_mut().poll(cx).map(Some)
            })
            .await
        };
        let Some((events, done)) = next else {
            return;
        };
        if events.is_empty() && !done {
            if !send(&tx, sse::KEEP_ALIVE.to_string()).await {
                return;
            }
            continue;
        }
        if let Some(e) = events.last() {
            after = e.id;
        }
        let (text, end) = frames.next(&events, done);
        if !send(&tx, text).await || end {
            return;
        }
    }
}
