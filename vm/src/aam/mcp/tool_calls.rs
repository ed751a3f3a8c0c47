//! The server's tools: `tools/list` (following `nextCursor`), each tool's
//! description and parameter order, and `tools/call`.

use super::{err, McpClient, McpTool, Reply};
use crate::host::HostError;
use crate::llm::CancelToken;
use ais_wire::mcp::{method, Hints};
use serde_json::{json, Value as Json};

impl McpClient {
    pub(super) fn list_tools(&self, cancel: &CancelToken) -> Result<Vec<McpTool>, HostError> {
        let mut tools = Vec::new();
        let mut cursor: Option<Json> = None;
        for _ in 0..1000 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request(method::TOOLS_LIST, params, cancel)?;
            let list = page.get("tools").and_then(Json::as_array).ok_or_else(|| {
                err(
                    &self.name,
                    "mcp.protocol",
                    "`tools/list` returned no `tools` list".into(),
                )
            })?;
            for t in list {
                tools.push(parse_tool(&self.name, t)?);
            }
            cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }

    /// `tools/call`: the tool's structured content if it has some, else the
    /// text of a single text item, else the content list. `isError` replies
    /// become `mcp.tool_error`.
    pub fn call_tool(&self, tool: &str, args: &Json, cancel: &CancelToken) -> Reply {
        let args = if args.is_null() {
            json!({})
        } else {
            args.clone()
        };
        let mut params = json!({"name": tool, "arguments": args});
        // The call's idempotency key, the same across retries of a call
        // left in doubt: a server that deduplicates can use it.
        if let Some(k) = crate::catalogue::process::idempotency_key() {
            params["_meta"] = json!({ "ais/idempotency_key": k });
        }
        let r = self.request(method::TOOLS_CALL, params, cancel)?;
        ais_wire::mcp::call_value(&r).map_err(|failed| {
            err(
                &self.name,
                "mcp.tool_error",
                format!("tool `{tool}` failed: {}", failed.text),
            )
            .with_payload(json!({"server": self.name, "tool": tool, "content": failed.content}))
        })
    }
}

/// Marks each tool of a `tools/list` result with the order its
/// `inputSchema` properties have in the reply's text (lost once parsed).
pub(super) fn with_param_orders(result: &mut Json, text: &str) {
    let Some(tools) = result.get_mut("tools").and_then(Json::as_array_mut) else {
        return;
    };
    let orders = crate::aam::key_order::tool_param_orders(text);
    for (i, t) in tools.iter_mut().enumerate() {
        if let Some(t) = t.as_object_mut() {
            t.remove(crate::aam::key_order::PARAM_ORDER);
            if let Some(o) = orders.get(i).filter(|o| !o.is_empty()) {
                t.insert(crate::aam::key_order::PARAM_ORDER.into(), json!(o));
            }
        }
    }
}

fn parse_tool(server: &str, t: &Json) -> Result<McpTool, HostError> {
    let name = t
        .get("name")
        .and_then(Json::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            err(
                server,
                "mcp.protocol",
                format!("a tool without a name: {t}"),
            )
        })?;
    let Hints {
        read_only,
        destructive,
    } = Hints::of(t);
    let schema = |k: &str| t.get(k).filter(|s| s.is_object()).cloned();
    Ok(McpTool {
        name: name.to_string(),
        description: t
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string(),
        input_schema: schema("inputSchema"),
        param_order: t
            .get(crate::aam::key_order::PARAM_ORDER)
            .and_then(Json::as_array)
            .map(|o| {
                o.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        output_schema: schema("outputSchema"),
        destructive,
        read_only,
    })
}
