//! Routine signatures read from tokens: names, parameters and arities of `CREATE FUNCTION`,
//! `DROP FUNCTION` and calls, and the variables a body uses.

use super::*;

/// Names of the routines `text` may define: each word after `CREATE [OR REPLACE] FUNCTION` or
/// `PROCEDURE` (its last dotted part; lower case unless quoted). A byte scan, run over every
/// `.sql` file before any is parsed, so that parsing keeps only calls of these; a match in a
/// comment or a string only adds a name.
pub fn routine_names(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    // A plain byte loop: a case-insensitive automaton for two words whose first letters are
    // common ran at a third of this speed (2 % of a run over the PostgreSQL corpus).
    for start in 0..b.len() {
        let word: &[u8] = match b[start] | 0x20 {
            b'f' => b"function",
            b'p' => b"procedure",
            _ => continue,
        };
        let end = start + word.len();
        if !b
            .get(start..end)
            .is_some_and(|w| w.eq_ignore_ascii_case(word))
            || (start > 0 && is_ident(b[start - 1]))
            || b.get(end).is_some_and(|&c| is_ident(c))
        {
            continue;
        }
        // The word before: `create` or `replace`.
        let before = text[..start].trim_end();
        let prev = before
            .rsplit(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("");
        if !(prev.eq_ignore_ascii_case("create") || prev.eq_ignore_ascii_case("replace")) {
            continue;
        }
        // The name: dotted parts, each a word or a quoted identifier; the last one counts.
        let mut rest = text[end..].trim_start();
        let mut name = None;
        loop {
            let part = if let Some(q) = rest.strip_prefix('"') {
                let Some(close) = q.find('"') else { break };
                rest = &q[close + 1..];
                q[..close].to_string()
            } else {
                let len = rest.bytes().take_while(|&c| is_ident(c)).count();
                if len == 0 {
                    break;
                }
                let w = rest[..len].to_ascii_lowercase();
                rest = &rest[len..];
                w
            };
            name = Some(part);
            match rest.strip_prefix('.') {
                Some(r) => rest = r,
                None => break,
            }
        }
        out.extend(name);
    }
    out
}

/// `DROP FUNCTION|PROCEDURE|ROUTINE [IF EXISTS] a(int), b [CASCADE]`: the names dropped, with
/// the number of parameters where they are listed.
pub(super) fn dropped_routines(src: &str, t: &[Token]) -> Vec<(String, Option<usize>)> {
    let mut names = Vec::new();
    if !(t.first().is_some_and(|w| w.is(src, "drop"))
        && t.get(1).is_some_and(|w| {
            w.is(src, "function") || w.is(src, "procedure") || w.is(src, "routine")
        }))
    {
        return names;
    }
    let mut i = 2;
    if t.get(i).is_some_and(|w| w.is(src, "if")) {
        i += 2;
    }
    let mut depth = 0usize;
    let mut expect_name = true;
    while let Some(tok) = t.get(i) {
        if tok.is_punct(src, "(") {
            depth += 1;
        } else if tok.is_punct(src, ")") {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && tok.is_punct(src, ",") {
            expect_name = true;
        } else if depth == 0
            && expect_name
            && let Some((name, next)) = routine_name_at(src, t, i)
        {
            names.push((name, arity(src, t, next)));
            i = next;
            expect_name = false;
            continue;
        }
        i += 1;
    }
    names
}

/// The number of parameters in the list that opens at token `open`, if one does.
pub(super) fn arity(src: &str, t: &[Token], open: usize) -> Option<usize> {
    if !t.get(open)?.is_punct(src, "(") {
        return None;
    }
    let (mut depth, mut commas, mut empty) = (0usize, 0, true);
    for tok in &t[open..] {
        if tok.is_punct(src, "(") {
            depth += 1;
        } else if tok.is_punct(src, ")") {
            depth -= 1;
            if depth == 0 {
                return Some(if empty { 0 } else { commas + 1 });
            }
        } else if depth == 1 && tok.is_punct(src, ",") {
            commas += 1;
        } else if depth == 1 {
            empty = false;
        }
    }
    None
}

/// The name of the routine a `CREATE FUNCTION|PROCEDURE` defines, and its number of parameters.
pub(super) fn routine_name(src: &str, t: &[Token]) -> Option<(String, Option<usize>)> {
    let i = t
        .iter()
        .position(|t| t.is(src, "function") || t.is(src, "procedure"))?;
    routine_name_at(src, t, i + 1).map(|(name, next)| (name, arity(src, t, next)))
}

/// A possibly qualified routine name at token `i` (its last component, lower case unless
/// quoted) and the index after it.
pub(in crate::extract) fn routine_name_at(
    src: &str,
    t: &[Token],
    mut i: usize,
) -> Option<(String, usize)> {
    let mut name = None;
    while let Some(tok) = t.get(i) {
        name = Some(match tok.kind {
            Kind::Word => tok.text(src).to_ascii_lowercase(),
            Kind::QuotedIdent => tok.text(src).trim_matches('"').to_string(),
            _ => break,
        });
        i += 1;
        if !t.get(i).is_some_and(|d| d.is_punct(src, ".")) {
            break;
        }
        i += 1;
    }
    name.map(|n| (n, i))
}

/// Names of a routine's parameters: `(acct int, OUT total numeric, int)` gives `acct`, `total`.
pub(super) fn routine_params(src: &str, t: &[Token]) -> Vec<String> {
    params(src, t).into_iter().filter_map(|(n, _)| n).collect()
}

/// The parameters a call passes arguments to, in order (`""` for one with no name): a
/// function's `OUT` parameters take none, a procedure's do (PostgreSQL 14 on).
pub(super) fn call_params(src: &str, t: &[Token]) -> Vec<Name> {
    let procedure = t.iter().take(6).any(|t| t.is(src, "procedure"));
    params(src, t)
        .into_iter()
        .filter(|(_, out)| procedure || !out)
        .map(|(n, _)| n.unwrap_or_default().into())
        .collect()
}

/// Each parameter's name, where it has one, and whether it is `OUT` only.
pub(super) fn params(src: &str, t: &[Token]) -> Vec<(Option<String>, bool)> {
    let Some(open) = t.iter().position(|t| t.is_punct(src, "(")) else {
        return Vec::new();
    };
    let Some(list) = paren_group(src, &t[open..], |tok| tok.is_punct(src, ",")) else {
        return Vec::new();
    };
    // A parameter the list does not close is not read.
    let done = list.parts.len() - usize::from(!list.closed);
    let mut names = Vec::new();
    for arg in &list.parts[..done] {
        let words: Vec<&&Token> = arg
            .iter()
            .skip_while(|a| {
                ["in", "out", "inout", "variadic"]
                    .iter()
                    .any(|m| a.is(src, m))
            })
            .collect();
        // A name is followed by its type; a lone type is an unnamed parameter.
        let out = arg.first().is_some_and(|a| a.is(src, "out"));
        if words.len() >= 2 && words[0].kind == Kind::Word {
            names.push((Some(words[0].text(src).to_ascii_lowercase()), out));
        } else if !words.is_empty() {
            names.push((None, out));
        }
    }
    names
}

/// [`Group`] of `t`; `None` when `t` does not open with `(`.
pub(in crate::extract) fn paren_group<'t>(
    src: &str,
    t: &'t [Token],
    cut: impl Fn(&Token) -> bool,
) -> Option<Group<'t>> {
    if !t.first()?.is_punct(src, "(") {
        return None;
    }
    let mut g = Group {
        parts: vec![Vec::new()],
        cuts: Vec::new(),
        closed: false,
    };
    let mut depth = 0usize;
    for tok in t {
        if tok.is_punct(src, "(") {
            depth += 1;
            if depth == 1 {
                continue;
            }
        } else if tok.is_punct(src, ")") {
            depth -= 1;
            if depth == 0 {
                g.closed = true;
                break;
            }
        } else if depth == 1 && cut(tok) {
            g.cuts.push(tok);
            g.parts.push(Vec::new());
            continue;
        }
        if let Some(p) = g.parts.last_mut() {
            p.push(tok);
        }
    }
    Some(g)
}

/// Words of `tokens` that name a known variable.
pub(super) fn variables_used(src: &str, tokens: &[Token], known: &[String]) -> Vec<String> {
    let mut used: Vec<String> = Vec::new();
    for t in tokens.iter().filter(|t| t.kind == Kind::Word) {
        let w = t.text(src).to_ascii_lowercase();
        if known.contains(&w) && !used.contains(&w) {
            used.push(w);
        }
    }
    used
}
