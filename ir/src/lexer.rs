//! Tokens of the textual IR (logos).

use crate::Span;
use logos::Logos;

#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip(r"([ \t\r\n\f]+|//[^\n]*)", allow_greedy = true))]
pub enum Tok {
    /// `%3`, `%topic`
    #[regex(r"%[A-Za-z0-9_.]+")]
    Value,
    /// `@name` or `@Agent.flow`
    #[regex(r"@[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")]
    Symbol,
    /// `!Report`
    #[regex(r"![A-Za-z_][A-Za-z0-9_.]*")]
    Opaque,
    /// Keywords, mnemonics, labels, attr names (may contain dots: `flow.call`).
    #[regex(r"[A-Za-z_][A-Za-z0-9_.]*")]
    Ident,
    #[regex(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")]
    #[regex(r"-?inf|NaN", priority = 10)]
    Number,
    /// A JSON string literal.
    #[regex(r#""([^"\\\n]|\\.)*""#)]
    Str,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBrack,
    #[token("]")]
    RBrack,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("->")]
    Arrow,
    #[token("=")]
    Eq,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    /// Anything the lexer does not recognise.
    Error,
}

impl Tok {
    pub fn describe(self) -> &'static str {
        match self {
            Tok::Value => "a value (`%name`)",
            Tok::Symbol => "a symbol (`@name`)",
            Tok::Opaque => "an opaque type (`!Name`)",
            Tok::Ident => "an identifier",
            Tok::Number => "a number",
            Tok::Str => "a string",
            Tok::LBrace => "`{`",
            Tok::RBrace => "`}`",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBrack => "`[`",
            Tok::RBrack => "`]`",
            Tok::Lt => "`<`",
            Tok::Gt => "`>`",
            Tok::Arrow => "`->`",
            Tok::Eq => "`=`",
            Tok::Comma => "`,`",
            Tok::Colon => "`:`",
            Tok::Error => "an unrecognised character",
        }
    }
}

/// Lexes the whole text; unrecognised input becomes [`Tok::Error`] tokens.
pub fn lex(src: &str) -> Vec<(Tok, Span)> {
    let mut lexer = Tok::lexer(src);
    let mut out = Vec::new();
    while let Some(t) = lexer.next() {
        let r = lexer.span();
        out.push((t.unwrap_or(Tok::Error), Span::new(r.start, r.end)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_an_op_line() {
        let src = "%4, %5 = qmem %2 {tier = \"ltm\"} : json, ord // c\n";
        let toks: Vec<Tok> = lex(src).into_iter().map(|t| t.0).collect();
        use Tok::*;
        assert_eq!(
            toks,
            [
                Value, Comma, Value, Eq, Ident, Value, LBrace, Ident, Eq, Str, RBrace, Colon,
                Ident, Comma, Ident
            ]
        );
        let toks: Vec<Tok> = lex("-inf inf info -1.5e3 flow.call @A.b !T ~")
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(
            toks,
            [Number, Number, Ident, Number, Ident, Symbol, Opaque, Error]
        );
    }
}
