//! The AIS language server: `aisc lsp` speaks the Language Server Protocol
//! over stdin/stdout (the `lsp-server` crate: synchronous, one thread for
//! the requests, no async runtime).
//!
//! Every open document is analysed on open and on each change (full text
//! sync): the front end's diagnostics (every phase, the codes of `aisc
//! check`) are published, and an [`analysis::Analysis`] answers hover, go to
//! definition, find references, completion, document symbols, rename,
//! signature help and quick fixes. Formatting goes through the formatter
//! (`ais_compiler::format`).

pub mod actions;
pub mod analysis;
pub mod calls;
pub mod completion;
pub mod position;
pub mod rename;
pub mod signature;

use analysis::{flow_signature, Analysis};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Notification as _,
    PublishDiagnostics,
};
use lsp_types::request::{
    CodeActionRequest, Completion, DocumentSymbolRequest, Formatting, GotoDefinition, HoverRequest,
    PrepareRenameRequest, References, Rename, Request as _, SignatureHelpRequest,
};
use lsp_types::*;
use position::LineIndex;
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum LspError {
    #[error("protocol: {0}")]
    Protocol(#[from] lsp_server::ProtocolError),
    #[error("cannot send to the client: {0}")]
    Send(String),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// What the server offers, sent in the `initialize` reply.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".into()]),
            ..CompletionOptions::default()
        }),
        document_symbol_provider: Some(OneOf::Left(true)),
        document_formatting_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: WorkDoneProgressOptions::default(),
        })),
        signature_help_provider: Some(SignatureHelpOptions {
            trigger_characters: Some(vec!["(".into(), ",".into()]),
            retrigger_characters: Some(vec![":".into()]),
            work_done_progress_options: WorkDoneProgressOptions::default(),
        }),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..CodeActionOptions::default()
        })),
        ..ServerCapabilities::default()
    }
}

/// Serves one client on stdin/stdout until it sends `exit`.
pub fn run_stdio() -> Result<(), LspError> {
    let (connection, io_threads) = Connection::stdio();
    let caps = serde_json::to_value(capabilities())?;
    let (id, _params) = connection.initialize_start()?;
    connection.initialize_finish(
        id,
        serde_json::json!({
            "capabilities": caps,
            "serverInfo": {"name": "aisc lsp", "version": env!("CARGO_PKG_VERSION")},
        }),
    )?;
    Server::default().main_loop(&connection)?;
    drop(connection);
    io_threads.join()?;
    Ok(())
}

struct Document {
    text: String,
    analysis: Analysis,
}

#[derive(Default)]
struct Server {
    docs: HashMap<Url, Document>,
}

fn send(conn: &Connection, msg: Message) -> Result<(), LspError> {
    conn.sender
        .send(msg)
        .map_err(|e| LspError::Send(e.to_string()))
}

