//! A routine's statement as one call runs it: its parameters replaced by the call's arguments
//! (for a row trigger, `NEW.c` and `OLD.c` by the firing statement's values), its locals renamed
//! apart from the caller's variables.

use super::*;

/// Statement `b` of `callee`'s body, as the call with `args` in `caller` runs it, its arms
/// numbered from `arm` on; for a row trigger, `row` is the statement that writes the row `NEW`
/// and `OLD` name.
pub(super) fn copy(
    b: &Step,
    callee: &Callee,
    args: &[Operand],
    row: Option<&Step>,
    caller: &Step,
    arm: usize,
) -> Step {
    let extra = b.facts.extra();
    let mut names = Names {
        routine: &callee.name,
        params: &callee.params,
        args,
        row,
        locals: Vec::new(),
    };
    names.locals = extra
        .uses
        .iter()
        .chain(&extra.assigns)
        .filter(|v| names.param(v).is_none())
        .cloned()
        .collect();
    let mut facts = b.facts.clone();
    for p in &mut facts.filters {
        p.value = names.operand(&p.value);
    }
    for s in &mut facts.sets {
        s.value = names.operand(&s.value);
    }
    for (_, v) in &mut facts.inserts {
        *v = names.operand(v);
    }
    let caller_vars = caller.facts.extra().uses.clone();
    if !extra.uses.is_empty() || !extra.assigns.is_empty() || !extra.advisory.is_empty() {
        let e = facts.extra_mut();
        e.uses = extra
            .uses
            .iter()
            .flat_map(|u| match names.param(u) {
                // A parameter is the caller's variables its argument uses.
                Some(arg) => arg
                    .idents
                    .iter()
                    .filter(|a| {
                        caller_vars
                            .iter()
                            .any(|v| v == a.split('.').next().unwrap_or(a))
                    })
                    .cloned()
                    .collect::<Vec<_>>(),
                None => vec![names.local(u)],
            })
            .collect();
        e.assigns = extra.assigns.iter().map(|a| names.local(a)).collect();
        for a in &mut e.advisory {
            a.key = names.text(&a.key);
        }
    }
    let from = caller.host();
    let mut calls: List<Span> = from.calls.clone();
    calls.push(caller.span);
    calls.extend(b.host().calls.iter().copied());
    let mut branch = caller.branch.clone();
    branch.extend(b.branch.iter().map(|a| a + arm));
    Step {
        span: b.span,
        facts,
        seq: caller.seq,
        session: caller.session,
        branch,
        host: Some(Box::new(Host {
            via: from.via.clone(),
            inputs: from.inputs.clone(),
            calls,
            rows: None,
            propagated: false,
            required: false,
        })),
    }
}

/// How a routine's names read at a call: parameters are the call's arguments, locals are
/// renamed apart from the caller's variables.
struct Names<'a> {
    routine: &'a str,
    params: &'a [Name],
    args: &'a [Operand],
    /// The statement whose row a row trigger's `NEW.c` and `OLD.c` are.
    row: Option<&'a Step>,
    /// The statement's variables that are the routine's own.
    locals: Vec<Name>,
}

impl Names<'_> {
    /// The argument passed for parameter `name` (or `$n`); for a row trigger, the value of
    /// `NEW.c` or `OLD.c` where the triggering statement gives it (the inserted or assigned
    /// value, or the key its `WHERE` selects the row by).
    fn param(&self, name: &str) -> Option<&Operand> {
        if let Some(row) = self.row
            && let Some((side, column)) = name.split_once('.')
            && (side.eq_ignore_ascii_case("new") || side.eq_ignore_ascii_case("old"))
        {
            let f = &row.facts;
            let new = side.eq_ignore_ascii_case("new");
            let inserted = f.inserts.iter().find(|(c, _)| c == column).map(|(_, v)| v);
            let set = f.sets.iter().find(|s| s.column == column).map(|s| &s.value);
            let key = f
                .filters
                .iter()
                .find(|p| p.column == column)
                .map(|p| &p.value);
            return match f.kind {
                StmtKind::Insert if new => inserted,
                StmtKind::Update if new => set.or(key),
                StmtKind::Update | StmtKind::Delete => key,
                _ => None,
            };
        }
        let k = match name.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
            Some(n) => n.checked_sub(1)?,
            None => self
                .params
                .iter()
                .position(|p| !p.is_empty() && p.eq_ignore_ascii_case(name))?,
        };
        self.args.get(k)
    }

    fn is_local(&self, ident: &str) -> bool {
        let first = ident.split('.').next().unwrap_or(ident);
        self.locals.iter().any(|l| l.eq_ignore_ascii_case(first))
    }

    fn local(&self, name: &str) -> Name {
        compact_str::format_compact!("{}${}", self.routine, name)
    }

    fn operand(&self, o: &Operand) -> Operand {
        let text = o.text.trim();
        let whole = match o.params.as_slice() {
            [n] if text == format!("${n}") => self.param(text),
            [] if o.idents.len() == 1 && o.idents[0].eq_ignore_ascii_case(text) => self.param(text),
            _ => None,
        };
        if let Some(arg) = whole {
            return arg.clone();
        }
        let mut out = Operand {
            text: self.text(&o.text).into(),
            ..Operand::default()
        };
        for &n in &o.params {
            match self.param(&format!("${n}")) {
                Some(arg) => out.params.extend(arg.params.iter().copied()),
                None => out.params.push(n),
            }
        }
        for i in &o.idents {
            match self.param(i) {
                Some(arg) => {
                    out.idents.extend(arg.idents.iter().cloned());
                    out.params.extend(arg.params.iter().copied());
                }
                None if self.is_local(i) => out.idents.push(self.local(i)),
                None => out.idents.push(i.clone()),
            }
        }
        out
    }

    /// `text` with each parameter (a name, `$n`, or a row trigger's `NEW.c`) replaced by its
    /// argument's text, and the routine's own variables renamed.
    fn text(&self, text: &str) -> String {
        let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$' || c == '.';
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(|c: char| word(c) && c != '.') {
            out.push_str(&rest[..start]);
            let len = rest[start..]
                .find(|c: char| !word(c))
                .unwrap_or(rest.len() - start);
            let (w, after) = rest[start..].split_at(len);
            let first = w.split('.').next().unwrap_or(w);
            match self.param(w) {
                Some(arg) if arg.text.chars().all(word) => out.push_str(&arg.text),
                Some(arg) => {
                    out.push('(');
                    out.push_str(&arg.text);
                    out.push(')');
                }
                // A record variable's field (`r.balance`) is the variable's.
                None if self.is_local(first) => {
                    out.push_str(&self.local(first));
                    out.push_str(&w[first.len()..]);
                }
                None => out.push_str(w),
            }
            rest = after;
        }
        out.push_str(rest);
        out
    }
}
