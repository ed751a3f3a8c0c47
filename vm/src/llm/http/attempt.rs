//! The attempt loop: sends a prepared call until it succeeds, fails for
//! good or its retries run out, judging every outcome (status, body,
//! finish reason) and reporting each attempt; the backoff between tries.

use super::*;

impl HttpCore {
    pub(super) fn next_jitter(&self) -> u64 {
        // xorshift64*; races only mix the state further.
        let mut x = self.jitter.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.jitter.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Backoff before retry number `n` (1-based) without a server delay.
    pub(super) fn backoff(&self, n: u32) -> Duration {
        let r = &self.opts.retry;
        let exp = r.base_delay.saturating_mul(
            1u32.checked_shl(n.saturating_sub(1).min(20))
                .unwrap_or(u32::MAX),
        );
        let d = exp.min(r.max_delay);
        let half = d / 2;
        let span = half.as_micros() as u64;
        let extra = if span == 0 {
            0
        } else {
            self.next_jitter() % (span + 1)
        };
        half + Duration::from_micros(extra)
    }

    /// Sends `p` until it succeeds, fails for good, or retries run out.
    /// `number` counts attempts across the whole call (repairs included).
    /// `first`, when given, is the outcome of the first exchange, made
    /// already.
    pub(super) fn call(
        &self,
        p: &Prepared,
        cancel: &CancelToken,
        observer: &dyn AttemptObserver,
        number: &mut u32,
        via: Via,
        first: &mut First,
    ) -> Result<Reply, Stop> {
        let sink = p.on_text.as_ref();
        let headers = self.headers(p);
        // Checked here so both transports refuse alike, before sending; a
        // line break would split the request. The header is named, its
        // value never shown.
        if let Some((name, _)) = headers.iter().find(|(_, v)| v.contains(['\r', '\n'])) {
            return Err(self
                .fail(
                    LlmErrorKind::Client,
                    None,
                    format!("the `{name}` header value contains a line break; check the backend's settings"),
                    *number,
                )
                .into());
        }
        let body = self.body(p).to_string();
        let url = self.url(p);
        let mut retries = 0u32;
        loop {
            if cancel.is_cancelled() {
                // An exchange made already (the first, on the event
                // transport) was a request sent: it is an attempt.
                if let Some(m) = first.take() {
                    *number += 1;
                    let status = match &m.exchange {
                        Exchange::Status { status, .. } => Some(*status),
                        _ => None,
                    };
                    let e = self.fail(LlmErrorKind::Cancelled, status, "cancelled".into(), *number);
                    observer.on_attempt(&Attempt {
                        status,
                        ..self.unanswered(*number, &e, m.took)
                    });
                    return Err(e.into());
                }
                return Err(self
                    .fail(LlmErrorKind::Cancelled, None, "cancelled".into(), *number)
                    .into());
            }
            let made = first.take();
            if made.is_none() && via == Via::NoWait {
                return Err(Stop::NeedsThread);
            }
            *number += 1;
            let (outcome, latency, first_token, sent_text) = match made {
                Some(m) => (m.exchange, m.took, m.first_token, m.sent_text),
                None => {
                    let started = Instant::now();
                    let made = match (&self.events, self.opts.stream) {
                        (Some(ev), true) => {
                            let feed = streaming::StreamFeed::new(
                                self.opts.protocol,
                                &self.masker,
                                sink.cloned(),
                                *number,
                                started,
                            );
                            let feed = Arc::new(std::sync::Mutex::new(feed));
                            self.exchange_evented(ev, &url, &headers, &body, cancel, Some(&feed))
                                .map(|x| {
                                    let mut f = lock(&feed);
                                    let x = f.finish(x);
                                    (x, f.first_token, f.sent_text)
                                })
                        }
                        (None, true) => self
                            .exchange_streamed(&url, &headers, body.clone(), cancel, sink, *number)
                            .map(|s| (s.exchange, s.first_token, s.sent_text)),
                        (_, false) => self
                            .exchange(&url, &headers, body.clone(), cancel, via)
                            .map(|x| (x, None, false)),
                    };
                    match made {
                        Ok((x, first_token, sent)) => (x, started.elapsed(), first_token, sent),
                        Err(mut e) => {
                            // The request went out (or was going out) when
                            // the call was cancelled: it is an attempt.
                            observer.on_attempt(&self.unanswered(*number, &e, started.elapsed()));
                            e.attempts = *number;
                            return Err(e.into());
                        }
                    }
                }
            };
            // Known when the server sent a well-formed reply (kept on the
            // attempt even when the reply is not accepted).
            let mut finish_reason = None;
            let mut usage = Usage::default();
            // (kind, status, message, retryable, server delay)
            // A 2xx reply, parsed (from its body, or decoded from its stream).
            let (outcome, replied) = match outcome {
                Exchange::Status { status, body, .. } if (200..300).contains(&status) => {
                    let parsed = serde_json::from_str::<Value>(&body)
                        .map_err(|e| format!("malformed JSON body: {e}"))
                        .and_then(|v| {
                            usage = self.usage(&v);
                            self.parse(&v)
                        });
                    (None, Some((status, parsed)))
                }
                Exchange::Streamed { status, reply } => {
                    usage = reply.usage;
                    (None, Some((status, Ok(reply))))
                }
                other => (Some(other), None),
            };
            let failure: (LlmErrorKind, Option<u16>, String, bool, Option<Duration>) = match (
                outcome, replied,
            ) {
                (_, Some((status, Ok(reply)))) => {
                    finish_reason = Some(reply.finish_reason.clone());
                    match self.incomplete(&reply) {
                        Some(Incomplete::Truncated) if !self.opts.accept_incomplete => (
                            LlmErrorKind::Truncated,
                            Some(status),
                            self.truncated_message(p, &reply),
                            false,
                            None,
                        ),
                        Some(why) if !self.opts.accept_incomplete => {
                            (why.kind(), Some(status), why.message(&reply), false, None)
                        }
                        _ => {
                            observer.on_attempt(&Attempt {
                                provider: self.opts.name.clone(),
                                number: *number,
                                status: Some(status),
                                error: None,
                                message: None,
                                latency,
                                retry_in: None,
                                server_delay: false,
                                finish_reason,
                                usage,
                                first_token,
                            });
                            return Ok(reply);
                        }
                    }
                }
                (_, Some((status, Err(m)))) => {
                    (LlmErrorKind::InvalidResponse, Some(status), m, true, None)
                }
                (Some(Exchange::Transport { kind, message }), None) => {
                    (kind, None, message, true, None)
                }
                (Some(Exchange::Streamed { status, .. }), None) => (
                    LlmErrorKind::InvalidResponse,
                    Some(status),
                    "internal: a reply was judged twice".into(),
                    false,
                    None,
                ),
                (None, None) => (
                    LlmErrorKind::InvalidResponse,
                    None,
                    "internal: no exchange outcome".into(),
                    false,
                    None,
                ),
                (
                    Some(Exchange::Status {
                        status,
                        retry_after,
                        body,
                    }),
                    None,
                ) => {
                    let detail = self.error_detail(&body);
                    let spend = detail.is_spend_limit();
                    let (kind, retryable) = match status {
                        401 | 403 => (LlmErrorKind::Auth, false),
                        408 => (LlmErrorKind::Timeout, true),
                        409 => (LlmErrorKind::Client, true),
                        429 if spend => (LlmErrorKind::Client, false),
                        429 => (LlmErrorKind::RateLimited, true),
                        500..=599 => (LlmErrorKind::Server, !spend),
                        _ => (LlmErrorKind::Client, false),
                    };
                    let mut message = detail.message;
                    if (300..400).contains(&status) {
                        message = format!(
                            "the server redirected the request (HTTP {status}), which is not followed; set base_url to the final address"
                        );
                    }
                    if spend {
                        message = format!("spend limit or quota exhausted, not retried: {message}");
                    }
                    (kind, Some(status), message, retryable, retry_after)
                }
            };
            let (kind, status, message, retryable, server) = failure;
            let message = self.redact(&message);
            let again = retryable && retries < self.opts.retry.max_retries;
            if again && via == Via::NoWait {
                return Err(Stop::NeedsThread);
            }
            let delay = if again {
                retries += 1;
                Some(match server {
                    Some(d) => d.min(self.opts.retry.max_retry_after),
                    None => self.backoff(retries),
                })
            } else {
                None
            };
            observer.on_attempt(&Attempt {
                provider: self.opts.name.clone(),
                number: *number,
                status,
                error: Some(kind),
                message: Some(message.clone()),
                latency,
                retry_in: delay,
                server_delay: again && server.is_some(),
                finish_reason,
                usage,
                first_token,
            });
            // The sink has text of an attempt that will be retried.
            if let (Some(sink), true, Some(_)) = (sink, sent_text, delay) {
                sink.send(&TextEvent::Reset { attempt: *number });
            }
            match delay {
                Some(d) => {
                    if !sleep_cancellable(d, cancel) {
                        return Err(self
                            .fail(
                                LlmErrorKind::Cancelled,
                                status,
                                "cancelled while waiting to retry".into(),
                                *number,
                            )
                            .into());
                    }
                }
                None => {
                    let message = if *number > 1 {
                        format!("{message} (after {} attempts)", *number)
                    } else {
                        message
                    };
                    return Err(self.fail(kind, status, message, *number).into());
                }
            }
        }
    }

    /// The attempt record of request `number`, sent but never answered
    /// (the call was cancelled meanwhile): every request sent is counted.
    pub(super) fn unanswered(&self, number: u32, e: &LlmError, latency: Duration) -> Attempt {
        Attempt {
            provider: self.opts.name.clone(),
            number,
            status: None,
            error: Some(e.kind),
            message: Some(e.message.clone()),
            latency,
            retry_in: None,
            server_delay: false,
            finish_reason: None,
            usage: Usage::default(),
            first_token: None,
        }
    }

    pub(super) fn fail(
        &self,
        kind: LlmErrorKind,
        status: Option<u16>,
        message: String,
        attempts: u32,
    ) -> LlmError {
        LlmError {
            provider: self.opts.name.clone(),
            status,
            message: self.redact(&message),
            attempts,
            kind,
        }
    }
}
