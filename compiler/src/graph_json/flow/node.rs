//! One node → its ops: its operands from the edges (type-checked against
//! the op table), then the node as our op, as a reference op's expansion
//! (`reference.rs`, `refonly.rs`), or as a call to an agent from elsewhere.

use super::{FlowLowering, Input, Source};
use crate::graph_json::attrs;
use crate::graph_json::build::{Build, Data, DataIn};
use crate::graph_json::errors::GraphError;
use crate::graph_json::reference::Expanded;
use crate::graph_json::schema::Dependency;
use crate::graph_json::spans::Seg;
use ais_ir::{FlowData, Opcode, Region, Type, Value};

impl FlowLowering<'_, '_> {
    pub(super) fn value_of(
        &self,
        flow: &FlowData,
        input: &Input<'_>,
    ) -> Result<Option<Value>, GraphError> {
        let span = self.edge_span(input.edge, None);
        let missing = |what: String| GraphError::UnknownEnd {
            message: what,
            span,
        };
        Ok(Some(match input.source {
            Source::Param(p) => match flow.params.iter().find(|(n, _)| n == p) {
                Some((_, v)) => *v,
                None => return Err(missing(format!("unknown parameter `{p}`"))),
            },
            Source::Arg { node, region, arg } => {
                match self
                    .region_args
                    .get(&(node, region))
                    .and_then(|a| a.get(arg))
                {
                    Some(v) => *v,
                    None => {
                        return Err(missing(format!(
                            "node {} has no region argument [{region}, {arg}] here",
                            self.id(node)
                        )))
                    }
                }
            }
            Source::Node { node, result } => {
                let Some(vals) = self
                    .values
                    .get(node)
                    .filter(|v| !v.is_empty() || self.types[node].is_empty())
                else {
                    return Err(missing(format!(
                        "node {} is used outside the region it is defined in",
                        self.id(node)
                    )));
                };
                let ord_at = self.types[node].iter().rposition(|t| *t == Type::Ord);
                let k = match (result, input.dependency) {
                    (Some(k), _) => k,
                    (None, Dependency::Data) => 0,
                    // Reference ordering edges (`Effect`, and `Control`:
                    // run after): the ord token if there is one. A pure
                    // node's value exists before anything reads it, so an
                    // edge from it orders nothing observable.
                    (None, Dependency::Effect | Dependency::Control) => match ord_at {
                        Some(k) => k,
                        None => return Ok(None),
                    },
                };
                match vals.get(k) {
                    Some(v) => *v,
                    None => {
                        return Err(missing(format!("node {} has no result {k}", self.id(node))))
                    }
                }
            }
        }))
    }

    pub(super) fn id(&self, i: usize) -> u64 {
        self.g.g.nodes[i].id.unwrap_or_default()
    }

    /// The values feeding node `i`, in operand order, type-checked.
    pub(super) fn operands(
        &self,
        flow: &FlowData,
        i: usize,
    ) -> Result<Vec<(Value, usize)>, GraphError> {
        let mut placed: Vec<Option<(Value, usize)>> = Vec::new();
        let mut data = Vec::new();
        let mut tokens = Vec::new();
        // A `Control` edge into an op that takes no ordering token (a pure
        // op, which runs when its data exists) orders nothing.
        let takes_tokens = self.opcodes[i].info().takes_ord || self.refonly[i].is_some();
        for input in &self.inputs[i] {
            if input.dependency == Dependency::Control && input.operand.is_none() && !takes_tokens {
                continue;
            }
            let Some(v) = self.value_of(flow, input)? else {
                continue;
            };
            match input.operand {
                Some(k) => {
                    if k >= placed.len() {
                        placed.resize(k + 1, None);
                    }
                    if placed[k].is_some() {
                        return Err(GraphError::BadStructure {
                            message: format!("two edges feed operand {k} of node {}", self.id(i)),
                            span: self.edge_span(input.edge, Some("operand")),
                        });
                    }
                    placed[k] = Some((v, input.edge));
                }
                None if *flow.dfg.value_type(v) == Type::Ord => tokens.push((v, input.edge)),
                None => data.push((v, input.edge)),
            }
        }
        let mut out = Vec::new();
        for (k, p) in placed.into_iter().enumerate() {
            match p {
                Some(x) => out.push(x),
                None => {
                    return Err(GraphError::BadStructure {
                        message: format!("no edge feeds operand {k} of node {}", self.id(i)),
                        span: self.node_span(i),
                    })
                }
            }
        }
        out.extend(data);
        out.extend(tokens);
        Ok(out)
    }

