//! The witness of a check-then-act inside a routine: two sessions call it with values of its
//! parameters' types, the key the check filters on shared, the other values their own.

use super::{At, Found, Witness, WitnessStep, duplicates, setup, step, values};
use crate::model::*;

/// A check-then-act inside a routine: two transactions call it with the same key, the first
/// one's write not committed yet when the second one checks.
pub(super) fn routine_calls(
    w: &mut Witness,
    found: &Found,
    program: &Program,
) -> Result<(), String> {
    let (read, write, table) = found.read_write(&w.at)?;
    let table = table.to_string();
    let unit = write.unit;
    let name = unit
        .name
        .as_deref()
        .ok_or_else(|| format!("{}: the routine has no name", w.at))?;
    let text = program.files[unit.span.file].text();
    let ddl = text
        .get(unit.span.start()..unit.span.end())
        .unwrap_or("")
        .trim();
    let params = routine_params(ddl, name)
        .ok_or_else(|| format!("{}: the parameters of `{name}` could not be read", w.at))?;
    let calls = Calls {
        at: w.at.clone(),
        // A parameter the check filters on is the key both calls share; the others differ.
        keys: read
            .step
            .facts
            .filters
            .iter()
            .flat_map(|p| p.value.idents.iter().map(|i| i.as_str()))
            .collect(),
        params: &params,
    };
    let t = setup::table(w, program, &[read.step, write.step], &table, &params)?;
    // What each call's row refers to (an account the membership belongs to) exists.
    for session in [1, 2] {
        let (names, values): (Vec<String>, Vec<String>) = write
            .step
            .facts
            .inserts
            .iter()
            .filter_map(|(c, o)| {
                let v = match params.iter().find(|p| o.text == p.0) {
                    Some(p) => calls.value(p, session).ok()?,
                    None => values::literal(&o.text)?,
                };
                Some((c.to_string(), v))
            })
            .unzip();
        setup::parents_of(w, program, &t, &names, &values);
    }
    let (check, shows, waits) = match write.step.facts.kind {
        StmtKind::Insert => (calls.duplicates(&t, read, write)?, "2".to_string(), false),
        StmtKind::Update => {
            let (check, shows) = calls.overwrite(w, program, &t, read, write)?;
            (check, shows, true)
        }
        other => {
            return Err(format!(
                "{}: a witness is written for an INSERT or UPDATE, not {other:?}",
                w.at
            ));
        }
    };
    w.setup.push(format!("{};", ddl.trim_end_matches(';')));
    let called = qualified(ddl, name);
    let call = |session: usize| -> Result<String, String> {
        let args: Result<Vec<String>, String> =
            params.iter().map(|p| calls.value(p, session)).collect();
        Ok(format!("SELECT {called}({});", args?.join(", ")))
    };
    w.steps.push(step('A', "BEGIN;"));
    w.steps.push(step('A', call(1)?));
    w.steps.push(step('B', "BEGIN;"));
    w.steps.push(WitnessStep {
        waits,
        ..step('B', call(2)?)
    });
    w.steps.push(step('A', "COMMIT;"));
    w.steps.push(step('B', "COMMIT;"));
    w.steps.push(WitnessStep {
        shows: Some(shows.clone()),
        ..step('C', check)
    });
    w.look_for = match waits {
        false => "B's check (step 4) does not see A's uncommitted row and nothing makes it wait: both calls insert, and step 7 counts two equal rows where the check meant one".into(),
        true => format!(
            "B's check (step 4) passes on the row as it was before A's change; its write waits for A and then goes through: step 7 shows B's value `{shows}` over A's claim"
        ),
    };
    Ok(())
}

/// The values two calls of a routine pass: the key its check filters on shared, the others
/// their own.
struct Calls<'p> {
    at: String,
    keys: Vec<&'p str>,
    params: &'p [(String, String)],
}

