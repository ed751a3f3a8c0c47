//! Parser for the textual IR. Never panics; collects errors and recovers at
//! line boundaries. Spans are byte ranges into the `.aisir` text.

use crate::diag::{Diagnostic, IntoDiagnostic};
use crate::entity::{Op, Region, Value};
use crate::lexer::{lex, Tok};
use crate::module::{
    AgentData, Attr, Attrs, BeliefDecl, BeliefInit, Capability, FlowData, GoalDecl, Handler,
    MemoryDecl, Module, OpData, Tier, ValueDef,
};
use crate::ops::Opcode;
use crate::types::Type;
use crate::Span;
use smallvec::SmallVec;
use std::collections::HashMap;

/// Errors of the textual-IR parser. Codes `P0001`..
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("expected {expected}, found {found}")]
    Expected {
        expected: String,
        found: String,
        span: Span,
    },
    #[error("unknown op `{name}`")]
    UnknownOp { name: String, span: Span },
    #[error("undefined value `{name}`")]
    UndefinedValue { name: String, span: Span },
    #[error("value `{name}` is defined more than once")]
    Redefinition { name: String, span: Span },
    #[error("{results} result(s) but {types} result type(s)")]
    ResultTypeCount {
        results: usize,
        types: usize,
        span: Span,
    },
    #[error("unknown type `{name}`")]
    UnknownType { name: String, span: Span },
    #[error("invalid {what}: {reason}")]
    BadLiteral {
        what: &'static str,
        reason: String,
        span: Span,
    },
    #[error("unknown flow `@{name}` in this agent")]
    UnknownFlow { name: String, span: Span },
    #[error("too many errors; giving up")]
    TooManyErrors { span: Span },
}

impl ParseError {
    pub fn span(&self) -> Span {
        match self {
            ParseError::Expected { span, .. }
            | ParseError::UnknownOp { span, .. }
            | ParseError::UndefinedValue { span, .. }
            | ParseError::Redefinition { span, .. }
            | ParseError::ResultTypeCount { span, .. }
            | ParseError::UnknownType { span, .. }
            | ParseError::BadLiteral { span, .. }
            | ParseError::UnknownFlow { span, .. }
            | ParseError::TooManyErrors { span } => *span,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ParseError::Expected { .. } => "P0001",
            ParseError::UnknownOp { .. } => "P0002",
            ParseError::UndefinedValue { .. } => "P0003",
            ParseError::Redefinition { .. } => "P0004",
            ParseError::ResultTypeCount { .. } => "P0005",
            ParseError::UnknownType { .. } => "P0006",
            ParseError::BadLiteral { .. } => "P0007",
            ParseError::UnknownFlow { .. } => "P0008",
            ParseError::TooManyErrors { .. } => "P0009",
        }
    }

    fn help(&self) -> Option<&'static str> {
        match self {
            ParseError::UnknownOp { .. } => Some("the op list is in docs/ir.md"),
            ParseError::UndefinedValue { .. } => {
                Some("every value must be defined by an op result, a region argument or a flow parameter")
            }
            ParseError::Redefinition { .. } => Some("SSA values are defined exactly once per flow"),
            ParseError::ResultTypeCount { .. } => {
                Some("write one type per result after `:`, e.g. `%1, %2 = qmem %0 {tier = \"stm\"} : json, ord`")
            }
            ParseError::UnknownType { .. } => Some(
                "built-in types are str number bool json void null ord list<T>; user-named types are written `!Name`",
            ),
            _ => None,
        }
    }
}

impl IntoDiagnostic for ParseError {
    fn into_diagnostic(self) -> Diagnostic {
        let help = self.help();
        let mut d = Diagnostic::error(self.code(), self.to_string(), self.span());
        if let Some(h) = help {
            d = d.with_help(h);
        }
        d
    }
}

