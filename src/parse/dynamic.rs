//! PL/pgSQL dynamic SQL read as the statement it runs: `EXECUTE format('UPDATE %I.%I SET ..
//! WHERE id = $1', s, 'r_' || q) USING v` is read as `UPDATE s.r___ SET .. WHERE id = v`.
//!
//! The body is rewritten before it is read, each `EXECUTE` statement into the SQL it sends,
//! padded with spaces to the same length (every other offset of the body stays true; positions
//! inside the rewritten statement point somewhere inside the `EXECUTE`). What is filled in:
//! - `format(<literal>, args)`: `%I` and `%s` by their argument where it is a literal, by a
//!   hole where it is not (`'r_' || q` gives `r___`: the queue's table, whichever queue: two
//!   routines given the same queue name meet on it); `%L`, and `%s` where a value goes, by the
//!   variable it quotes (`quote_literal(v)`, `v`), else `NULL`; `%%` by `%`;
//! - `'..' || quote_ident(t) || '..'`: the literal pieces, and the other terms as above;
//! - `$n` by the `n`-th `USING` expression;
//! - `INTO targets` kept, after the statement.
//!
//! Anything else (a query text in a variable, `E'..'` strings, a rewritten statement longer
//! than the `EXECUTE` it replaces) is left as it was, and read as before: not at all.

use super::lex::{Kind, Lexer, Token, string_body};
use crate::source::Dialect;

/// A table name part that stands for a value txlint cannot know (see `model::is_hole`).
const HOLE: &str = "__";

/// The body with its `EXECUTE` statements rewritten, and the ranges rewritten (templates: a
/// statement there that does not parse says nothing about the SQL that runs); `None` if none
/// was.
pub fn inline(body: &str) -> Option<(String, Vec<std::ops::Range<usize>>)> {
    if !body
        .as_bytes()
        .windows(7)
        .any(|w| w.eq_ignore_ascii_case(b"execute"))
    {
        return None;
    }
    let t: Vec<Token> = Lexer::new(body, Dialect::Postgres, false)
        .filter(|t| t.kind != Kind::Comment)
        .collect();
    let mut out: Option<String> = None;
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i].is(body, "execute") && starts_statement(body, &t, i) {
            let end = (i + 1..t.len())
                .find(|&j| t[j].kind == Kind::Semicolon)
                .unwrap_or(t.len());
            if let Some(sql) = statement(body, &t[i + 1..end]) {
                let range = t[i].start()..t[end - 1].end();
                if sql.len() <= range.len() {
                    let text = out.get_or_insert_with(|| body.to_string());
                    let padded = format!("{sql}{}", " ".repeat(range.len() - sql.len()));
                    text.replace_range(range.clone(), &padded);
                    ranges.push(range);
                }
            }
            i = end;
        }
        i += 1;
    }
    out.map(|text| (text, ranges))
}

/// `EXECUTE` begins a statement (not `EXECUTE FUNCTION f()` of a `CREATE TRIGGER`).
fn starts_statement(src: &str, t: &[Token], i: usize) -> bool {
    i == 0
        || t[i - 1].kind == Kind::Semicolon
        || ["then", "else", "loop", "begin", "query"]
            .iter()
            .any(|w| t[i - 1].is(src, w))
}

/// The SQL `EXECUTE <expr> [INTO ..] [USING ..]` sends, its `INTO` clause after it.
fn statement(src: &str, t: &[Token]) -> Option<String> {
    let top = top_level(src, t);
    let at = |w: &str| (0..t.len()).find(|&j| top[j] && t[j].is(src, w));
    let (into, using) = (at("into"), at("using"));
    let expr_end = [into, using].into_iter().flatten().min().unwrap_or(t.len());
    let mut sql = expression(src, &t[..expr_end])?;
    if let Some(u) = using {
        let stop = into.filter(|&i| i > u).unwrap_or(t.len());
        let args: Vec<String> = split(src, &t[u + 1..stop], ",")
            .iter()
            .map(|a| value(src, a))
            .collect();
        sql = parameters(&sql, &args);
    }
    if let Some(i) = into {
        let stop = using.filter(|&u| u > i).unwrap_or(t.len());
        sql.push(' ');
        sql.push_str(&src[t[i].start()..t[stop - 1].end()]);
    }
    Some(sql)
}

/// Which tokens are outside every parenthesis.
fn top_level(src: &str, t: &[Token]) -> Vec<bool> {
    let mut depth = 0i32;
    t.iter()
        .map(|k| {
            if k.is_punct(src, "(") || k.is_punct(src, "[") {
                depth += 1;
                false
            } else if k.is_punct(src, ")") || k.is_punct(src, "]") {
                depth -= 1;
                false
            } else {
                depth == 0
            }
        })
        .collect()
}

