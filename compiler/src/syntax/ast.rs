//! The abstract syntax tree. Every node carries the byte span of its source.
//!
//! The tree is a faithful record of what was written (aliases are kept as
//! written; `x |> f(a)` is already desugared to `f(x, a)` by the parser).
//! Meaning is assigned by `sema`.

use super::lexer::StrLit;
use ais_ir::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct File {
    /// `import "path"` lines, in order (they come before the agents).
    pub imports: Vec<Import>,
    pub agents: Vec<Agent>,
    pub span: Span,
}

/// `import "relative/path.ais"` or `import "std/NAME"`: the named file's
/// agents join the program (see docs/language.md, "Multi-file programs").
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    /// The path as written (escapes resolved).
    pub path: String,
    /// The string literal, quotes included (errors about the file point here).
    pub path_span: Span,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Agent {
    pub name: Ident,
    pub members: Vec<Member>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Member {
    Memory(Vec<MemoryDecl>, Span),
    Beliefs(Vec<Belief>, Span),
    Goals(Vec<Goal>, Span),
    Capability(Capability),
    Flow(Flow),
    Handler(Handler),
    /// `tools: [a, b]`: the capabilities the agent's LLM operations offer
    /// their model when they name none themselves.
    Tools(Vec<Ident>, Span),
    /// `discoverable: [a, b]`: the flows and capabilities other agents may
    /// call (all of them when an agent lists none).
    Discoverable(Vec<Ident>, Span),
    /// `context: "..."`: the agent's standing system prompt, sent with each
    /// of its LLM operations that sets no `system:` of its own.
    Context(StrLit, Span),
    /// A member that failed to parse (already reported).
    Error(Span),
}

#[derive(Clone, Debug, PartialEq)]
pub struct MemoryDecl {
    pub name: Ident,
    /// As written: `STM`, `LTM`, `Episodic` (any case).
    pub tier: Ident,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Belief {
    pub name: Ident,
    /// `from` was written before the initializer.
    pub from: bool,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Goal {
    pub name: Ident,
    pub description: Option<StrLit>,
    pub priority: Option<(f64, Span)>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Capability {
    /// `@read_only` marks a tool without side effects (see `lower::effects`).
    pub decorators: Vec<Decorator>,
    pub name: Ident,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    /// Omitted types default per context (`token` for handler fields, `json` elsewhere).
    pub ty: Option<TypeExpr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    Named(Ident),
    /// `list<T>`
    List(Box<TypeExpr>, Span),
}

impl TypeExpr {
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named(i) => i.span,
            TypeExpr::List(_, s) => *s,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Decorator {
    pub name: Ident,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Flow {
    pub decorators: Vec<Decorator>,
    pub name: Ident,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    pub body: Block,
    pub span: Span,
}

impl Flow {
    pub fn is_entry(&self) -> bool {
        self.decorators.iter().any(|d| d.name.name == "entry")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Handler {
    /// `on user.message` → ["user", "message"].
    pub event: Vec<Ident>,
    pub fields: Vec<Param>,
    pub guard: Option<Expr>,
    pub body: Block,
    pub span: Span,
}

impl Handler {
    pub fn event_name(&self) -> String {
        self.event
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(".")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    Let {
        name: Ident,
        ty: Option<TypeExpr>,
        value: Expr,
    },
    /// `expr -> name`
    Bind {
        value: Expr,
        name: Ident,
    },
    Return(Option<Expr>),
    If {
        cond: Expr,
        then: Block,
        /// `else { }` or `else if` (as a block holding one `If`).
        otherwise: Option<Block>,
    },
    Parallel(Block),
    Loop {
        var: Ident,
        iter: Expr,
        body: Block,
    },
    Try {
        body: Block,
        /// `catch (e)` binds the structured error.
        err: Option<Ident>,
        handler: Block,
    },
    Expr(Expr),
    /// A statement that failed to parse (already reported), with what it was
    /// binding as far as that could be recovered.
    Error(Broken),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl Expr {
    /// A binary chain's operands left to right: `a + b - c` gives `a`, then
    /// `(+, b, a + b)` and `(-, c, a + b - c)` (each step's operator, right
    /// operand and node). A chain nests to the left as deep as it is long,
    /// so walkers go along it with this loop rather than recursing into
    /// the left operand; a non-binary expression gives itself and no steps.
    /// Short chains need no allocation (every phase calls this on every
    /// binary expression).
    pub fn binary_chain(&self) -> (&Expr, BinaryChain<'_>) {
        let mut steps = BinaryChain::new();
        let mut e = self;
        while let ExprKind::Binary(op, a, b) = &e.kind {
            steps.push((*op, &**b, e));
            e = a;
        }
        steps.reverse();
        (e, steps)
    }

    fn has_children(&self) -> bool {
        !matches!(
            self.kind,
            ExprKind::Str(_)
                | ExprKind::Number(_)
                | ExprKind::Bool(_)
                | ExprKind::Null
                | ExprKind::Var(_)
                | ExprKind::Error
        )
    }

    /// Moves the subexpressions that have subexpressions of their own onto
    /// `out` (leaves stay: dropping them does not recurse).
    fn take_children(&mut self, out: &mut Vec<Expr>) {
        let mut take = |e: &mut Expr| {
            if e.has_children() {
                out.push(std::mem::replace(
                    e,
                    Expr {
                        kind: ExprKind::Error,
                        span: e.span,
                    },
                ));
            }
        };
        match &mut self.kind {
            ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) | ExprKind::Assign(a, b) => {
                take(a);
                take(b);
            }
            ExprKind::Member(a, _) | ExprKind::Unary(_, a) | ExprKind::Named(_, a) => take(a),
            ExprKind::Call { callee, args } => {
                take(callee);
                args.iter_mut().for_each(take);
            }
            ExprKind::List(items) => items.iter_mut().for_each(take),
            ExprKind::Switch(s) => take(&mut s.scrutinee),
            _ => {}
        }
    }
}

impl Drop for Expr {
    /// Iterative: the derived drop recurses once per level, and a generated
    /// `+` chain of a million terms is a million levels deep.
    fn drop(&mut self) {
        if !self.has_children() {
            return;
        }
        let mut todo = Vec::new();
        self.take_children(&mut todo);
        while let Some(mut e) = todo.pop() {
            e.take_children(&mut todo);
        }
    }
}

/// The steps of [`Expr::binary_chain`].
pub type BinaryChain<'a> = smallvec::SmallVec<[(BinaryOp, &'a Expr, &'a Expr); 4]>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&&",
            BinaryOp::Or => "||",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Str(StrLit),
    Number(f64),
    Bool(bool),
    Null,
    List(Vec<Expr>),
    Var(Ident),
    Index(Box<Expr>, Box<Expr>),
    Member(Box<Expr>, Ident),
    Call {
        callee: Box<Expr>,
        args: Vec<Expr>,
    },
    /// `name: value`, only as an argument of a call (after the positional
    /// ones): the named arguments of LLM operations (`tools:`, `model:`, ...).
    Named(Ident, Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    Assign(Box<Expr>, Box<Expr>),
    Switch(Box<Switch>),
    /// An expression that failed to parse (already reported).
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Switch {
    pub scrutinee: Expr,
    /// In source order; `default` arms have no pattern.
    pub cases: Vec<Case>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// `None` for `default`.
    pub pattern: Option<Expr>,
    pub body: CaseBody,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CaseBody {
    Expr(Expr),
    Block(Block),
}

impl CaseBody {
    pub fn span(&self) -> Span {
        match self {
            CaseBody::Expr(e) => e.span,
            CaseBody::Block(b) => b.span,
        }
    }
}

/// What a statement that failed to parse was binding, so that the checker
/// neither reports its name as undefined later nor, when the statement
/// clearly binds nothing, stays silent about the rest of the flow.
#[derive(Clone, Debug, PartialEq)]
pub enum Broken {
    /// `let x ...` or `... -> x`.
    Binds(Ident),
    /// Neither `let` nor `->` anywhere in it.
    Nothing,
    /// Cannot tell.
    Unknown,
}