impl Server {
    fn main_loop(&mut self, conn: &Connection) -> Result<(), LspError> {
        for msg in &conn.receiver {
            match msg {
                Message::Request(req) => {
                    if conn.handle_shutdown(&req)? {
                        return Ok(());
                    }
                    let id = req.id.clone();
                    // A bug answering one request must not end the session.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.request(req)
                    }));
                    let response = match result {
                        Ok(r) => r,
                        Err(_) => Response::new_err(
                            id,
                            ErrorCode::InternalError as i32,
                            "internal error while answering the request".into(),
                        ),
                    };
                    send(conn, Message::Response(response))?;
                }
                Message::Notification(n) => {
                    if let Some(note) = self.notification(n) {
                        send(conn, Message::Notification(note))?;
                    }
                }
                Message::Response(_) => {}
            }
        }
        Ok(())
    }

    /// Handles a document notification; returns the diagnostics to publish.
    fn notification(&mut self, n: Notification) -> Option<Notification> {
        let uri = match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let p: DidOpenTextDocumentParams = serde_json::from_value(n.params).ok()?;
                self.set(p.text_document.uri.clone(), p.text_document.text);
                p.text_document.uri
            }
            DidChangeTextDocument::METHOD => {
                let p: DidChangeTextDocumentParams = serde_json::from_value(n.params).ok()?;
                // Full sync: the last change holds the whole text.
                let text = p.content_changes.into_iter().last()?.text;
                self.set(p.text_document.uri.clone(), text);
                p.text_document.uri
            }
            DidCloseTextDocument::METHOD => {
                let p: DidCloseTextDocumentParams = serde_json::from_value(n.params).ok()?;
                self.docs.remove(&p.text_document.uri);
                let params = PublishDiagnosticsParams::new(p.text_document.uri, Vec::new(), None);
                return Some(Notification::new(PublishDiagnostics::METHOD.into(), params));
            }
            _ => return None,
        };
        let doc = self.docs.get(&uri)?;
        let params = PublishDiagnosticsParams::new(uri.clone(), diagnostics(&uri, doc), None);
        Some(Notification::new(PublishDiagnostics::METHOD.into(), params))
    }

    fn set(&mut self, uri: Url, text: String) {
        let analysis = Analysis::new(&text);
        self.docs.insert(uri, Document { text, analysis });
    }

    fn request(&mut self, req: Request) -> Response {
        let id = req.id.clone();
        let result = match req.method.as_str() {
            HoverRequest::METHOD => self.with::<HoverParams, _>(req, |s, p| {
                let tp = p.text_document_position_params;
                s.hover(&tp.text_document.uri, tp.position)
            }),
            GotoDefinition::METHOD => self.with::<GotoDefinitionParams, _>(req, |s, p| {
                let tp = p.text_document_position_params;
                s.definition(&tp.text_document.uri, tp.position)
            }),
            References::METHOD => self.with::<ReferenceParams, _>(req, |s, p| {
                let tp = p.text_document_position;
                s.references(
                    &tp.text_document.uri,
                    tp.position,
                    p.context.include_declaration,
                )
            }),
            Completion::METHOD => self.with::<CompletionParams, _>(req, |s, p| {
                let tp = p.text_document_position;
                s.completion(&tp.text_document.uri, tp.position)
            }),
            DocumentSymbolRequest::METHOD => {
                self.with::<DocumentSymbolParams, _>(req, |s, p| s.symbols(&p.text_document.uri))
            }
            Formatting::METHOD => {
                self.with::<DocumentFormattingParams, _>(req, |s, p| s.format(&p.text_document.uri))
            }
            PrepareRenameRequest::METHOD => self
                .with::<TextDocumentPositionParams, _>(req, |s, p| {
                    s.prepare_rename(&p.text_document.uri, p.position)
                }),
            Rename::METHOD => self.with::<RenameParams, _>(req, |s, p| {
                let tp = p.text_document_position;
                s.rename(&tp.text_document.uri, tp.position, &p.new_name)
            }),
            SignatureHelpRequest::METHOD => self.with::<SignatureHelpParams, _>(req, |s, p| {
                let tp = p.text_document_position_params;
                s.signature_help(&tp.text_document.uri, tp.position)
            }),
            CodeActionRequest::METHOD => self.with::<CodeActionParams, _>(req, |s, p| {
                s.code_actions(&p.text_document.uri, p.range)
            }),
            _ => Err((
                ErrorCode::MethodNotFound,
                format!("unsupported request `{}`", req.method),
            )),
        };
        respond(id, result)
    }

    fn with<P: serde::de::DeserializeOwned, T: serde::Serialize>(
        &mut self,
        req: Request,
        f: impl FnOnce(&mut Self, P) -> Result<T, (ErrorCode, String)>,
    ) -> Result<serde_json::Value, (ErrorCode, String)> {
        let params: P = serde_json::from_value(req.params)
            .map_err(|e| (ErrorCode::InvalidParams, e.to_string()))?;
        let value = f(self, params)?;
        serde_json::to_value(value).map_err(|e| (ErrorCode::InternalError, e.to_string()))
    }

    fn doc(&self, uri: &Url) -> Result<&Document, (ErrorCode, String)> {
        self.docs
            .get(uri)
            .ok_or_else(|| (ErrorCode::InvalidParams, format!("`{uri}` is not open")))
    }

    fn hover(&self, uri: &Url, pos: Position) -> Result<Option<Hover>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        let Some((span, sym)) = doc.analysis.symbol_at(idx.offset(pos)) else {
            return Ok(None);
        };
        Ok(doc.analysis.hover(sym).map(|value| Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value,
            }),
            range: Some(idx.range(span)),
        }))
    }

    fn definition(
        &self,
        uri: &Url,
        pos: Position,
    ) -> Result<Option<GotoDefinitionResponse>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        let Some((_, sym)) = doc.analysis.symbol_at(idx.offset(pos)) else {
            return Ok(None);
        };
        Ok(doc.analysis.definition(sym).map(|span| {
            GotoDefinitionResponse::Scalar(Location::new(uri.clone(), idx.range(span)))
        }))
    }

    fn references(
        &self,
        uri: &Url,
        pos: Position,
        include_declaration: bool,
    ) -> Result<Option<Vec<Location>>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        let Some((_, sym)) = doc.analysis.symbol_at(idx.offset(pos)) else {
            return Ok(None);
        };
        let def = doc.analysis.definition(sym);
        Ok(Some(
            doc.analysis
                .references(sym)
                .into_iter()
                .filter(|s| include_declaration || Some(*s) != def)
                .map(|s| Location::new(uri.clone(), idx.range(s)))
                .collect(),
        ))
    }

    fn completion(
        &self,
        uri: &Url,
        pos: Position,
    ) -> Result<Option<CompletionResponse>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let offset = LineIndex::new(&doc.text).offset(pos);
        let items = completion::items(&doc.analysis, &doc.text, offset);
        Ok(Some(CompletionResponse::Array(items)))
    }

    fn prepare_rename(
        &self,
        uri: &Url,
        pos: Position,
    ) -> Result<Option<PrepareRenameResponse>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        match rename::prepare(&doc.analysis, &doc.text, idx.offset(pos)) {
            Ok((span, placeholder)) => Ok(Some(PrepareRenameResponse::RangeWithPlaceholder {
                range: idx.range(span),
                placeholder,
            })),
            Err(rename::RenameError::Nothing) => Ok(None),
            Err(e) => Err((ErrorCode::InvalidRequest, e.to_string())),
        }
    }

    fn rename(
        &self,
        uri: &Url,
        pos: Position,
        new_name: &str,
    ) -> Result<Option<WorkspaceEdit>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        let spans = rename::rename(&doc.analysis, &doc.text, idx.offset(pos), new_name)
            .map_err(|e| (ErrorCode::InvalidRequest, e.to_string()))?;
        let edits = spans
            .into_iter()
            .map(|s| TextEdit::new(idx.range(s), new_name.to_string()))
            .collect();
        Ok(Some(WorkspaceEdit::new(HashMap::from([(
            uri.clone(),
            edits,
        )]))))
    }

    fn signature_help(
        &self,
        uri: &Url,
        pos: Position,
    ) -> Result<Option<SignatureHelp>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let offset = LineIndex::new(&doc.text).offset(pos);
        Ok(calls::call_at(&doc.text, offset)
            .and_then(|site| signature::signature_help(&doc.analysis, &site, offset)))
    }

    fn code_actions(
        &self,
        uri: &Url,
        range: Range,
    ) -> Result<Option<CodeActionResponse>, (ErrorCode, String)> {
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        let span = ais_ir::Span::new(idx.offset(range.start), idx.offset(range.end));
        let actions = actions::fixes(&doc.analysis.diagnostics, &doc.text, span)
            .into_iter()
            .map(|(d, at, replacement)| {
                let written = doc.text.get(at.range()).unwrap_or("");
                CodeActionOrCommand::CodeAction(CodeAction {
                    title: format!("Change `{written}` to `{replacement}`"),
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: Some(vec![to_lsp(uri, &idx, d)]),
                    edit: Some(WorkspaceEdit::new(HashMap::from([(
                        uri.clone(),
                        vec![TextEdit::new(idx.range(at), replacement.to_string())],
                    )]))),
                    is_preferred: Some(true),
                    ..CodeAction::default()
                })
            })
            .collect();
        Ok(Some(actions))
    }

    #[allow(deprecated)] // `DocumentSymbol::deprecated` must still be written
    fn symbols(&self, uri: &Url) -> Result<Option<DocumentSymbolResponse>, (ErrorCode, String)> {
        use ais_compiler::syntax::ast::Member;
        let doc = self.doc(uri)?;
        let idx = LineIndex::new(&doc.text);
        let sym = |name: String,
                   detail: Option<String>,
                   kind: SymbolKind,
                   span: ais_ir::Span,
                   sel: ais_ir::Span,
                   children: Option<Vec<DocumentSymbol>>| DocumentSymbol {
            name,
            detail,
            kind,
            tags: None,
            deprecated: None,
            range: idx.range(span),
            selection_range: idx.range(sel),
            children,
        };
        let mut out = Vec::new();
        for agent in &doc.analysis.file.agents {
            let a = &agent.name.name;
            let info = doc.analysis.index.agents.get(a);
            let mut children = Vec::new();
            for m in &agent.members {
                match m {
                    Member::Flow(f) => {
                        let detail = info
                            .and_then(|i| i.flows.get(&f.name.name))
                            .map(|s| flow_signature(a, s));
                        children.push(sym(
                            f.name.name.clone(),
                            detail,
                            SymbolKind::FUNCTION,
                            f.span,
                            f.name.span,
                            None,
                        ));
                    }
                    Member::Capability(c) => children.push(sym(
                        c.name.name.clone(),
                        Some("capability".into()),
                        SymbolKind::METHOD,
                        c.span,
                        c.name.span,
                        None,
                    )),
                    Member::Handler(h) => {
                        let first = h.event.first().map_or(h.span, |i| i.span);
                        children.push(sym(
                            format!("on {}", h.event_name()),
                            Some("handler".into()),
                            SymbolKind::EVENT,
                            h.span,
                            first,
                            None,
                        ))
                    }
                    Member::Memory(ds, span) => {
                        for d in ds {
                            children.push(sym(
                                d.name.name.clone(),
                                Some(format!("memory {}", d.tier.name)),
                                SymbolKind::FIELD,
                                d.span,
                                d.name.span,
                                None,
                            ));
                        }
                        let _ = span;
                    }
                    Member::Beliefs(bs, _) => {
                        for b in bs {
                            children.push(sym(
                                b.name.name.clone(),
                                Some("belief".into()),
                                SymbolKind::PROPERTY,
                                b.span,
                                b.name.span,
                                None,
                            ));
                        }
                    }
                    Member::Goals(gs, _) => {
                        for g in gs {
                            children.push(sym(
                                g.name.name.clone(),
                                Some("goal".into()),
                                SymbolKind::CONSTANT,
                                g.span,
                                g.name.span,
                                None,
                            ));
                        }
                    }
                    Member::Tools(..)
                    | Member::Discoverable(..)
                    | Member::Context(..)
                    | Member::Error(_) => {}
                }
            }
            out.push(sym(
                a.clone(),
                Some("agent".into()),
                SymbolKind::CLASS,
                agent.span,
                agent.name.span,
                Some(children),
            ));
        }
        Ok(Some(DocumentSymbolResponse::Nested(out)))
    }

    fn format(&self, uri: &Url) -> Result<Option<Vec<TextEdit>>, (ErrorCode, String)> {
        use ais_compiler::format::{format_source, FormatError};
        let doc = self.doc(uri)?;
        match format_source(&doc.text) {
            Ok(text) if text == doc.text => Ok(Some(Vec::new())),
            Ok(text) => Ok(Some(vec![TextEdit::new(
                LineIndex::new(&doc.text).full_range(),
                text,
            )])),
            // The diagnostics already say what is wrong; nothing to change.
            Err(FormatError::Syntax(_)) => Ok(None),
            Err(e) => Err((ErrorCode::InternalError, e.to_string())),
        }
    }
}