/// Parses a module. On error, returns every error found (the partially built
/// module is discarded).
pub fn parse_module(src: &str) -> Result<Module, Vec<ParseError>> {
    let (m, errors) = parse_module_recovering(src);
    if errors.is_empty() {
        Ok(m)
    } else {
        Err(errors)
    }
}

/// Parses as much as possible, returning the module and all errors.
pub fn parse_module_recovering(src: &str) -> (Module, Vec<ParseError>) {
    let mut p = Parser {
        src,
        toks: lex(src),
        pos: 0,
        errors: Vec::new(),
    };
    let m = p.module();
    (m, p.errors)
}

const MAX_ERRORS: usize = 100;

struct Parser<'s> {
    src: &'s str,
    toks: Vec<(Tok, Span)>,
    pos: usize,
    errors: Vec<ParseError>,
}

/// Marker: an error was recorded; the caller should recover.
struct Bail;

type PResult<T> = Result<T, Bail>;

/// Per-flow value names.
#[derive(Default)]
struct Scope {
    defined: HashMap<String, Value>,
    /// Referenced before defined: value and first use.
    pending: HashMap<String, (Value, Span)>,
}

impl<'s> Parser<'s> {
    // ------------------------------------------------------------ tokens

    fn peek(&self) -> Option<Tok> {
        self.peek_at(0)
    }

    fn peek_at(&self, k: usize) -> Option<Tok> {
        self.toks.get(self.pos + k).map(|t| t.0)
    }

    fn span(&self) -> Span {
        match self.toks.get(self.pos) {
            Some(t) => t.1,
            None => {
                let n = self.src.len();
                Span::new(n, n)
            }
        }
    }

    fn prev_end(&self) -> usize {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map_or(0, |t| t.1.end as usize)
    }

