//! The sanitised FTS5 expressions ranked searches send (spec §8.2), parsed the way FTS5 parses
//! them: phrases numbered left to right (the order `mpa_rank` receives their idf in), adjacent
//! phrases joined by an implicit AND that binds tightest, then `NOT`, `AND`, `OR`, each left
//! associative. Anything else — a prefix `*`, parentheses, column filters, a character FTS5
//! would reject — is `None`, and the search keeps FTS5's own `bm25()`.

use super::RankIndex;
use super::ffi::MAX_PHRASES;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Phrase(usize),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phrase {
    /// The phrase as FTS5 text (a quoted string), for counting it on its own.
    pub text: String,
    /// Its tokens as the index stores them.
    pub(crate) tokens: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub phrases: Vec<Phrase>,
    pub(crate) root: Node,
}

/// Phrase sets as bit masks (at most [`MAX_PHRASES`] = 64 phrases).
pub(crate) type Mask = u64;

impl Query {
    /// Whether a row holding exactly the phrases in `present` matches (tests compare this with
    /// FTS5's own matching).
    // public for the crate's tests (tests/all.rs); not part of the API
    #[doc(hidden)]
    pub fn matches(&self, present: Mask) -> bool {
        self.eval(present, 0) == Truth::Yes
    }

    /// Of the phrases in `present` (a row holding exactly those), the ones whose occurrences
    /// FTS5 reports for the row, for a query without `NOT`: the phrases of the subexpressions
    /// that match it (FTS5 moves an AND or OR branch that does not match on to its next match,
    /// so its phrases are not on the row). With `NOT`, what FTS5 reports also depends on where
    /// its iterators happen to stand (a `NOT` whose left side is exhausted leaves its right
    /// side's iterator behind), so such queries are only bounded — see [`Query::has_not`].
    pub fn counted(&self, present: Mask) -> Mask {
        counted(&self.root, present).1
    }

    /// Phrases every matching row holds.
    pub(crate) fn required(&self) -> Mask {
        fn required(n: &Node) -> Mask {
            match n {
                Node::Phrase(p) => 1 << p,
                Node::And(a, b) => required(a) | required(b),
                Node::Or(a, b) => required(a) & required(b),
                Node::Not(a, _) => required(a),
            }
        }
        required(&self.root)
    }

    /// Whether the query has a `NOT` anywhere.
    pub fn has_not(&self) -> bool {
        fn any_not(n: &Node) -> bool {
            match n {
                Node::Phrase(_) => false,
                Node::Not(..) => true,
                Node::And(a, b) | Node::Or(a, b) => any_not(a) || any_not(b),
            }
        }
        any_not(&self.root)
    }

    /// Whether a row matches when the phrases in `present` certainly occur in it, those in
    /// `maybe` may or may not (all their tokens occur, not necessarily in order), and the rest
    /// do not.
    pub(crate) fn eval(&self, present: Mask, maybe: Mask) -> Truth {
        eval(&self.root, present, maybe)
    }
}

/// (matches, phrases that keep their occurrences).
fn counted(n: &Node, present: Mask) -> (bool, Mask) {
    match n {
        Node::Phrase(p) => {
            let here = present & (1 << p) != 0;
            (here, if here { 1 << p } else { 0 })
        }
        Node::And(a, b) => match (counted(a, present), counted(b, present)) {
            ((true, ka), (true, kb)) => (true, ka | kb),
            _ => (false, 0),
        },
        Node::Or(a, b) => {
            let ((ma, ka), (mb, kb)) = (counted(a, present), counted(b, present));
            (ma || mb, ka | kb)
        }
        Node::Not(a, b) => match (counted(a, present), counted(b, present)) {
            ((true, ka), (false, _)) => (true, ka),
            _ => (false, 0),
        },
    }
}

/// Three-valued match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truth {
    Yes,
    No,
    Maybe,
}

