//! The three ways a call runs: blocking on the caller's thread (waiting
//! for an HTTP thread), handed whole to an HTTP thread, or started on the
//! event transport and judged on its I/O thread, carried on on an HTTP
//! thread when it needs more (a retry, a repair round). Also the repair
//! round itself: a structured reply is checked against its schema and
//! the model asked once to fix it.

use super::*;

/// A call's work for an HTTP thread: everything up to its result, with its
/// attempts reported to the log.
pub(super) type ThreadCall =
    Box<dyn FnOnce(&HttpCore, &AttemptLog) -> Result<LlmResponse, LlmError> + Send>;

impl HttpCore {
    /// A whole call on this thread (the caller may wait).
    pub(super) fn complete_here(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
        via: Via,
    ) -> Result<LlmResponse, LlmError> {
        self.complete(request, cancel, observer, via, None, Instant::now())
            .map_err(|stop| stop.into_error(&self.opts.name))
    }

    /// A call: prepare, exchange (retrying), validate the reply against
    /// the op's schema with one repair round. `first` is the outcome of
    /// the first exchange when it was made already; `started` is when the
    /// call began.
    pub(super) fn complete(
        &self,
        request: &LlmRequest,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
        via: Via,
        mut first: First,
        started: Instant,
    ) -> Result<LlmResponse, Stop> {
        let mut p = self.prepare(request);
        self.fit(&mut p)?;
        let mut number = 0u32;
        let mut usage = Usage::default();
        let mut repaired = false;
        loop {
            let mut reply = self.call(&p, cancel, observer, &mut number, via, &mut first)?;
            self.wire.finish_reply(&mut reply, &p, self.opts.structured);
            self.mask_reply(&mut reply);
            // Calls are read only when tools were offered: a `tool_use`
            // block or `tool_calls` entry in a reply to a request without
            // tools is not part of an answer.
            if p.tools.is_empty() {
                reply.tool_calls.clear();
            }
            for call in &mut reply.tool_calls {
                call.name = p.tool_names.from_wire(&call.name).to_string();
            }
            usage = usage.plus(&reply.usage);
            let model = reply.model.clone().unwrap_or_else(|| p.model.clone());
            // A reply that calls tools is not the answer the schema is
            // for; the VM runs the tools and asks again.
            let schema = p.schema.as_ref().filter(|_| reply.tool_calls.is_empty());
            // A structured reply cut off at the limit (taken as a value
            // with `accept_incomplete`) is not JSON the model got wrong: a
            // repair round would be cut off the same way.
            if schema.is_some() && self.incomplete(&reply) == Some(Incomplete::Truncated) {
                let message = format!(
                    "{}; a structured ({}) reply that is cut off is not repaired",
                    self.truncated_message(&p, &reply),
                    p.kind.name()
                );
                return Err(self
                    .fail(LlmErrorKind::Truncated, None, message, number)
                    .into());
            }
            let Some(schema) = schema else {
                return Ok(LlmResponse {
                    text: reply.text,
                    json: None,
                    usage,
                    finish_reason: reply.finish_reason,
                    model,
                    latency: started.elapsed(),
                    simulated: false,
                    tool_calls: reply.tool_calls,
                });
            };
            let checked = jsonschema::extract_json(&reply.text)
                .map_err(|e| format!("the reply is not JSON ({e})"))
                .and_then(|v| match jsonschema::validate(schema, &v) {
                    Ok(()) => Ok(v),
                    Err(e) => Err(format!(
                        "the reply does not match the {} schema at {e}",
                        p.kind.name()
                    )),
                });
            match checked {
                Ok(v) => {
                    return Ok(LlmResponse {
                        text: reply.text,
                        json: Some(v),
                        usage,
                        finish_reason: reply.finish_reason,
                        model,
                        latency: started.elapsed(),
                        simulated: false,
                        tool_calls: Vec::new(),
                    })
                }
                Err(problem) if !repaired => {
                    repaired = true;
                    observer.on_attempt(&Attempt {
                        provider: self.opts.name.clone(),
                        number,
                        status: None,
                        error: Some(LlmErrorKind::InvalidResponse),
                        message: Some(format!("{problem}; asking the model to repair it")),
                        latency: Duration::ZERO,
                        retry_in: Some(Duration::ZERO),
                        server_delay: false,
                        finish_reason: None,
                        usage: Usage::default(),
                        first_token: None,
                    });
                    // Not from the I/O thread: a call that stops there for a
                    // thread judges this reply again on that thread.
                    if let (Some(sink), true, false) =
                        (&p.on_text, self.opts.stream, via == Via::NoWait)
                    {
                        sink.send(&TextEvent::Reset { attempt: number });
                    }
                    p.messages.push(("assistant", reply.text));
                    p.messages.push(("user", prompt::repair_message(&problem)));
                }
                Err(problem) => {
                    return Err(self
                        .fail(
                            LlmErrorKind::InvalidResponse,
                            None,
                            format!("{problem}, still after one repair request"),
                            number,
                        )
                        .into())
                }
            }
        }
    }
}

