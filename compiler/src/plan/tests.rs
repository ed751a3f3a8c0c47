use super::*;

fn spec() -> PlanSpec {
    PlanSpec {
        agent: "Researcher".into(),
        tools: vec![
            PlanTool::from_schema(
                "search",
                "Search the web",
                &serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
            ),
            PlanTool::from_schema(
                "price",
                "",
                &serde_json::json!({"type": "object", "properties": {"limit": {"type": "integer"}, "item": {"type": "string"}}, "required": ["item"]}),
            ),
        ],
        limits: PlanLimits::default(),
    }
}

fn problems(body: &str) -> Vec<PlanProblem> {
    match check_plan(&spec(), body) {
        Ok(_) => panic!("accepted:\n{body}"),
        Err(p) => p,
    }
}

#[test]
fn signatures_come_from_the_schemas_required_parameters() {
    let s = spec();
    assert_eq!(s.tools[0].signature(), "search(query: str) -> json");
    // `limit` is optional: left to the tool's default.
    assert_eq!(s.tools[1].signature(), "price(item: str) -> json");
    let all = PlanTool::from_schema(
        "t",
        "",
        &serde_json::json!({"properties": {"a": {"type": "boolean"}, "b": {"type": "array", "items": {"type": "string"}}}}),
    );
    assert_eq!(all.signature(), "t(a: bool, b: list<str>) -> json");
}

#[test]
fn a_valid_plan_compiles_to_an_entry_flow_calling_the_tools() {
    let body = "let a = search(\"tidal power\")\nlet b = price(\"turbine\")\nlet c = ask(\"Summarise\", a, b)\nreturn c";
    let p = check_plan(&spec(), body).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(p.source.contains("capability search(query: str) -> json;"));
    let text = ais_ir::print_module(&p.module);
    assert!(text.contains("tool = \"search\""), "{text}");
    assert!(text.contains("tool = \"price\""), "{text}");
    let entry = p.program.find_entry(None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.program.flow_name(entry), "Researcher.plan");
}

#[test]
fn a_type_error_is_positioned_in_the_plan() {
    let p = problems("let a = search(\"x\")\nlet n = a - undefined_name\nreturn \"done\"");
    assert!(p.iter().any(|p| p.at.is_some_and(|(l, _)| l == 2)), "{p:?}");
    assert!(p.iter().all(|p| p.to_string().contains("error[")));
}

#[test]
fn a_tool_that_was_not_offered_is_refused() {
    let p = problems("let a = inv(\"send_email\", \"{}\")\nreturn \"sent\"");
    assert!(
        p.iter()
            .any(|p| p.code == "P0003" && p.message.contains("send_email")),
        "{p:?}"
    );
}

#[test]
fn memory_and_output_are_refused() {
    let p = problems("print(\"hello\")\nreturn \"x\"");
    assert!(p.iter().any(|p| p.message.contains("`print`")), "{p:?}");
}

#[test]
fn garbage_and_size_limits_are_refused() {
    assert!(!problems("this is not a plan at all").is_empty());
    assert_eq!(problems("   ")[0].code, "P0001");
    let long = "let a = \"x\"\n".repeat(3000) + "return a";
    assert_eq!(problems(&long)[0].code, "P0002");
}

#[test]
fn nesting_is_bounded() {
    let mut body = String::from("let x = \"a\"\n");
    for _ in 0..6 {
        body.push_str("if (x == \"a\") {\n");
    }
    body.push_str("x = \"b\"\n");
    for _ in 0..6 {
        body.push_str("}\n");
    }
    body.push_str("return x");
    assert!(problems(&body).iter().any(|p| p.code == "P0004"));
}

#[test]
fn the_plan_is_taken_from_a_fenced_block() {
    assert_eq!(
        extract_plan("Here:\n```ais\nreturn \"x\"\n```\nDone."),
        "return \"x\""
    );
    assert_eq!(extract_plan("return \"x\""), "return \"x\"");
    assert!(guide(&spec()).contains("- search(query: str) -> json: Search the web"));
}

#[test]
fn the_statement_prefix_is_what_is_complete_outside_brackets_and_strings() {
    let r = "Here is the plan:\n```ais\nlet a = search(\"one\")\nlet b = search(\"two\n";
    assert_eq!(statement_prefix(r), Some("let a = search(\"one\")"));
    // A string with a line break in it, a call spread over lines.
    let r = "```ais\nlet a = search(\"x\\\"y\")\nlet b = price(\n  \"z\"\n";
    assert_eq!(statement_prefix(r), Some("let a = search(\"x\\\"y\")"));
    let r = "```ais\nif (true) {\n  let a = search(\"q\")\n}\nlet b = ";
    assert_eq!(
        statement_prefix(r),
        Some("if (true) {\n  let a = search(\"q\")\n}")
    );
    // Nothing complete yet; a whole plan; a plan reaching its return.
    assert_eq!(statement_prefix("```ais\nlet a = sea"), None);
    assert_eq!(
        statement_prefix("```ais\nlet a = search(\"q\")\nreturn a\n```"),
        None
    );
    assert_eq!(
        statement_prefix("let a = search(\"q\")\nreturn \"x\"\n"),
        None
    );
    // No fence: the text itself.
    assert_eq!(
        statement_prefix("let a = search(\"q\")\nlet"),
        Some("let a = search(\"q\")")
    );
}