impl Calls<'_> {
    /// The value of `param` in call `session` (0: the value both share).
    fn value(&self, param: &(String, String), session: usize) -> Result<String, String> {
        let n = match self.keys.contains(&param.0.as_str()) {
            true => 0,
            false => session,
        };
        sample(&param.1, n).ok_or_else(|| {
            format!(
                "{}: no sample value for `{}` of type {}",
                self.at, param.0, param.1
            )
        })
    }

    /// An operand with the routine's parameters replaced by their shared values.
    fn subst(&self, o: &Operand) -> Result<String, String> {
        match self
            .params
            .iter()
            .find(|p| o.idents.len() == 1 && o.text == p.0)
        {
            Some(p) => self.value(p, 0),
            None if o.idents.is_empty() => Ok(o.text.to_string()),
            None => Err(format!(
                "{}: `{}` is computed in the routine",
                self.at, o.text
            )),
        }
    }

    /// A statement's equality filters with the shared values.
    fn filters(&self, f: &Facts) -> Result<String, String> {
        let parts = f
            .filters
            .iter()
            .map(|p| Ok(format!("{} = {}", p.column, self.subst(&p.value)?)))
            .collect::<Result<Vec<String>, String>>()?;
        match parts.is_empty() {
            true => Err(format!("{}: the statement names no row by key", self.at)),
            false => Ok(parts.join(" AND ")),
        }
    }

    /// After two inserts: the most rows with the key the check meant to keep unique.
    fn duplicates(&self, t: &setup::Table, read: At, write: At) -> Result<String, String> {
        // An existence check meant one row per key: the calls' own values (a user id beside
        // the checked address) do not tell its duplicates apart. (A count's cap is shown per
        // value.)
        let counts = read
            .step
            .facts
            .extra()
            .aggregates
            .iter()
            .any(|a| a == "count");
        let varying: Vec<&str> = self
            .params
            .iter()
            .map(|p| p.0.as_str())
            .filter(|p| !counts && !self.keys.contains(p))
            .collect();
        Ok(duplicates(
            &t.name,
            &self.filters(&read.step.facts)?,
            &write.step.facts,
            &varying,
        ))
    }

    /// After two updates: the row the check finds, set up in the state the check lets
    /// through, and the query and output that show the second call's value over the first's.
    fn overwrite(
        &self,
        w: &mut Witness,
        program: &Program,
        t: &setup::Table,
        read: At,
        write: At,
    ) -> Result<(String, String), String> {
        let mut row = read
            .step
            .facts
            .filters
            .iter()
            .map(|p| Ok((p.column.to_string(), self.subst(&p.value)?)))
            .collect::<Result<Vec<(String, String)>, String>>()?;
        if let Some((c, v)) = checked_state(program, write.tx, read.step)
            && !row.iter().any(|(k, _)| *k == c)
        {
            row.push((c, v));
        }
        setup::insert_row(w, program, t, &row, "0", 1);
        // A written value that tells the two calls apart.
        let set = write
            .step
            .facts
            .sets
            .iter()
            .find_map(|s| {
                let p = self
                    .params
                    .iter()
                    .find(|p| s.value.text == p.0 && !self.keys.contains(&p.0.as_str()))?;
                Some((s.column.to_string(), p))
            })
            .ok_or_else(|| format!("{}: no written value tells the two calls apart", self.at))?;
        Ok((
            format!(
                "SELECT {} FROM {} WHERE {};",
                set.0,
                t.name,
                self.filters(&write.step.facts)?
            ),
            // What psql prints for it: a text sample without its quotes.
            self.value(set.1, 2)?.trim_matches('\'').to_string(),
        ))
    }
}

/// The state a check lets through: after `SELECT state INTO s ..`, a condition on `s` that
/// compares it with one text literal (`IF s <> 'queued' THEN RAISE ..`, `IF s = 'queued'
/// THEN ..`): the column read into `s` and that literal. The row is set up in that state so
/// that both calls pass the check on what is in the row, not on a NULL.
fn checked_state(program: &Program, tx: &Transaction, read: &Step) -> Option<(String, String)> {
    let f = &read.facts;
    let assigns = &f.extra().assigns;
    if assigns.len() != f.columns.len() {
        return None;
    }
    tx.steps
        .iter()
        .filter(|s| s.seq > read.seq && s.facts.reads.is_empty())
        .find_map(|s| {
            let i = assigns
                .iter()
                .position(|a| s.facts.extra().uses.contains(a))?;
            let text = program.files[s.span.file]
                .text()
                .get(s.span.start()..s.span.end())?;
            let mut quoted = text.split('\'');
            let (_, literal, _) = (quoted.next()?, quoted.next()?, quoted.next()?);
            quoted
                .next()
                .is_none()
                .then(|| (f.columns[i].to_string(), format!("'{literal}'")))
        })
}

/// `name` as `ddl` writes it, with its schema (`crm.invite`).
fn qualified(ddl: &str, name: &str) -> String {
    let lower = ddl.to_ascii_lowercase();
    let Some(at) = lower.find(&name.to_ascii_lowercase()) else {
        return name.to_string();
    };
    let head = &ddl[..at];
    let start = head
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '"'))
        .map_or(0, |i| i + 1);
    format!("{}{name}", &head[start..])
}

/// The routine's input parameters (name, type) from its `CREATE` statement.
fn routine_params(ddl: &str, name: &str) -> Option<Vec<(String, String)>> {
    let lower = ddl.to_ascii_lowercase();
    let at = lower.find(&name.to_ascii_lowercase())? + name.len();
    let open = at + ddl[at..].find('(')?;
    let mut depth = 0;
    let mut close = None;
    for (i, c) in ddl[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let list = &ddl[open + 1..close?];
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let mut words: Vec<&str> = part.split_whitespace().collect();
        match words.first().map(|w| w.to_ascii_lowercase()) {
            Some(m) if m == "out" => continue,
            Some(m) if m == "in" || m == "inout" || m == "variadic" => {
                words.remove(0);
            }
            _ => {}
        }
        let end = words
            .iter()
            .position(|w| w.eq_ignore_ascii_case("default") || *w == "=")
            .unwrap_or(words.len());
        if end < 2 {
            return None;
        }
        out.push((
            words[0].to_string(),
            words[1..end].join(" ").to_ascii_lowercase(),
        ));
    }
    Some(out)
}

/// A value of a parameter's type: `n` 0 for a shared key, 1 and 2 for each session's own.
pub(super) fn sample(ty: &str, n: usize) -> Option<String> {
    let ty = ty.trim();
    let ints = [
        "int", "integer", "bigint", "smallint", "int2", "int4", "int8", "numeric",
    ];
    if ints.contains(&ty) {
        return Some(["1", "10", "11"][n].to_string());
    }
    if ty == "text" || ty.starts_with("varchar") || ty.starts_with("character varying") {
        return Some(["'k'", "'a'", "'b'"][n].to_string());
    }
    // Other types whose values tell the three apart.
    values::builtin(ty, n + 1).filter(|_| ty == "uuid")
}
