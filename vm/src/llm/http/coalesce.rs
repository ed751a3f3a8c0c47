//! One write per request: a ureq transport wrapper that holds back what
//! ureq transmits until it waits for the reply.
//!
//! ureq sends a request's head and its body with two writes. With
//! `TCP_NODELAY` (which ureq sets) that is two TCP segments, so the server
//! is often woken twice and both ends run the TCP path twice per call; on a
//! small machine running a wide fan-out against a local server that is a
//! measurable share of each call's CPU. Holding the bytes until ureq first
//! waits for input (or until a buffer's worth has gathered) makes it one
//! write, like `TCP_CORK`. Bodies larger than the output buffer still go
//! out in buffer-sized writes.
//!
//! `ureq::unversioned` is exempt from ureq's semver promises; the version is
//! pinned by the lockfile, and the tests in `vm/tests/` exercise this path
//! against the mock server (plain HTTP) on every run.

use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};
use ureq::Error;

/// Wraps the transports made by the connectors before it in the chain.
#[derive(Debug, Default)]
pub(super) struct CoalesceConnector;

impl Connector<Box<dyn Transport>> for CoalesceConnector {
    type Out = Coalescing;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<Box<dyn Transport>>,
    ) -> Result<Option<Coalescing>, Error> {
        Ok(chained.map(|inner| Coalescing {
            inner,
            pending: Vec::new(),
            timeout: None,
        }))
    }
}

#[derive(Debug)]
pub(super) struct Coalescing {
    inner: Box<dyn Transport>,
    /// Bytes ureq has transmitted that are not sent yet.
    pending: Vec<u8>,
    /// The write timeout of the first held-back transmit.
    timeout: Option<NextTimeout>,
}

impl Coalescing {
    /// Sends the held-back bytes, in writes of at most the inner output
    /// buffer's size.
    fn flush(&mut self) -> Result<(), Error> {
        let Some(timeout) = self.timeout.take() else {
            return Ok(());
        };
        let mut sent = 0;
        while sent < self.pending.len() {
            let out = self.inner.buffers().output();
            let n = out.len().min(self.pending.len() - sent);
            if n == 0 {
                // No output buffer at all: nothing can be sent this way.
                self.pending.clear();
                return Err(Error::Io(std::io::Error::other(
                    "the connection has no output buffer",
                )));
            }
            out[..n].copy_from_slice(&self.pending[sent..sent + n]);
            let r = self.inner.transmit_output(n, timeout);
            if r.is_err() {
                self.pending.clear();
                return r;
            }
            sent += n;
        }
        self.pending.clear();
        Ok(())
    }
}

impl Transport for Coalescing {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let out = self.inner.buffers().output();
        let Some(bytes) = out.get(..amount) else {
            return Err(Error::Io(std::io::Error::other(
                "transmit beyond the output buffer",
            )));
        };
        let cap = out.len();
        self.pending.extend_from_slice(bytes);
        self.timeout.get_or_insert(timeout);
        if self.pending.len() >= cap {
            return self.flush();
        }
        Ok(())
    }

    fn maybe_await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush()?;
        self.inner.maybe_await_input(timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush()?;
        self.inner.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use ureq::unversioned::transport::LazyBuffers;

    /// Records each write it is asked to make.
    #[derive(Debug)]
    struct Recorder {
        buffers: LazyBuffers,
        writes: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Transport for Recorder {
        fn buffers(&mut self) -> &mut dyn Buffers {
            &mut self.buffers
        }
        fn transmit_output(&mut self, amount: usize, _: NextTimeout) -> Result<(), Error> {
            let bytes = self.buffers.output()[..amount].to_vec();
            self.writes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(bytes);
            Ok(())
        }
        fn await_input(&mut self, _: NextTimeout) -> Result<bool, Error> {
            Ok(false)
        }
        fn is_open(&mut self) -> bool {
            true
        }
    }

    fn timeout() -> NextTimeout {
        NextTimeout {
            after: ureq::unversioned::transport::time::Duration::Exact(
                std::time::Duration::from_secs(1),
            ),
            reason: ureq::Timeout::SendRequest,
            per_read: None,
            per_write: None,
        }
    }

    fn coalescing(out: usize) -> (Coalescing, Arc<Mutex<Vec<Vec<u8>>>>) {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let inner = Recorder {
            buffers: LazyBuffers::new(64, out),
            writes: Arc::clone(&writes),
        };
        let t = Coalescing {
            inner: Box::new(inner),
            pending: Vec::new(),
            timeout: None,
        };
        (t, writes)
    }

    /// What ureq does: fill the output buffer, transmit part of it.
    fn transmit(t: &mut Coalescing, bytes: &[u8]) {
        t.buffers().output()[..bytes.len()].copy_from_slice(bytes);
        assert!(t.transmit_output(bytes.len(), timeout()).is_ok());
    }

    #[test]
    fn head_and_body_go_out_in_one_write_when_the_reply_is_awaited() {
        let (mut t, writes) = coalescing(1024);
        transmit(&mut t, b"POST / HTTP/1.1\r\n\r\n");
        transmit(&mut t, b"{\"body\":1}");
        assert!(writes.lock().unwrap_or_else(|e| e.into_inner()).is_empty());
        assert!(t.await_input(timeout()).is_ok());
        let w = writes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(w, vec![b"POST / HTTP/1.1\r\n\r\n{\"body\":1}".to_vec()]);
        // Nothing is held back any more: waiting again writes nothing.
        assert!(t.maybe_await_input(timeout()).is_ok());
        assert_eq!(writes.lock().unwrap_or_else(|e| e.into_inner()).len(), 1);
    }

    #[test]
    fn a_large_body_goes_out_in_buffer_sized_writes_in_order() {
        let (mut t, writes) = coalescing(16);
        let data: Vec<u8> = (0..100u8).collect();
        for chunk in data.chunks(10) {
            transmit(&mut t, chunk);
        }
        assert!(t.await_input(timeout()).is_ok());
        let w = writes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert!(w.iter().all(|x| x.len() <= 16), "{w:?}");
        assert_eq!(w.concat(), data);
    }
}