    pub(super) fn check_types(
        &self,
        flow: &FlowData,
        i: usize,
        ops: &[(Value, usize)],
        sugar: bool,
    ) -> Result<(), GraphError> {
        let info = self.opcodes[i].info();
        for (k, &(v, e)) in ops.iter().enumerate() {
            let ty = flow.dfg.value_type(v);
            let dep = self.g.g.edges[e].dependency;
            let span = self.edge_span(e, None);
            let mismatch = |message: String| GraphError::TypeMismatch { message, span };
            if *ty == Type::Ord {
                // A `Data` edge from an op whose only result is its token
                // (the reference's `UMEM` → `FENCE`) orders like an
                // `Effect` edge.
                // A reference op without an op of its own takes them: its
                // tool calls (`CLAIM`, `UPDATE_GOAL`) are ordered by them.
                if !info.takes_ord && self.refonly[i].is_none() && !info.operand_type(k).admits(ty)
                {
                    return Err(mismatch(format!(
                        "`{}` takes no ordering tokens",
                        self.opcodes[i].graph_name()
                    )));
                }
            } else if dep == Dependency::Effect {
                return Err(mismatch(format!(
                    "an `Effect` edge carries an ordering token, but this value is `{ty}`"
                )));
            } else if !sugar && !info.operand_type(k).admits(ty) {
                return Err(mismatch(format!(
                    "operand {k} of `{}` must be {}, but node {} gives `{ty}`",
                    self.opcodes[i].graph_name(),
                    info.operand_type(k),
                    self.g.g.edges[e]
                        .from
                        .map_or_else(|| "the parameter".into(), |f| f.to_string()),
                )));
            }
        }
        Ok(())
    }