fn eval(n: &Node, present: Mask, maybe: Mask) -> Truth {
    use Truth::{Maybe, No, Yes};
    match n {
        Node::Phrase(p) if present & (1 << p) != 0 => Yes,
        Node::Phrase(p) if maybe & (1 << p) != 0 => Maybe,
        Node::Phrase(_) => No,
        Node::And(a, b) => match (eval(a, present, maybe), eval(b, present, maybe)) {
            (No, _) | (_, No) => No,
            (Yes, Yes) => Yes,
            _ => Maybe,
        },
        Node::Or(a, b) => match (eval(a, present, maybe), eval(b, present, maybe)) {
            (Yes, _) | (_, Yes) => Yes,
            (No, No) => No,
            _ => Maybe,
        },
        Node::Not(a, b) => match (eval(a, present, maybe), eval(b, present, maybe)) {
            (No, _) | (_, Yes) => No,
            (Yes, No) => Yes,
            _ => Maybe,
        },
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Lexeme {
    Str(String),
    And,
    Or,
    Not,
}

/// FTS5's bareword characters: ASCII letters and digits, `_`, 0x1A, and every non-ASCII byte.
fn is_bareword(c: char) -> bool {
    !c.is_ascii() || c.is_ascii_alphanumeric() || c == '_' || c == '\u{1A}'
}

fn lex(expr: &str) -> Option<Vec<Lexeme>> {
    let mut out = Vec::new();
    let mut chars = expr.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            chars.next();
            continue;
        }
        if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some((_, '"')) => {
                        if chars.peek().is_some_and(|&(_, c)| c == '"') {
                            chars.next();
                            s.push('"');
                        } else {
                            break;
                        }
                    }
                    Some((_, c)) => s.push(c),
                    None => return None,
                }
            }
            out.push(Lexeme::Str(s));
        } else if is_bareword(c) {
            let mut end = i;
            while let Some(&(j, c)) = chars.peek() {
                if !is_bareword(c) {
                    break;
                }
                end = j + c.len_utf8();
                chars.next();
            }
            let word = &expr[i..end];
            out.push(match word {
                "AND" => Lexeme::And,
                "OR" => Lexeme::Or,
                "NOT" => Lexeme::Not,
                _ => Lexeme::Str(word.to_owned()),
            });
        } else {
            // `*` (prefix), `(`, `)`, `:`, `{`, `}`, `^`, `+`, or a character FTS5 rejects.
            return None;
        }
        // A phrase directly followed by `*` or `(` (NEAR) is not modelled either.
        if let Some(&(_, next)) = chars.peek()
            && (next == '*' || next == '(')
        {
            return None;
        }
    }
    Some(out)
}

struct Parser<'a> {
    lexemes: &'a [Lexeme],
    at: usize,
    phrases: Vec<Phrase>,
    index: RankIndex,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Lexeme> {
        self.lexemes.get(self.at)
    }

    fn binary(
        &mut self,
        op: &Lexeme,
        next: fn(&mut Self) -> Option<Node>,
        make: fn(Box<Node>, Box<Node>) -> Node,
    ) -> Option<Node> {
        let mut left = next(self)?;
        while self.peek() == Some(op) {
            self.at += 1;
            let right = next(self)?;
            left = make(Box::new(left), Box::new(right));
        }
        Some(left)
    }

    fn or(&mut self) -> Option<Node> {
        self.binary(&Lexeme::Or, Self::and, Node::Or)
    }

    fn and(&mut self) -> Option<Node> {
        self.binary(&Lexeme::And, Self::not, Node::And)
    }

    fn not(&mut self) -> Option<Node> {
        self.binary(&Lexeme::Not, Self::list, Node::Not)
    }

    /// One or more adjacent phrases (implicit AND).
    fn list(&mut self) -> Option<Node> {
        let mut node = self.phrase()?;
        while matches!(self.peek(), Some(Lexeme::Str(_))) {
            let next = self.phrase()?;
            node = Node::And(Box::new(node), Box::new(next));
        }
        Some(node)
    }

    fn phrase(&mut self) -> Option<Node> {
        let Some(Lexeme::Str(text)) = self.peek() else {
            return None;
        };
        let text = text.clone();
        self.at += 1;
        let tokens = self.index.tokenize_query(&text)?;
        if tokens.is_empty() || self.phrases.len() >= MAX_PHRASES {
            return None;
        }
        self.phrases.push(Phrase {
            text: format!("\"{}\"", text.replace('"', "\"\"")),
            tokens,
        });
        Some(Node::Phrase(self.phrases.len() - 1))
    }
}

/// Parses a sanitised expression for `index`, or `None` when it is not in the modelled subset.
pub(crate) fn parse(expr: &str, index: RankIndex) -> Option<Query> {
    let lexemes = lex(expr)?;
    let mut p = Parser {
        lexemes: &lexemes,
        at: 0,
        phrases: Vec::new(),
        index,
    };
    let root = p.or()?;
    (p.at == lexemes.len()).then_some(Query {
        phrases: p.phrases,
        root,
    })
}
