//! The OTLP `ExportTraceServiceRequest` in protobuf's wire format, written
//! by hand for the fields we send (field numbers from
//! `opentelemetry/proto/{collector/trace,trace,common,resource}/v1`).
//!
//! Why by hand: OTLP/HTTP's default and only universally accepted encoding
//! is protobuf (Arize Phoenix, for one, answers JSON with 415), and the
//! `opentelemetry-proto` crate's message types come with `tonic`, `tokio`
//! and the SDK (45 crates) — the VM keeps no async runtime. The subset is
//! five wire types and a dozen messages; `vm/tests/otlp_export.rs` decodes
//! what this writes.

use super::spans::{Attr, Span};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

/// A nested message: written in place, then its length inserted before it
/// (one move of the bytes instead of a buffer per message: encoding was
/// mostly allocation before).
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(out, field, 2);
    let start = out.len();
    body(out);
    let mut v = (out.len() - start) as u64;
    let mut prefix = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        prefix[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    prefix[n] = v as u8;
    out.splice(start..start, prefix[..=n].iter().copied());
}

/// `AnyValue`.
fn any_value(out: &mut Vec<u8>, v: &Attr) {
    match v {
        Attr::Str(s) => string(out, 1, s),
        Attr::Bool(b) => uint(out, 2, u64::from(*b)),
        // int64: two's complement as a varint.
        Attr::Int(i) => uint(out, 3, *i as u64),
        Attr::F64(f) => fixed64(out, 4, f.to_bits()),
        Attr::StrArray(items) => message(out, 5, |a| {
            for s in items {
                message(a, 1, |v| string(v, 1, s));
            }
        }),
    }
}

/// `KeyValue` at `field`.
fn key_value(out: &mut Vec<u8>, field: u32, k: &str, v: &Attr) {
    message(out, field, |kv| {
        string(kv, 1, k);
        message(kv, 2, |a| any_value(a, v));
    });
}

fn span(out: &mut Vec<u8>, s: &Span) {
    bytes(out, 1, &s.trace_id);
    bytes(out, 2, &s.span_id);
    if let Some(p) = &s.parent {
        bytes(out, 4, p);
    }
    string(out, 5, &s.name);
    uint(out, 6, s.kind as u64);
    fixed64(out, 7, s.start_unix_ns);
    fixed64(out, 8, s.end_unix_ns);
    for (k, v) in &s.attributes {
        key_value(out, 9, k, v);
    }
    for e in &s.events {
        message(out, 11, |m| {
            fixed64(m, 1, e.time_unix_ns);
            string(m, 2, e.name);
            for (k, v) in &e.attributes {
                key_value(m, 3, k, v);
            }
        });
    }
    if let Some(msg) = &s.error {
        // Status { message = 2; code = 3 (2: ERROR) }
        message(out, 15, |st| {
            string(st, 2, msg);
            uint(st, 3, 2);
        });
    }
}

/// The request body for `spans`, under one resource (`service.name`) and
/// the `ais-vm` instrumentation scope.
pub fn export_request(service_name: &str, spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 * spans.len() + 128);
    // ExportTraceServiceRequest.resource_spans = 1
    message(&mut out, 1, |rs| {
        // ResourceSpans.resource = 1 (Resource.attributes = 1)
        message(rs, 1, |r| {
            key_value(r, 1, "service.name", &Attr::Str(service_name.to_string()));
            key_value(r, 1, "telemetry.sdk.name", &Attr::Str("ais-vm".into()));
            key_value(r, 1, "telemetry.sdk.language", &Attr::Str("rust".into()));
        });
        // ResourceSpans.scope_spans = 2
        message(rs, 2, |ss| {
            // ScopeSpans.scope = 1 (InstrumentationScope name = 1, version = 2)
            message(ss, 1, |sc| {
                string(sc, 1, "ais-vm");
                string(sc, 2, env!("CARGO_PKG_VERSION"));
            });
            for s in spans {
                message(ss, 2, |b| span(b, s));
            }
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fixed_fields_have_the_wire_layout() {
        let mut b = Vec::new();
        varint(&mut b, 300);
        assert_eq!(b, [0xAC, 0x02]);
        let mut b = Vec::new();
        uint(&mut b, 6, 3);
        assert_eq!(b, [0x30, 3]);
        let mut b = Vec::new();
        fixed64(&mut b, 7, 1);
        assert_eq!(b, [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        let mut b = Vec::new();
        any_value(&mut b, &Attr::Int(-1));
        // field 3, varint, ten bytes of two's complement
        assert_eq!(b.len(), 11);
        assert_eq!(b[0], 0x18);
    }
}
