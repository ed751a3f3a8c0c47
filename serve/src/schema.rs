//! JSON Schemas of flow parameters and results (MCP tool schemas).

use ais_ir::bytecode::Program;
use ais_ir::Type;
use serde_json::{json, Map, Value as Json};

/// The schema of values of type `t` as the API takes and returns them.
pub fn of_type(t: &Type) -> Json {
    match t {
        Type::Str => json!({"type": "string"}),
        Type::Number => json!({"type": "number"}),
        Type::Bool => json!({"type": "boolean"}),
        Type::Void | Type::Null | Type::Ord => json!({"type": "null"}),
        Type::List(e) => json!({"type": "array", "items": of_type(e)}),
        // `json` and named types hold any JSON value.
        Type::Json | Type::Opaque(_) => json!({}),
    }
}

/// An object schema with one property per parameter of `flow`, all required.
pub fn input(program: &Program, flow: u32) -> Json {
    let mut props = Map::new();
    let mut required = Vec::new();
    if let Some(f) = program.flows.get(flow as usize) {
        for (name, t) in &f.params {
            let ty = program.type_of(*t);
            let mut s = of_type(&ty);
            if let Json::Object(o) = &mut s {
                o.insert("description".into(), format!("{name}: {ty}").into());
            }
            props.insert(name.clone(), s);
            required.push(Json::from(name.as_str()));
        }
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// `{result: <the flow's result>}`: structured results must be objects.
pub fn output(program: &Program, flow: u32) -> Json {
    let result = program
        .flows
        .get(flow as usize)
        .map_or_else(|| json!({}), |f| of_type(&program.type_of(f.result)));
    json!({
        "type": "object",
        "properties": {"result": result},
        "required": ["result"],
    })
}