/// The tokens split at a top-level separator (`,`, or `|` for `||`, whose two halves then
/// leave an empty part between them).
fn split<'t>(src: &str, t: &'t [Token], sep: &str) -> Vec<&'t [Token]> {
    let top = top_level(src, t);
    let mut parts = Vec::new();
    let mut from = 0;
    for j in 0..t.len() {
        if top[j] && t[j].is_punct(src, sep) {
            parts.push(&t[from..j]);
            from = j + 1;
        }
    }
    parts.push(&t[from..]);
    parts.retain(|p| !p.is_empty());
    parts
}

/// The text a string expression stands for: `format(..)`, or literals joined with `||`.
fn expression(src: &str, t: &[Token]) -> Option<String> {
    if let [name, open, args @ .., close] = t
        && name.is(src, "format")
        && open.is_punct(src, "(")
        && close.is_punct(src, ")")
    {
        let args = split(src, args, ",");
        let (first, rest) = args.split_first()?;
        let [lit] = first else {
            return None;
        };
        return format(&literal(src, lit)?, src, rest);
    }
    let parts = split(src, t, "|");
    let mut sql = String::new();
    let mut any = false;
    for p in parts {
        match p {
            [lit] if lit.kind == Kind::String => {
                sql.push_str(&literal(src, lit)?);
                any = true;
            }
            _ => {
                let fill = substituted(src, p, &sql);
                sql.push_str(&fill);
            }
        }
    }
    any.then_some(sql)
}

/// What a non-literal piece of dynamic SQL becomes where it lands: a value (after an operator,
/// `LIMIT`, `OFFSET`) or a name.
fn substituted(src: &str, p: &[Token], before: &str) -> String {
    if super::holes::stand_in(before, 1) == "0" {
        value(src, p)
    } else {
        name(src, p)
    }
}

/// `format`'s pattern filled in with `args`.
fn format(pattern: &str, src: &str, args: &[&[Token]]) -> Option<String> {
    let mut out = String::new();
    let mut next = 0;
    let mut chars = pattern.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // `%[n$][-][width]type`
        let mut spec = String::new();
        while let Some(&(_, d)) = chars.peek() {
            if d.is_ascii_digit() || d == '$' || d == '-' {
                spec.push(d);
                chars.next();
            } else {
                break;
            }
        }
        let (_, kind) = chars.next()?;
        if kind == '%' {
            out.push('%');
            continue;
        }
        let index = match spec.split_once('$') {
            Some((n, _)) => n.parse::<usize>().ok()?.checked_sub(1)?,
            None => {
                next += 1;
                next - 1
            }
        };
        next = next.max(index + 1);
        let arg = args.get(index)?;
        let fill = match (kind, arg) {
            (_, [lit]) if lit.kind == Kind::String && kind != 'L' => literal(src, lit)?,
            ('I', _) => name(src, arg),
            ('L', _) => value(src, arg),
            ('s', _) => substituted(src, arg, &out),
            _ => return None,
        };
        out.push_str(&fill);
    }
    Some(out)
}

/// A name made of literal pieces and holes: `'r_' || q` is `r___`; `quote_ident(x)` is `x`'s.
fn name(src: &str, t: &[Token]) -> String {
    if let [f, open, inner @ .., close] = t
        && (f.is(src, "quote_ident") || f.is(src, "lower"))
        && open.is_punct(src, "(")
        && close.is_punct(src, ")")
    {
        return name(src, inner);
    }
    let mut out = String::new();
    for p in split(src, t, "|") {
        match p {
            [lit] if lit.kind == Kind::String => {
                out.push_str(&literal(src, lit).unwrap_or_default())
            }
            _ => out.push_str(HOLE),
        }
    }
    if out.is_empty() {
        HOLE.to_string()
    } else {
        out
    }
}

/// A value spliced in: the variable it quotes (`quote_literal(v)`, `quote_nullable(v)`, `v`,
/// `NEW.id`), a literal as written, an expression over them in parentheses (`(n + 1)`: what
/// a read-compute-write sends), else `NULL`.
fn value(src: &str, t: &[Token]) -> String {
    match t {
        [f, open, inner @ .., close]
            if (f.is(src, "quote_literal") || f.is(src, "quote_nullable"))
                && open.is_punct(src, "(")
                && close.is_punct(src, ")") =>
        {
            value(src, inner)
        }
        [one] if matches!(one.kind, Kind::Word | Kind::Number | Kind::String) => {
            one.text(src).to_string()
        }
        [a, dot, b] if dot.is_punct(src, ".") && a.kind == Kind::Word && b.kind == Kind::Word => {
            format!("{}.{}", a.text(src), b.text(src))
        }
        _ if is_expression(src, t) => {
            let (from, to) = (t[0].start(), t[t.len() - 1].end());
            format!("({})", &src[from..to])
        }
        _ => "NULL".to_string(),
    }
}

