//! A file syn cannot parse: its SQL strings are still found in the token stream.

use super::*;

/// syn could not parse the file: find SQL in the token stream instead (executor unknown), and
/// say so. If even the tokens cannot be read, say where.
pub(super) fn fallback_walk(front: &mut Front, file: &SourceFile, id: FileId, why: Unparsed) {
    let lines = LineIndex::at_newlines(&why.text);
    let offset = |lc: LineColumn| {
        let start = lines.line_start(lc.line).unwrap_or(why.text.len());
        start
            + why.text[start..]
                .chars()
                .take(lc.column)
                .map(char::len_utf8)
                .sum::<usize>()
            + why.shift
    };
    let at = why.at.map_or(0, offset).min(file.text().len());
    let limit = why.limit;
    let failure = ParseFailure {
        span: Span::new(id, at..at),
        message: why.message,
        host: true,
    };
    let Ok(tokens) = why.text.parse::<TokenStream>() else {
        front.out.failures.push(failure);
        return;
    };
    let mut walker = SessionWalker::unknown();
    let mut seq = 0;
    let mut literals = Vec::new();
    sql_literals(tokens, false, &mut literals);
    front.file = id;
    for lit in literals {
        let (a, b) = (offset(lit.span().start()), offset(lit.span().end()));
        let Some((text, map)) = file.text().get(a..b).and_then(|t| lit::decode(t, a)) else {
            continue;
        };
        for s in split(&text, front.dialect, false).statements {
            let mut step = front.step(&text, &map, &s, Vec::new());
            seq += 1;
            step.seq = seq;
            walker.push(step, seq);
        }
    }
    // The note says what was not known of the file's SQL: a file with none (old-edition code a
    // benchmark keeps, generated code) that syn rejects loses nothing. A file txlint's own
    // nesting limit stopped is said to be, SQL or not.
    if seq == 0 && !limit {
        return;
    }
    front.out.failures.push(failure);
    let mut unit = Unit::new(UnitKind::RustFn, None, Span::new(id, 0..file.text().len()));
    unit.transactions = walker.finish();
    front.out.units.push(unit);
}

/// String literals that are the first argument of a query macro or method in a token stream,
/// in order; groups are visited with an explicit stack (the input may be deeply nested).
fn sql_literals(ts: TokenStream, in_query: bool, out: &mut Vec<proc_macro2::Literal>) {
    // Each open group: its remaining tokens, whether the next token is a query's first
    // argument, and the identifier just before.
    let mut stack = vec![(ts.into_iter(), in_query, None::<String>)];
    while let Some((tokens, first, prev)) = stack.last_mut() {
        let Some(t) = tokens.next() else {
            stack.pop();
            continue;
        };
        match t {
            TokenTree::Group(g) => {
                let q = prev.as_deref().is_some_and(|p| {
                    drivers::is(p, Role::Sends)
                        || drivers::is(p, Role::Starts)
                        || drivers::sql_macro(p).is_some()
                });
                *first = false;
                *prev = None;
                stack.push((g.stream().into_iter(), q, None));
            }
            TokenTree::Literal(l) => {
                if *first && l.to_string().ends_with('"') {
                    out.push(l);
                }
                *first = false;
                *prev = None;
            }
            TokenTree::Ident(i) => *prev = Some(i.to_string()),
            TokenTree::Punct(p) if p.as_char() == '!' => {}
            TokenTree::Punct(_) => *prev = None,
        }
    }
}