fn respond(id: RequestId, result: Result<serde_json::Value, (ErrorCode, String)>) -> Response {
    match result {
        Ok(v) => Response::new_ok(id, v),
        Err((code, message)) => Response::new_err(id, code as i32, message),
    }
}

/// The document's diagnostics in LSP form: code, severity, the primary
/// label and help folded into the message, secondary labels as related
/// information.
fn diagnostics(uri: &Url, doc: &Document) -> Vec<lsp_types::Diagnostic> {
    let idx = LineIndex::new(&doc.text);
    doc.analysis
        .diagnostics
        .iter()
        .map(|d| to_lsp(uri, &idx, d))
        .collect()
}

fn to_lsp(uri: &Url, idx: &LineIndex<'_>, d: &ais_ir::Diagnostic) -> lsp_types::Diagnostic {
    let mut message = d.message.clone();
    if let Some(l) = &d.primary.message {
        message.push_str(&format!(" ({l})"));
    }
    for n in &d.notes {
        message.push_str(&format!("\nnote: {n}"));
    }
    if let Some(h) = &d.help {
        message.push_str(&format!("\nhelp: {h}"));
    }
    let related: Vec<DiagnosticRelatedInformation> = d
        .secondary
        .iter()
        .map(|l| DiagnosticRelatedInformation {
            location: Location::new(uri.clone(), idx.range(l.span)),
            message: l.message.clone().unwrap_or_else(|| "related".into()),
        })
        .collect();
    lsp_types::Diagnostic {
        range: idx.range(d.primary.span),
        severity: Some(match d.severity {
            ais_ir::Severity::Error => DiagnosticSeverity::ERROR,
            ais_ir::Severity::Warning => DiagnosticSeverity::WARNING,
            ais_ir::Severity::Note => DiagnosticSeverity::INFORMATION,
        }),
        code: Some(NumberOrString::String(d.code.to_string())),
        source: Some("aisc".into()),
        message,
        related_information: (!related.is_empty()).then_some(related),
        ..lsp_types::Diagnostic::default()
    }
}