    fn text(&self, span: Span) -> &'s str {
        self.src.get(span.range()).unwrap_or("")
    }

    fn at(&self, t: Tok) -> bool {
        self.peek() == Some(t)
    }

    fn at_ident(&self, word: &str) -> bool {
        self.at(Tok::Ident) && self.text(self.span()) == word
    }

    /// Does the current token start a new line?
    fn at_line_start(&self) -> bool {
        let start = self.span().start as usize;
        let prev = self.prev_end();
        self.pos == 0
            || self
                .src
                .get(prev..start)
                .is_some_and(|gap| gap.contains('\n'))
    }

    fn bump(&mut self) -> Span {
        let s = self.span();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        s
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "end of input".to_string(),
            Some(Tok::Error) => format!("unexpected character `{}`", self.text(self.span())),
            Some(t) => format!("{} `{}`", t.describe(), self.text(self.span())),
        }
    }

    fn error(&mut self, e: ParseError) -> Bail {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(e);
        } else if self.errors.len() == MAX_ERRORS {
            let span = e.span();
            self.errors.push(ParseError::TooManyErrors { span });
        }
        Bail
    }

    fn expected(&mut self, what: &str) -> Bail {
        let e = ParseError::Expected {
            expected: what.to_string(),
            found: self.found(),
            span: self.span(),
        };
        self.error(e)
    }

    fn expect(&mut self, t: Tok) -> PResult<Span> {
        if self.at(t) {
            Ok(self.bump())
        } else {
            Err(self.expected(t.describe()))
        }
    }

    fn expect_word(&mut self, word: &str) -> PResult<Span> {
        if self.at_ident(word) {
            Ok(self.bump())
        } else {
            Err(self.expected(&format!("`{word}`")))
        }
    }

    /// `@name` without the sigil.
    fn symbol(&mut self) -> PResult<(String, Span)> {
        let s = self.expect(Tok::Symbol)?;
        Ok((self.text(s)[1..].to_string(), s))
    }

    fn ident(&mut self) -> PResult<(String, Span)> {
        let s = self.expect(Tok::Ident)?;
        Ok((self.text(s).to_string(), s))
    }

    fn string(&mut self) -> PResult<(String, Span)> {
        let s = self.expect(Tok::Str)?;
        match serde_json::from_str::<String>(self.text(s)) {
            Ok(v) => Ok((v, s)),
            Err(e) => Err(self.error(ParseError::BadLiteral {
                what: "string",
                reason: e.to_string(),
                span: s,
            })),
        }
    }

    fn number(&mut self) -> PResult<f64> {
        let s = self.expect(Tok::Number)?;
        self.text(s).parse::<f64>().map_err(|e| {
            self.error(ParseError::BadLiteral {
                what: "number",
                reason: e.to_string(),
                span: s,
            })
        })
    }

    /// Skips to the first token on a new line (or a `}` / end of input).
    fn recover_line(&mut self) {
        let start = self.pos;
        while self.peek().is_some() {
            if self.pos > start && (self.at_line_start() || self.at(Tok::RBrace)) {
                break;
            }
            self.bump();
        }
    }

    // ------------------------------------------------------------ module

    fn module(&mut self) -> Module {
        let mut m = Module::new();
        while self.peek().is_some() {
            if self.at_ident("agent") {
                if let Some(a) = self.agent() {
                    m.add_agent(a);
                }
            } else {
                self.expected("`agent`");
                self.bump();
                while self.peek().is_some() && !self.at_ident("agent") {
                    self.bump();
                }
            }
        }
        m
    }

    fn agent(&mut self) -> Option<AgentData> {
        let kw = self.bump();
        let (name, s) = self.symbol().ok()?;
        let mut a = AgentData::new(name);
        a.span = kw.to(s);
        if self.expect(Tok::LBrace).is_err() {
            self.recover_line();
        }
        // Flow references by name, resolved once all flows are known.
        let mut handler_refs = Vec::new();
        let mut belief_refs = Vec::new();
        loop {
            match self.peek() {
                None => {
                    self.expected("`}` closing the agent");
                    break;
                }
                Some(Tok::RBrace) => {
                    self.bump();
                    break;
                }
                _ => {}
            }
            let before = self.pos;
            if self
                .agent_item(&mut a, &mut handler_refs, &mut belief_refs)
                .is_err()
            {
                self.recover_line();
            }
            if self.pos == before {
                self.bump();
            }
        }
        for (event, flow, span) in handler_refs {
            match a.flow_by_name(&flow) {
                Some(f) => a.handlers.push(Handler {
                    event,
                    flow: f,
                    span,
                }),
                None => {
                    self.error(ParseError::UnknownFlow { name: flow, span });
                }
            }
        }
        for (i, flow, span) in belief_refs {
            match a.flow_by_name(&flow) {
                Some(f) => {
                    if let Some(b) = a.beliefs.get_mut(i) {
                        b.init = BeliefInit::Flow(f);
                    }
                }
                None => {
                    self.error(ParseError::UnknownFlow { name: flow, span });
                }
            }
        }
        Some(a)
    }

    fn agent_item(
        &mut self,
        a: &mut AgentData,
        handler_refs: &mut Vec<(String, String, Span)>,
        belief_refs: &mut Vec<(usize, String, Span)>,
    ) -> PResult<()> {
        let kw = self.span();
        if self.at_ident("memory") {
            self.bump();
            let (name, _) = self.symbol()?;
            self.expect(Tok::Colon)?;
            let (tier, ts) = self.ident()?;
            let Some(tier) = Tier::parse(&tier) else {
                return Err(self.error(ParseError::BadLiteral {
                    what: "memory tier",
                    reason: format!("`{tier}` is not one of stm, ltm, episodic"),
                    span: ts,
                }));
            };
            a.memory.push(MemoryDecl {
                name,
                tier,
                span: kw.to(ts),
            });
        } else if self.at_ident("belief") {
            self.bump();
            let (name, ns) = self.symbol()?;
            self.expect(Tok::Eq)?;
            let span = kw.to(ns);
            if self.at(Tok::Symbol) {
                let (flow, fs) = self.symbol()?;
                belief_refs.push((a.beliefs.len(), flow, fs));
                a.beliefs.push(BeliefDecl {
                    name,
                    init: BeliefInit::Const(serde_json::Value::Null),
                    span,
                });
            } else {
                self.expect_word("json")?;
                let v = self.json()?;
                a.beliefs.push(BeliefDecl {
                    name,
                    init: BeliefInit::Const(v),
                    span,
                });
            }
        } else if self.at_ident("goal") {
            self.bump();
            let (name, ns) = self.symbol()?;
            self.expect_word("priority")?;
            let ps = self.span();
            let p = self.number()?;
            if p.fract() != 0.0 || !p.is_finite() || p.abs() > 9.0e15 {
                return Err(self.error(ParseError::BadLiteral {
                    what: "priority",
                    reason: "expected an integer".into(),
                    span: ps,
                }));
            }
            let (description, _) = self.string()?;
            a.goals.push(GoalDecl {
                name,
                // Range-checked just above.
                priority: p as i64,
                description,
                span: kw.to(ns),
            });
        } else if self.at_ident("capability") {
            self.bump();
            let (name, ns) = if self.at(Tok::Str) {
                self.string()?
            } else {
                self.symbol()?
            };
            self.expect(Tok::LParen)?;
            let mut params = Vec::new();
            while !self.at(Tok::RParen) {
                let (p, _) = self.ident()?;
                self.expect(Tok::Colon)?;
                let t = self.ty()?;
                params.push((p, t));
                if !self.at(Tok::Comma) {
                    break;
                }
                self.bump();
            }
            self.expect(Tok::RParen)?;
            self.expect(Tok::Arrow)?;
            let result = self.ty()?;
            a.capabilities.push(Capability {
                name,
                params,
                result,
                span: kw.to(ns),
            });
        } else if self.at_ident("on") {
            self.bump();
            let (event, _) = self.string()?;
            let (flow, fs) = self.symbol()?;
            handler_refs.push((event, flow, kw.to(fs)));
        } else if self.at_ident("flow") {
            let f = self.flow()?;
            a.add_flow(f);
        } else {
            return Err(self.expected("`memory`, `belief`, `goal`, `capability`, `on` or `flow`"));
        }
        Ok(())
    }

    // ------------------------------------------------------------ types, literals

    fn ty(&mut self) -> PResult<Type> {
        let s = self.span();
        match self.peek() {
            Some(Tok::Opaque) => {
                self.bump();
                Ok(Type::Opaque(self.text(s)[1..].to_string()))
            }
            Some(Tok::Ident) if self.text(s) == "list" => {
                self.bump();
                self.expect(Tok::Lt)?;
                let inner = self.ty()?;
                self.expect(Tok::Gt)?;
                Ok(Type::list(inner))
            }
            Some(Tok::Ident) => {
                self.bump();
                let word = self.text(s);
                // `string`/`token` are source spellings; the IR text is canonical.
                match Type::from_keyword(word) {
                    Some(t) if word != "string" && word != "token" => Ok(t),
                    _ => Err(self.error(ParseError::UnknownType {
                        name: word.to_string(),
                        span: s,
                    })),
                }
            }
            _ => Err(self.expected("a type")),
        }
    }

    /// A JSON literal: its tokens are delimited here, serde_json parses the slice.
    fn json(&mut self) -> PResult<serde_json::Value> {
        let start = self.span();
        let mut depth = 0usize;
        let end = loop {
            let Some(t) = self.peek() else {
                return Err(self.expected("a JSON value"));
            };
            match t {
                Tok::LBrace | Tok::LBrack => depth += 1,
                Tok::RBrace | Tok::RBrack => {
                    if depth == 0 {
                        return Err(self.expected("a JSON value"));
                    }
                    depth -= 1;
                }
                _ => {}
            }
            let e = self.bump();
            if depth == 0 {
                break e;
            }
        };
        let span = start.to(end);
        serde_json::from_str(self.text(span)).map_err(|e| {
            self.error(ParseError::BadLiteral {
                what: "JSON literal",
                reason: e.to_string(),
                span,
            })
        })
    }

    fn attr_value(&mut self) -> PResult<Attr> {
        let s = self.span();
        match self.peek() {
            Some(Tok::Str) => Ok(Attr::Str(self.string()?.0)),
            Some(Tok::Number) => Ok(Attr::Number(self.number()?)),
            Some(Tok::Symbol) => {
                let (sym, s) = self.symbol()?;
                match sym.split_once('.') {
                    Some((agent, flow)) => Ok(Attr::Symbol {
                        agent: agent.to_string(),
                        flow: flow.to_string(),
                    }),
                    None => Err(self.error(ParseError::BadLiteral {
                        what: "symbol",
                        reason: "a callee is written `@Agent.flow`".into(),
                        span: s,
                    })),
                }
            }
            Some(Tok::Ident) => match self.text(s) {
                "true" => {
                    self.bump();
                    Ok(Attr::Bool(true))
                }
                "false" => {
                    self.bump();
                    Ok(Attr::Bool(false))
                }
                "json" => {
                    self.bump();
                    Ok(Attr::Json(self.json()?))
                }
                "type" => {
                    self.bump();
                    Ok(Attr::Type(self.ty()?))
                }
                _ => Err(self.expected("an attribute value")),
            },
            _ => Err(self.expected("an attribute value")),
        }
    }

    // ------------------------------------------------------------ flows and ops

    fn flow(&mut self) -> PResult<FlowData> {
        let kw = self.bump();
        let (name, ns) = self.symbol()?;
        let mut f = FlowData::new(name, Type::Void);
        f.span = kw.to(ns);
        let mut scope = Scope::default();
        self.expect(Tok::LParen)?;
        while !self.at(Tok::RParen) {
            let vs = self.expect(Tok::Value)?;
            let pname = self.text(vs).to_string();
            self.expect(Tok::Colon)?;
            let t = self.ty()?;
            let v = f.add_param(pname[1..].to_string(), t);
            if scope.defined.insert(pname.clone(), v).is_some() {
                self.error(ParseError::Redefinition {
                    name: pname,
                    span: vs,
                });
            }
            if !self.at(Tok::Comma) {
                break;
            }
            self.bump();
        }
        self.expect(Tok::RParen)?;
        self.expect(Tok::Arrow)?;
        f.result = self.ty()?;
        if self.at_ident("entry") {
            self.bump();
            f.entry = true;
        }
        if self.at_ident("discoverable") {
            self.bump();
            f.discoverable = true;
        }
        self.expect(Tok::LBrace)?;
        let body = f.body;
        self.ops_until_rbrace(&mut f, body, &mut scope);
        let mut pending: Vec<_> = scope.pending.into_iter().collect();
        pending.sort_by_key(|(_, (_, s))| s.start);
        for (name, (_, span)) in pending {
            self.error(ParseError::UndefinedValue { name, span });
        }
        Ok(f)
    }

    /// Parses ops into `region` up to and including the closing `}`.
    fn ops_until_rbrace(&mut self, f: &mut FlowData, region: Region, scope: &mut Scope) {
        loop {
            match self.peek() {
                None => {
                    self.expected("`}`");
                    return;
                }
                Some(Tok::RBrace) => {
                    self.bump();
                    return;
                }
                _ => {}
            }
            let before = self.pos;
            if self.op(f, region, scope).is_err() {
                self.recover_line();
            }
            if self.pos == before {
                self.bump();
            }
        }
    }

    fn use_value(&mut self, f: &mut FlowData, scope: &mut Scope) -> PResult<Value> {
        let s = self.expect(Tok::Value)?;
        let name = self.text(s);
        if let Some(&v) = scope.defined.get(name) {
            return Ok(v);
        }
        if let Some(&(v, _)) = scope.pending.get(name) {
            return Ok(v);
        }
        // Forward reference: a placeholder, completed when defined.
        let v = f.dfg.make_value(Type::Void, ValueDef::Param(u32::MAX));
        scope.pending.insert(name.to_string(), (v, s));
        Ok(v)
    }

    fn define_value(
        &mut self,
        f: &mut FlowData,
        scope: &mut Scope,
        name: &str,
        span: Span,
        ty: Type,
        def: ValueDef,
    ) -> Value {
        if scope.defined.contains_key(name) {
            self.error(ParseError::Redefinition {
                name: name.to_string(),
                span,
            });
            return f.dfg.make_value(ty, def);
        }
        let v = match scope.pending.remove(name) {
            Some((v, _)) => {
                f.dfg.values[v] = crate::ValueData { ty, def };
                v
            }
            None => f.dfg.make_value(ty, def),
        };
        scope.defined.insert(name.to_string(), v);
        v
    }

    fn op(&mut self, f: &mut FlowData, region: Region, scope: &mut Scope) -> PResult<Op> {
        let start = self.span();
        let mut results: Vec<(String, Span)> = Vec::new();
        if self.at(Tok::Value) {
            loop {
                let s = self.expect(Tok::Value)?;
                results.push((self.text(s).to_string(), s));
                if !self.at(Tok::Comma) {
                    break;
                }
                self.bump();
            }
            self.expect(Tok::Eq)?;
        }
        let ms = match self.expect(Tok::Ident) {
            Ok(s) => s,
            Err(b) => {
                if let Some(ParseError::Expected { expected, .. }) = self.errors.last_mut() {
                    *expected = "an op".into();
                }
                return Err(b);
            }
        };
        let mnemonic = self.text(ms);
        let Some(opcode) = Opcode::from_mnemonic(mnemonic) else {
            return Err(self.error(ParseError::UnknownOp {
                name: mnemonic.to_string(),
                span: ms,
            }));
        };
        // Operands start on the mnemonic's line (so `yield` then a new
        // statement is never misread).
        let mut operands: SmallVec<[Value; 4]> = SmallVec::new();
        if self.at(Tok::Value) && !self.at_line_start() {
            loop {
                operands.push(self.use_value(f, scope)?);
                if !self.at(Tok::Comma) {
                    break;
                }
                self.bump();
            }
        }
        let mut attrs = Attrs::default();
        if self.at(Tok::LBrace) && self.brace_is_attrs() {
            self.bump();
            while !self.at(Tok::RBrace) {
                let (name, _) = self.ident()?;
                let value = if self.at(Tok::Eq) {
                    self.bump();
                    self.attr_value()?
                } else {
                    Attr::Flag
                };
                attrs.0.push((name.into(), value));
                if !self.at(Tok::Comma) {
                    break;
                }
                self.bump();
            }
            self.expect(Tok::RBrace)?;
        }
        let mut types = Vec::new();
        if self.at(Tok::Colon) {
            self.bump();
            loop {
                types.push(self.ty()?);
                if !self.at(Tok::Comma) {
                    break;
                }
                self.bump();
            }
        }
        let header = start.to(Span::new(self.prev_end(), self.prev_end()));
        if types.len() != results.len() {
            self.error(ParseError::ResultTypeCount {
                results: results.len(),
                types: types.len(),
                span: header,
            });
            types.resize(results.len(), Type::Json);
        }
        let op = f.dfg.ops.push(OpData {
            opcode,
            operands,
            results: SmallVec::new(),
            regions: SmallVec::new(),
            attrs,
        });
        f.dfg.set_span(op, header);
        f.dfg.append_op(region, op);
        for (i, ((name, s), ty)) in results.iter().zip(types).enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let v = self.define_value(f, scope, name, *s, ty, ValueDef::Result(op, i));
            f.dfg.ops[op].results.push(v);
        }
        if self.at(Tok::LBrace) {
            self.bump();
            while !self.at(Tok::RBrace) {
                if self.peek().is_none() {
                    return Err(self.expected("`}`"));
                }
                self.region(f, op, scope)?;
            }
            self.bump();
        }
        Ok(op)
    }

    /// At `{`: an attribute dict (`{name = ..`, `{flag}`, `{flag, ..`, `{}`)
    /// rather than a region list (`{label {`, `{label "key"`, `{label(`).
    fn brace_is_attrs(&self) -> bool {
        matches!(
            (self.peek_at(1), self.peek_at(2)),
            (Some(Tok::RBrace), _) | (Some(Tok::Ident), Some(Tok::Eq | Tok::Comma | Tok::RBrace))
        )
    }

    fn region(&mut self, f: &mut FlowData, op: Op, scope: &mut Scope) -> PResult<()> {
        let (label, _) = self.ident()?;
        let key = if self.at(Tok::Str) {
            Some(self.string()?.0)
        } else {
            None
        };
        let r = f.dfg.create_region(label, key);
        f.dfg.attach_region(op, r);
        if self.at(Tok::LParen) {
            self.bump();
            while !self.at(Tok::RParen) {
                let s = self.expect(Tok::Value)?;
                let name = self.text(s).to_string();
                self.expect(Tok::Colon)?;
                let ty = self.ty()?;
                let i = u32::try_from(f.dfg.regions[r].args.len()).unwrap_or(u32::MAX);
                let v = self.define_value(f, scope, &name, s, ty, ValueDef::Arg(r, i));
                f.dfg.regions[r].args.push(v);
                if !self.at(Tok::Comma) {
                    break;
                }
                self.bump();
            }
            self.expect(Tok::RParen)?;
        }
        self.expect(Tok::LBrace)?;
        self.ops_until_rbrace(f, r, scope);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::printer::print_module;

    const SAMPLE: &str = r#"agent @Coordinator {
  memory @notes : stm
  belief @mood = json {"level":1}
  belief @seed = @init
  goal @answer priority 2 "Answer the user"
  capability @search(query: str, limit: number) -> json
  on "user.message" @main
  flow @init() -> json {
    %0 = const {value = json null} : null
    return %0
  }
  flow @main(%topic: str) -> str entry {
    %0 = template %topic {template = "Decompose: {0}"} : str
    %1 = ask %0 {model = "fast", temperature = 0.5, no_fuse} : str
    %2 = flow.call %1 {callee = @Researcher.research} : str
    %3, %4 = qmem %1 {tier = "ltm"} : json, ord
    %5 = switch %1 : str {
      case "short" {
        %6 = think %2 : str
        yield %6
      }
      default {
        yield %2
      }
    }
    return %5
  }
}

agent @Researcher {
  flow @research(%q: str) -> str {
    %0 = reason %q : str
    return %0
  }
}
"#;

    #[test]
    fn sample_round_trips_exactly() {
        let m = match parse_module(SAMPLE) {
            Ok(m) => m,
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(print_module(&m), SAMPLE);
    }

    #[test]
    fn forward_reference_parses_and_undefined_is_reported() {
        let src = "agent @A {\n  flow @f() -> str {\n    %0 = ask %1 : str\n    %1 = ask %0 : str\n    return %9\n  }\n}\n";
        let errs = parse_module(src).err().unwrap_or_default();
        assert_eq!(errs.len(), 1);
        assert!(matches!(&errs[0], ParseError::UndefinedValue { name, .. } if name == "%9"));
    }

    #[test]
    fn collects_several_errors() {
        let src = "agent @A {\n  flow @f() -> str {\n    %0 = frobnicate : str\n    %1 = ask : wat\n    return %1\n  }\n}\n";
        let errs = parse_module(src).err().unwrap_or_default();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].code(), "P0002");
        assert_eq!(errs[1].code(), "P0006");
    }
}
