//! The order in which an MCP server wrote each tool's `inputSchema`
//! properties. The workspace's `serde_json` sorts object keys (its
//! `preserve_order` feature would reorder every map, goldens and journal
//! hashes included), so the order is read from the reply's text, once,
//! where it arrives; a tool's positional arguments bind in it.

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// The key of a `tools/list` tool entry the client fills with that tool's
/// property order (a server's own value under it is replaced).
pub const PARAM_ORDER: &str = "x-ais-param-order";

/// Each tool's `inputSchema.properties` names in text order, in the order
/// of the reply's `result.tools`; empty when the line is not such a reply
/// or does not parse as one (the caller then has no order to offer).
pub fn tool_param_orders(line: &str) -> Vec<Vec<String>> {
    #[derive(Deserialize)]
    struct Msg {
        result: Page,
    }
    #[derive(Deserialize)]
    struct Page {
        tools: Vec<Tool>,
    }
    #[derive(Deserialize)]
    struct Tool {
        #[serde(rename = "inputSchema", default)]
        input_schema: Option<Schema>,
    }
    #[derive(Deserialize)]
    struct Schema {
        #[serde(default)]
        properties: Keys,
    }
    serde_json::from_str::<Msg>(line)
        .map(|m| {
            m.result
                .tools
                .into_iter()
                .map(|t| t.input_schema.map(|s| s.properties.0).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

/// An object's keys in text order, first occurrence only.
#[derive(Default)]
struct Keys(Vec<String>);

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys: Vec<String> = Vec::new();
                while let Some(k) = map.next_key::<String>()? {
                    map.next_value::<IgnoredAny>()?;
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_keep_the_order_the_server_wrote() {
        let line = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"z_first":{"type":"string"},"a_second":{"properties":{"q":{}}}}}},{"name":"b"},{"name":"c","inputSchema":{"type":"object"}}]}}"#;
        assert_eq!(
            tool_param_orders(line),
            vec![
                vec!["z_first".to_string(), "a_second".to_string()],
                vec![],
                vec![]
            ]
        );
    }

    #[test]
    fn other_lines_give_no_order() {
        assert!(tool_param_orders(r#"{"id":1,"result":{"content":[]}}"#).is_empty());
        assert!(tool_param_orders(
            r#"{"id":1,"result":{"tools":[{"inputSchema":{"properties":[]}}]}}"#
        )
        .is_empty());
        assert!(tool_param_orders("not json").is_empty());
    }
}