/// Tokens that are one expression a statement can hold as written: words, literals and
/// operators on one line, parentheses balanced (not a statement, a comment or a psql variable).
fn is_expression(src: &str, t: &[Token]) -> bool {
    let mut depth = 0i32;
    let ok = t.iter().all(|k| {
        if k.is_punct(src, "(") {
            depth += 1;
        } else if k.is_punct(src, ")") {
            depth -= 1;
        }
        depth >= 0
            && matches!(
                k.kind,
                Kind::Word | Kind::QuotedIdent | Kind::String | Kind::Number | Kind::Punct
            )
    });
    let (Some(first), Some(last)) = (t.first(), t.last()) else {
        return false;
    };
    ok && depth == 0 && !src[first.start()..last.end()].contains('\n')
}

/// The text of a string literal (see [`string_body`]).
fn literal(src: &str, t: &Token) -> Option<String> {
    string_body(src, t).map(|(text, _)| text)
}

/// `$n` (outside quotes) replaced by the `n`-th `USING` value.
fn parameters(sql: &str, args: &[String]) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let (mut i, mut quoted) = (0, false);
    while i < b.len() {
        if b[i] == b'\'' {
            quoted = !quoted;
        }
        if !quoted && b[i] == b'$' {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if let Some(arg) = sql[i + 1..i + 1 + digits]
                .parse::<usize>()
                .ok()
                .and_then(|n| args.get(n.checked_sub(1)?))
            {
                out.push_str(arg);
                i += 1 + digits;
                continue;
            }
        }
        let c = sql[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rewritten body, spaces folded (the padding before a `;` too).
    fn read(body: &str) -> String {
        let out = inline(body).map_or_else(|| body.to_string(), |(text, _)| text);
        assert_eq!(out.len(), body.len(), "offsets move");
        out.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace(" ;", ";")
    }

    #[test]
    fn format_with_names_values_and_using() {
        let body = "begin
          execute format(
            'select task_id, state from absurd.%I where run_id = $1 for update',
            'r_' || p_queue) into v_task, v_state using p_run_id;
          execute format('update %I.%I set n = %L where k = %s', 'absurd', 't_' || p_queue, v_n, quote_literal(v_k));
        end";
        assert_eq!(
            read(body),
            "begin select task_id, state from absurd.r___ where run_id = p_run_id for update into v_task, v_state; \
             update absurd.t___ set n = v_n where k = v_k; end"
        );
    }

    #[test]
    fn concatenation_positional_arguments_and_percent() {
        let body = "BEGIN
          EXECUTE 'DELETE FROM ' || quote_ident(tbl) || ' WHERE id = ' || quote_literal(OLD.id);
          EXECUTE format('UPDATE %1$I SET pct = pct %% 10 WHERE a = %2$L AND b = %2$L', 'stats', NEW.a);
        END";
        assert_eq!(
            read(body),
            "BEGIN DELETE FROM __ WHERE id = OLD.id; UPDATE stats SET pct = pct % 10 WHERE a = NEW.a AND b = NEW.a; END"
        );
    }

    #[test]
    fn a_value_computed_in_the_call_is_spliced_as_its_expression() {
        // `USING n + 1`: the statement writes what `n + 1` is, not an unknown value.
        let body = "begin
          execute 'update q_jobs set attempts = $1 where id = $2' using n + 1, jid;
          execute format('update t set total = %L where id = %s', coalesce(v_total, 0) * 2, NEW.id);
        end";
        assert_eq!(
            read(body),
            "begin update q_jobs set attempts = (n + 1) where id = jid; \
             update t set total = (coalesce(v_total, 0) * 2) where id = NEW.id; end"
        );
    }

    #[test]
    fn what_cannot_be_read_is_left() {
        // A query held in a variable, an escape string, and a trigger's `EXECUTE FUNCTION`.
        let body = "begin execute v_sql; execute E'delete from t\\n'; \
                    execute 'create trigger x after insert on t for each row execute function f()'; end";
        assert_eq!(
            read(body),
            "begin execute v_sql; execute E'delete from t\\n'; create trigger x after insert on t for each row execute function f(); end"
        );
    }
}
