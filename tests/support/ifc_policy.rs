//! The policy the information-flow tests share: `fetch_page` is untrusted,
//! `fetch_page` and `read_note` are sources (not sinks), and `send` takes
//! untrusted data only in its `note`.

use ais_ir::ifc::{FlowPolicy, SinkRule};

pub fn mail_policy() -> FlowPolicy {
    let mut p = FlowPolicy {
        untrusted: vec!["fetch_page".into()],
        ..FlowPolicy::default()
    };
    for t in ["fetch_page", "read_note"] {
        p.sinks.insert(
            t.into(),
            SinkRule {
                sink: Some(false),
                ..SinkRule::default()
            },
        );
    }
    p.sinks.insert(
        "send".into(),
        SinkRule {
            allow_untrusted: vec!["note".into()],
            ..SinkRule::default()
        },
    );
    p
}