    pub(super) fn op(
        &mut self,
        flow: &mut FlowData,
        i: usize,
        region: Region,
        errors: &mut Vec<GraphError>,
    ) -> Result<(), GraphError> {
        let node = &self.g.g.nodes[i];
        let opcode = self.opcodes[i];
        let span = self.node_span(i);
        if opcode == Opcode::Switch && node.results.is_none() && node.regions.is_empty() {
            let no_cases = ["cases", "case_labels", "case_regions"].iter().all(|k| {
                node.attributes
                    .get(*k)
                    .is_none_or(|v| v.as_array().is_some_and(Vec::is_empty))
            });
            if no_cases {
                // No case and no default to run: the reference's switch
                // is `null` (after its inputs, which are ordinary nodes).
                let mut b = Build::new(flow, region, span);
                let null = b.konst(ais_ir::Attr::Json(serde_json::Value::Null), Type::Null);
                self.types[i] = vec![Type::Null];
                if self.values.len() < self.g.g.nodes.len() {
                    self.values.resize(self.g.g.nodes.len(), Vec::new());
                }
                self.values[i] = vec![null];
                return Ok(());
            }
        }
        if opcode == Opcode::Switch
            && node.results.is_none()
            && node.regions.is_empty()
            && ["cases", "case_labels", "discriminant"]
                .iter()
                .any(|k| node.attributes.contains_key(*k))
        {
            // The reference's flat switch: its cases name nodes to run.
            return Err(GraphError::ReferenceOnlyOp {
                op: "SWITCH".into(),
                span: self.field_span(i, "attributes"),
            });
        }
        let ours = node.results.is_some();
        if let (true, Some(serde_json::Value::String(p))) = (ours, node.attributes.get("ais_param"))
        {
            let Some(&(_, v)) = flow.params.iter().find(|(n, _)| n == p) else {
                return Err(GraphError::UnknownEnd {
                    message: format!("node {} stands for the unknown parameter `{p}`", self.id(i)),
                    span,
                });
            };
            self.types[i] = vec![flow.dfg.value_type(v).clone()];
            if self.values.len() < self.g.g.nodes.len() {
                self.values.resize(self.g.g.nodes.len(), Vec::new());
            }
            self.values[i] = vec![v];
            return Ok(());
        }
        let written = node.op.as_deref().unwrap_or_default();
        let operands = self.operands(flow, i)?;
        let refonly = self.refonly[i];
        // The run's input standing for an LLM node's missing prompt (`G0015`).
        let mut run_input = None;
        if !ours && refonly.is_none() {
            // A reference node without what its op definitions require
            // (`ASK` without `template_str`) and without inputs to stand in:
            // the reference's reason, not the verifier's. An LLM node asks
            // the graph's first parameter instead, when there is one (an
            // entry graph gets the run's input for it, `lower.rs`).
            let data = operands
                .iter()
                .filter(|(v, _)| *flow.dfg.value_type(*v) != Type::Ord)
                .count();
            let asks = data == 0
                && crate::graph_json::lower::asks_nothing(written, &node.attributes)
                && !flow.params.is_empty();
            if asks {
                let (name, v) = flow.params[0].clone();
                run_input = Some(v);
                self.warnings.push(GraphError::RunInputPrompt {
                    op: written.to_string(),
                    param: name,
                    span: self.field_span(i, "attributes"),
                });
            } else if !opcode.info().operands.allows(data) {
                if let Some(missing) =
                    crate::graph_json::reference::missing_required(written, &node.attributes)
                {
                    return Err(GraphError::BadAttribute {
                        message: format!(
                            "`{written}` needs the attribute `{missing}` (or an input edge)"
                        ),
                        span: self.field_span(i, "attributes"),
                    });
                }
            }
        }
        let sugar = !ours
            && (refonly.is_some()
                || (node.regions.is_empty()
                    && crate::graph_json::reference::applies(opcode, &node.attributes)));
        self.check_types(flow, i, &operands, sugar)?;
        let mut vals: Vec<Value> = operands.iter().map(|x| x.0).collect();
        vals.extend(run_input);
        let mut attrs = ais_ir::Attrs::default();
        let mut consumed: &[&str] = &[];
        if sugar {
            let attrs_span = self.field_span(i, "attributes");
            let bad = |message: String| GraphError::BadAttribute {
                message,
                span: attrs_span,
            };
            let mut data = Vec::new();
            let mut tokens = Vec::new();
            for &(v, e) in &operands {
                if *flow.dfg.value_type(v) == Type::Ord {
                    tokens.push(v);
                } else {
                    data.push(Data {
                        value: v,
                        from: self.g.g.edges[e].from,
                    });
                    if let Some(t) = self.guard_token(i, e) {
                        if !tokens.contains(&t) {
                            tokens.push(t);
                        }
                    }
                }
            }
            if !opcode.info().takes_ord && refonly.is_none() {
                // A pure op has no effect to order; it needs no token.
                tokens.retain(|t| operands.iter().any(|(v, _)| v == t));
            }
            let inputs = DataIn { data, tokens };
            let mut b = Build::new(flow, region, span);
            b.node = node.name.clone();
            let external = match (opcode, refonly) {
                (Opcode::FlowCall, None) => self.external_callee(&node.attributes),
                _ => None,
            };
            let is_external = external.is_some();
            let expanded = match (refonly, external) {
                (_, Some((agent, callee))) => {
                    let message = format!(
                        "`FLOW_CALL` to `@{agent}.{callee}`: this program has no agent `{agent}` (a graph document runs with the agents it defines; add the agent's flows to its `graphs`)"
                    );
                    self.warnings.push(GraphError::ExternalAgent {
                        agent: agent.clone(),
                        span: attrs_span,
                    });
                    Ok(Expanded::Values(super::calls::external_call(&mut b, message, &inputs.tokens)))
                }
                (Some(name), None) => {
                    crate::graph_json::refonly::lower(name, &node.attributes, &mut b, inputs, &self.pauses)
                        .map(Expanded::Values)
                }
                (None, None) => {
                    crate::graph_json::reference::expand(opcode, &node.attributes, &mut b, inputs)
                }
            }
            .map_err(bad)?;
            match expanded {
                Expanded::Values(vs) => {
                    let unknown = node.attributes.keys().find(|k| {
                        refonly.is_none()
                            && !crate::graph_json::reference::reference_attrs(opcode)
                                .contains(&k.as_str())
                    });
                    if let Some(k) = unknown {
                        return Err(GraphError::BadAttribute {
                            message: format!("`{}` has no attribute `{k}`", opcode.graph_name()),
                            span: self.field_span(i, "attributes"),
                        });
                    }
                    let gated = (opcode == Opcode::Guard || is_external)
                        && vs.len() == 2
                        && *flow.dfg.value_type(vs[1]) == Type::Ord;
                    if gated {
                        self.gated.insert(i);
                    }
                    self.types[i] = vs.iter().map(|&v| flow.dfg.value_type(v).clone()).collect();
                    if self.values.len() < self.g.g.nodes.len() {
                        self.values.resize(self.g.g.nodes.len(), Vec::new());
                    }
                    self.values[i] = vs;
                    return Ok(());
                }
                Expanded::Op {
                    operands,
                    attrs: xs,
                } => {
                    vals = operands;
                    for (n, a) in xs {
                        attrs.set(n, a);
                    }
                    consumed = crate::graph_json::reference::reference_attrs(opcode);
                }
            }
        }
        for (name, v) in &node.attributes {
            if (ours && crate::graph_json::mirror::is_mirror(opcode, written, name))
                || consumed.contains(&name.as_str())
                || (sugar
                    && opcode.info().llm.is_some()
                    && crate::graph_json::reference::LLM_RUNTIME_ONLY.contains(&name.as_str()))
            {
                continue;
            }
            let ours = if sugar {
                crate::graph_json::reference::renamed(name)
            } else {
                name.as_str()
            };
            let attr_span = self.loc.at(&self.g.path(&[
                Seg::Key("nodes"),
                Seg::Index(i),
                Seg::Key("attributes"),
                Seg::Key(name),
            ]));
            let known = opcode.info().attr(ours).is_some();
            if !known {
                return Err(GraphError::BadAttribute {
                    message: format!("`{}` has no attribute `{name}`", opcode.graph_name()),
                    span: attr_span,
                });
            }
            let a = attrs::decode(opcode, ours, v).map_err(|message| GraphError::BadAttribute {
                message,
                span: attr_span,
            })?;
            attrs.set(ours.to_string(), a);
        }
        let op = flow.dfg.create_op(opcode, &vals, &self.types[i]);
        flow.dfg.ops[op].attrs = attrs;
        flow.dfg.spans.insert(op, span);
        flow.dfg.append_op(region, op);
        let results = flow.dfg.ops[op].results.to_vec();
        if self.values.len() < self.g.g.nodes.len() {
            self.values.resize(self.g.g.nodes.len(), Vec::new());
        }
        self.values[i] = results;
        if opcode == Opcode::Pause {
            if let Some(serde_json::Value::String(c)) = node.attributes.get("checkpoint_id") {
                if let Some(&v) = self.values[i].first() {
                    self.pauses.insert(c.clone(), v);
                }
            }
        }
        for (k, spec) in node.regions.iter().enumerate() {
            let r = flow.dfg.create_region(spec.label.clone(), spec.key.clone());
            let mut args = Vec::new();
            for t in &spec.args {
                let ty = Type::parse(t).ok_or_else(|| GraphError::BadStructure {
                    message: format!("region argument type `{t}` is not a type"),
                    span: self.field_span(i, "regions"),
                })?;
                args.push(flow.dfg.add_region_arg(r, ty));
            }
            flow.dfg.attach_region(op, r);
            self.region_args.insert((i, k), args);
            self.region(flow, Some((i, k)), r, errors);
        }
        Ok(())
    }
}