impl HttpCore {
    /// Runs each call on one of the backend's HTTP threads and hands its
    /// outcome to its `done`, exactly once: on the thread, or here when no
    /// thread can be started.
    pub(super) fn run_on_threads(core: &Arc<HttpCore>, calls: Vec<(ThreadCall, OnDone)>) {
        type Slot = Arc<std::sync::Mutex<Option<OnDone>>>;
        let mut slots: Vec<Slot> = Vec::with_capacity(calls.len());
        let mut jobs: Vec<PoolJob> = Vec::with_capacity(calls.len());
        for (run, done) in calls {
            let slot: Slot = Arc::new(std::sync::Mutex::new(Some(done)));
            let on_thread = Arc::clone(&slot);
            let core = Arc::clone(core);
            jobs.push(Box::new(move |idle: &IdleMark| {
                let log = AttemptLog::new();
                let result = run(&core, &log);
                idle.set();
                if let Some(done) = lock(&on_thread).take() {
                    done(result, log.attempts());
                }
            }));
            slots.push(slot);
        }
        if let Err(e) = core.threads.submit_all(jobs) {
            for slot in &slots {
                if let Some(done) = lock(slot).take() {
                    let err = LlmError::new(
                        &core.opts.name,
                        LlmErrorKind::Connect,
                        format!("cannot start HTTP thread: {e}"),
                    );
                    done(Err(err), Vec::new());
                }
            }
        }
    }

    /// Starts `calls` on the event transport: each request is written from
    /// this thread; each reply is judged on the I/O thread, and a call that
    /// needs more (a retry, a repair round) goes on on an HTTP thread.
    pub(super) fn start_evented(
        core: &Arc<HttpCore>,
        ev: &events::EventTransport,
        calls: Vec<(LlmRequest, CancelToken, OnDone)>,
    ) {
        let mut sends = Vec::with_capacity(calls.len());
        for (request, cancel, done) in calls {
            let started = Instant::now();
            let mut p = core.prepare(&request);
            if let Err(e) = core.fit(&mut p) {
                done(Err(e), Vec::new());
                continue;
            }
            let body = core.body(&p).to_string();
            let bytes = request_bytes(ev.target(), &core.url(&p), &core.headers(&p), &body);
            let watched = cancel.clone();
            let on = Arc::clone(core);
            let feed = core.opts.stream.then(|| {
                let feed = streaming::StreamFeed::new(
                    core.opts.protocol,
                    &core.masker,
                    p.on_text.clone(),
                    1,
                    started,
                );
                Arc::new(std::sync::Mutex::new(feed))
            });
            let stream = feed.as_ref().map(|f| core.watch(f));
            let on_outcome: events::OnOutcome = Box::new(move |outcome| {
                on.finish_started(request, cancel, started, outcome, done, feed)
            });
            match bytes {
                Ok(bytes) => sends.push(events::Call {
                    bytes,
                    deadline: started + core.opts.timeout,
                    cancel: watched,
                    on_outcome,
                    stream,
                }),
                Err(message) => on_outcome(events::Outcome::Done(
                    Exchange::Transport {
                        kind: LlmErrorKind::Client,
                        message,
                    },
                    Duration::ZERO,
                )),
            }
        }
        ev.submit(sends);
    }

    /// The rest of a started call once its first exchange is over: judged
    /// here when that settles it (a reply, or a failure not retried),
    /// otherwise carried on on an HTTP thread from the same outcome.
    pub(super) fn finish_started(
        self: &Arc<HttpCore>,
        request: LlmRequest,
        cancel: CancelToken,
        started: Instant,
        outcome: events::Outcome,
        done: OnDone,
        feed: Option<Arc<std::sync::Mutex<streaming::StreamFeed>>>,
    ) {
        let first = match outcome {
            events::Outcome::Done(exchange, took) => match feed {
                Some(feed) => {
                    let mut f = lock(&feed);
                    Made {
                        exchange: f.finish(exchange),
                        took,
                        first_token: f.first_token,
                        sent_text: f.sent_text,
                    }
                }
                None => Made {
                    exchange,
                    took,
                    first_token: None,
                    sent_text: false,
                },
            },
            events::Outcome::Cancelled => {
                let mut e = LlmError::new(&self.opts.name, LlmErrorKind::Cancelled, "cancelled");
                e.attempts = 1;
                let attempt = self.unanswered(1, &e, started.elapsed());
                return done(Err(e), vec![attempt]);
            }
        };
        let log = AttemptLog::new();
        let again = first.clone();
        match self.complete(&request, &cancel, &log, Via::NoWait, Some(first), started) {
            Ok(r) => return done(Ok(r), log.attempts()),
            Err(Stop::Failed(e)) => return done(Err(e), log.attempts()),
            Err(Stop::NeedsThread) => {}
        }
        let run: ThreadCall = Box::new(move |core: &HttpCore, log: &AttemptLog| {
            core.complete(
                &request,
                &cancel,
                log,
                Via::ThisThread,
                Some(again),
                started,
            )
            .map_err(|stop| stop.into_error(&core.opts.name))
        });
        HttpCore::run_on_threads(self, vec![(run, done)]);
    }
}

/// The bytes of a POST of `body` to `target` for the event transport
/// (framed by `ureq-proto`, see `http/framing.rs`).
pub(super) fn request_bytes(
    target: &events::Target,
    url: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<Vec<u8>, String> {
    // The call's own path when its URL is on the target (protocols that
    // name the model in the path); the endpoint's otherwise.
    let path = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_prefix(target.authority.as_str()))
        .filter(|p| p.starts_with('/') || p.starts_with('?'))
        .unwrap_or(&target.path);
    framing::request_bytes(&target.authority, path, headers, body)
}