#[test]
fn a_checked_prefix_keeps_every_call_and_a_bad_one_checks_nothing() {
    let p = check_prefix(
        &spec(),
        "```ais\nlet a = search(\"one\")\nlet b = search(\"two\")\nlet c = ask(\"x\",",
    )
    .expect("the two calls check");
    let calls = p
        .program
        .flows
        .iter()
        .flat_map(|f| f.regions.iter())
        .flat_map(|r| r.ops.iter())
        .filter(|i| i.opcode == Opcode::Inv)
        .count();
    // Unused results, yet both calls are kept (no optimisation).
    assert_eq!(calls, 2);
    assert!(check_prefix(&spec(), "```ais\nlet a = nosuch(\"one\")\nlet").is_none());
    assert!(check_prefix(&spec(), "```ais\nlet a = search(1, 2, 3)\nlet").is_none());
}

#[test]
fn an_import_in_a_plan_is_refused_with_its_own_code() {
    let p = problems("import \"/etc/secrets.ais\"\nreturn \"x\"");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].code, "E0012");
    assert_eq!(p[0].at, Some((1, 1)));
}

/// The plan-tool signatures of the first LLM op offering tools in `source`,
/// built from the bytecode's tool declarations as the VM hands them over.
fn offered_signatures(source: &str) -> Vec<String> {
    let compiled = driver::compile_source(source).unwrap_or_else(|d| panic!("{d:?}"));
    let program = bytecode::compile(&compiled.module).unwrap_or_else(|e| panic!("{e}"));
    let tools = program
        .flows
        .iter()
        .flat_map(|f| f.regions.iter().flat_map(|r| r.ops.iter()))
        .find_map(|i| match &i.imm {
            bytecode::Imm::Llm(a) if !a.tools.is_empty() => Some(a.tools.clone()),
            _ => None,
        })
        .expect("an LLM op offering tools");
    tools
        .iter()
        .map(|t| {
            let schema: Json = serde_json::from_str(&t.parameters).unwrap_or_default();
            PlanTool::from_schema(&t.name, &t.description, &schema).signature()
        })
        .collect()
}

#[test]
fn parameters_are_offered_in_declared_order_not_by_name() {
    // serde_json sorts `properties`; `required` keeps the text order.
    let schema: Json = serde_json::from_str(
        r#"{"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to", "body"]}"#,
    )
    .unwrap_or_default();
    let t = PlanTool::from_schema("send_email", "", &schema);
    assert_eq!(t.signature(), "send_email(to: str, body: str) -> json");
    let schema: Json = serde_json::from_str(
        r#"{"properties": {"z_first": {"type": "number"}, "a_second": {"type": "string"}}, "required": ["z_first", "a_second"]}"#,
    )
    .unwrap_or_default();
    let t = PlanTool::from_schema("t", "", &schema);
    assert_eq!(t.signature(), "t(z_first: number, a_second: str) -> json");
}

#[test]
fn a_declared_capability_reaches_the_plan_in_its_parameter_order() {
    let source = r#"agent A {
    capability send_email(to: str, body: str) -> json;
    capability t(z_first: number, a_second: str) -> json;

    @entry flow main(goal: str) -> str {
        return solve("{goal}", tools: [send_email, t])
    }
}
"#;
    assert_eq!(
        offered_signatures(source),
        vec![
            "send_email(to: str, body: str) -> json".to_string(),
            "t(z_first: number, a_second: str) -> json".to_string(),
        ]
    );
}

#[test]
fn a_built_in_tool_reaches_the_plan_in_its_schemas_order() {
    // `write_file(path, content)`: `content` sorts first by name.
    let source = r#"agent A {
    @entry flow main(goal: str) -> str {
        return solve("{goal}", tools: [write_file])
    }
}
"#;
    let sigs = offered_signatures(source);
    assert_eq!(sigs.len(), 1);
    assert!(
        sigs[0].starts_with("write_file(path: str, content: str"),
        "{sigs:?}"
    );
}

#[test]
fn the_guides_example_calls_no_tool() {
    // Issue 34: a small model copied the example's `search` although it
    // was not offered.
    let mut no_tools = spec();
    no_tools.tools.clear();
    let g = guide(&no_tools);
    assert!(!g.contains("search"), "{g}");
}
