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

use ais_ir::Span;
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
    /// The imported files this document last published diagnostics to.
    imported: Vec<Url>,
}

/// Reads imported files: the editor's text when the file is open there,
/// else the disk's.
struct Overlay<'a> {
    docs: &'a HashMap<Url, Document>,
}

impl ais_compiler::program::Loader for Overlay<'_> {
    fn read(&self, path: &std::path::Path) -> std::io::Result<String> {
        let open = Url::from_file_path(path)
            .ok()
            .and_then(|u| self.docs.get(&u))
            .map(|d| d.text.clone());
        match open {
            Some(text) => Ok(text),
            None => std::fs::read_to_string(path),
        }
    }
}

/// A span in an imported file as an LSP location (files of the bundled
/// library have no URI: `None`).
fn locate_imported(a: &Analysis, span: Span) -> Option<Location> {
    let i = a
        .sources
        .files()
        .partition_point(|f| f.base <= span.start)
        .checked_sub(1)?;
    let file = a.sources.files().get(i)?;
    let uri = Url::from_file_path(a.paths.get(i)?.as_ref()?).ok()?;
    let local = file.local(span);
    let range = LineIndex::new(&file.text).range(Span::new(local.start, local.end));
    Some(Location::new(uri, range))
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
                    for note in self.notification(n) {
                        send(conn, Message::Notification(note))?;
                    }
                }
                Message::Response(_) => {}
            }
        }
        Ok(())
    }

    /// Handles a document notification; returns the diagnostics to publish:
    /// the document's, and those located in the files it imports (each to
    /// its own URI; a file whose problems are gone gets an empty list).
    fn notification(&mut self, n: Notification) -> Vec<Notification> {
        let publish = |uri: Url, diags: Vec<lsp_types::Diagnostic>| {
            let params = PublishDiagnosticsParams::new(uri, diags, None);
            Notification::new(PublishDiagnostics::METHOD.into(), params)
        };
        let (uri, before) = match n.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<DidOpenTextDocumentParams>(n.params) else {
                    return Vec::new();
                };
                let before = self.set(p.text_document.uri.clone(), p.text_document.text);
                (p.text_document.uri, before)
            }
            DidChangeTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<DidChangeTextDocumentParams>(n.params) else {
                    return Vec::new();
                };
                // Full sync: the last change holds the whole text.
                let Some(change) = p.content_changes.into_iter().last() else {
                    return Vec::new();
                };
                let before = self.set(p.text_document.uri.clone(), change.text);
                (p.text_document.uri, before)
            }
            DidCloseTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<DidCloseTextDocumentParams>(n.params) else {
                    return Vec::new();
                };
                let mut out = vec![publish(p.text_document.uri.clone(), Vec::new())];
                if let Some(doc) = self.docs.remove(&p.text_document.uri) {
                    out.extend(doc.imported.into_iter().map(|u| publish(u, Vec::new())));
                }
                return out;
            }
            _ => return Vec::new(),
        };
        let Some(doc) = self.docs.get(&uri) else {
            return Vec::new();
        };
        let mut per_uri = diagnostics(&uri, doc);
        let own = per_uri.remove(&uri).unwrap_or_default();
        let mut out = vec![publish(uri.clone(), own)];
        for gone in before.iter().filter(|u| !per_uri.contains_key(*u)) {
            out.push(publish(gone.clone(), Vec::new()));
        }
        let mut imported: Vec<Url> = per_uri.keys().cloned().collect();
        imported.sort();
        for u in &imported {
            out.push(publish(u.clone(), per_uri.remove(u).unwrap_or_default()));
        }
        if let Some(doc) = self.docs.get_mut(&uri) {
            doc.imported = imported;
        }
        out
    }

    /// Analyses the document (its imports read from the editor when open
    /// there, else from disk); returns the imported files it had published
    /// diagnostics to before.
    fn set(&mut self, uri: Url, text: String) -> Vec<Url> {
        let path = uri.to_file_path().ok();
        let analysis = Analysis::in_file(path.as_deref(), &text, &Overlay { docs: &self.docs });
        self.docs
            .insert(
                uri,
                Document {
                    text,
                    analysis,
                    imported: Vec::new(),
                },
            )
            .map(|d| d.imported)
            .unwrap_or_default()
    }

    /// Where a (global) span of the document's program is: the document
    /// itself, or an imported file on disk (`None` for the bundled library).
    fn locate(&self, uri: &Url, doc: &Document, span: Span) -> Option<Location> {
        if doc.analysis.is_own(span) {
            return Some(Location::new(
                uri.clone(),
                LineIndex::new(&doc.text).range(span),
            ));
        }
        locate_imported(&doc.analysis, span)
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
        Ok(doc
            .analysis
            .definition(sym)
            .and_then(|span| self.locate(uri, doc, span))
            .map(GotoDefinitionResponse::Scalar))
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
                .filter_map(|s| self.locate(uri, doc, s))
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
        // Each span in the file it is in: the document or an imported file.
        let mut edits: HashMap<Url, Vec<TextEdit>> = HashMap::new();
        for s in spans {
            let Some(at) = self.locate(uri, doc, s) else {
                return Err((
                    ErrorCode::InvalidRequest,
                    "an occurrence is in a file that cannot be edited".into(),
                ));
            };
            edits
                .entry(at.uri)
                .or_default()
                .push(TextEdit::new(at.range, new_name.to_string()));
        }
        Ok(Some(WorkspaceEdit::new(edits)))
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
                    diagnostics: Some(vec![to_lsp(
                        idx.range(d.primary.span),
                        &|l| self.locate(uri, doc, l),
                        d,
                    )]),
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
        // The document's own agents (imported ones are in their files).
        let own = doc
            .analysis
            .file
            .agents
            .iter()
            .filter(|a| doc.analysis.is_own(a.span));
        for agent in own {
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

/// The program's diagnostics in LSP form, by the URI of the file each is
/// located in (the document's own under `uri`): code, severity, the
/// primary label and help folded into the message, secondary labels as
/// related information (in whichever file they are).
fn diagnostics(uri: &Url, doc: &Document) -> HashMap<Url, Vec<lsp_types::Diagnostic>> {
    let idx = LineIndex::new(&doc.text);
    let a = &doc.analysis;
    let place = |span: Span| -> Option<Location> {
        if a.is_own(span) {
            Some(Location::new(uri.clone(), idx.range(span)))
        } else {
            locate_imported(a, span)
        }
    };
    let mut out: HashMap<Url, Vec<lsp_types::Diagnostic>> = HashMap::new();
    out.insert(uri.clone(), Vec::new());
    for d in &a.diagnostics {
        // Problems of the bundled library have nowhere to go; the document
        // shows them at the top rather than losing them.
        let at = place(d.primary.span)
            .unwrap_or_else(|| Location::new(uri.clone(), idx.range(Span::DUMMY)));
        let lsp = to_lsp(at.range, &place, d);
        out.entry(at.uri).or_default().push(lsp);
    }
    out
}

fn to_lsp(
    range: Range,
    place: &dyn Fn(Span) -> Option<Location>,
    d: &ais_ir::Diagnostic,
) -> lsp_types::Diagnostic {
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
        .filter_map(|l| {
            Some(DiagnosticRelatedInformation {
                location: place(l.span)?,
                message: l.message.clone().unwrap_or_else(|| "related".into()),
            })
        })
        .collect();
    lsp_types::Diagnostic {
        range,
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
