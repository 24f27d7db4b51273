//! Routines and triggers followed into the statements that call or fire them
//! (`model::routines`): each copy of a body runs with the caller's arguments, arms and
//! transaction, read through the whole pipeline.

use txlint::model::*;

fn units(sql: &str) -> Vec<Unit> {
    let run = txlint::check_source("t.sql", sql, &txlint::config::Config::default());
    run.program.units
}

fn routine<'a>(units: &'a [Unit], name: &str) -> &'a Unit {
    units
        .iter()
        .find(|u| u.name.as_deref() == Some(name))
        .expect("routine")
}

const DEBIT: &str =
    "CREATE FUNCTION debit(acct int, amount int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
old int;
BEGIN
SELECT balance INTO old FROM accounts WHERE id = acct;
IF old < amount THEN
    UPDATE alerts SET n = n + 1 WHERE id = acct;
END IF;
UPDATE accounts SET balance = old - amount WHERE id = acct;
END
$$;
";

#[test]
fn a_call_runs_the_body_with_its_arguments_before_the_calling_statement() {
    let u = units(&format!("{DEBIT}SELECT debit(7, $1);\n"));
    let script = &u[0];
    let tx = script
        .transactions
        .iter()
        .find(|t| t.steps.len() > 1)
        .expect("the call's transaction");
    let kinds: Vec<StmtKind> = tx.steps.iter().map(|s| s.facts.kind).collect();
    // The read, the update in the `IF` arm, the unconditional update, then the call.
    assert_eq!(
        kinds,
        [
            StmtKind::Select,
            StmtKind::Update,
            StmtKind::Update,
            StmtKind::Select
        ]
    );
    let call = &tx.steps[3];
    let (read, alert, write) = (&tx.steps[0], &tx.steps[1], &tx.steps[2]);
    // The arm's statement sits in an arm of the caller's own, numbered apart from its
    // arms, in a choice group of its own; the others run wherever the call runs.
    assert_eq!(alert.facts.writes[0].name, "alerts");
    assert_eq!(alert.branch.len(), call.branch.len() + 1);
    assert!(alert.branch.starts_with(&call.branch));
    let arm = alert.branch[call.branch.len()];
    assert!(script.choices.iter().any(|c| c.as_slice() == [arm]));
    assert_eq!(read.branch, call.branch);
    assert_eq!(write.branch, call.branch);
    assert_eq!(read.facts.filters[0].value.text, "7");
    assert_eq!(read.host().calls.as_slice(), [call.span]);
    // `old` is debit's own variable, renamed apart; `amount` is the caller's `$1`.
    assert_eq!(read.facts.extra().assigns.as_slice(), ["debit$old"]);
    assert_eq!(write.facts.extra().uses.as_slice(), ["debit$old"]);
    assert_eq!(write.facts.sets[0].value.text, "debit$old - $1");
    assert_eq!(write.facts.sets[0].value.params, [1]);
    // Program order: strictly increasing, the call last.
    assert!(tx.steps.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[test]
fn a_caller_routine_gets_its_callees_statements_with_its_variables() {
    let u = units(&format!(
        "{DEBIT}CREATE FUNCTION pay(src int, n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
PERFORM debit(src, n);
RETURN;
END
$$;
"
    ));
    let pay = routine(&u, "pay");
    let steps = &pay.transactions[0].steps;
    // debit's read, the update in its `IF` arm, its last update, the call.
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[1].branch.len(), 1);
    assert_eq!(steps[2].facts.filters[0].value.text, "src");
    // `amount` is `n`, a variable of `pay`.
    assert_eq!(
        steps[2].facts.extra().uses.as_slice(),
        ["debit$old", "n", "src"]
    );
    // The exit after the call comes after the copies in program order.
    assert!(pay.exits.iter().all(|e| e.seq > steps[3].seq));
}

#[test]
fn calls_follow_the_definition_with_their_number_of_arguments() {
    let u = units(
        "CREATE FUNCTION f(a int) RETURNS void LANGUAGE sql AS $$ UPDATE t SET x = 1 WHERE id = $1 $$;
CREATE FUNCTION f(a int, b int) RETURNS void LANGUAGE sql AS $$ UPDATE u SET x = 1 WHERE id = $2 $$;
CREATE FUNCTION g(a int) RETURNS void LANGUAGE sql AS $$ UPDATE t SET x = 2 $$;
CREATE FUNCTION g(b int) RETURNS void LANGUAGE sql AS $$ UPDATE u SET x = 2 $$;
SELECT f(1, 2);
SELECT g(1);
",
    );
    let script = &u[0];
    let calls: Vec<&Transaction> = script
        .transactions
        .iter()
        .filter(|t| t.steps.iter().any(|s| !s.facts.extra().calls.is_empty()))
        .collect();
    assert_eq!(calls.len(), 2);
    let written: Vec<&str> = calls[0].steps[0]
        .facts
        .writes
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(written, ["u"]);
    assert_eq!(calls[0].steps[0].facts.filters[0].value.text, "2");
    // The later `g(int)` replaces the earlier, as the run reads migrations in order.
    assert_eq!(calls[1].steps[0].facts.writes[0].name, "u");
}

#[test]
fn recursion_and_self_calls_stop() {
    let u = units(
        "CREATE FUNCTION r(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
UPDATE t SET x = x + 1 WHERE id = n;
PERFORM s(n);
END
$$;
CREATE FUNCTION s(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
PERFORM r(n);
END
$$;
SELECT r(1);
",
    );
    let total: usize = u
        .iter()
        .flat_map(|u| &u.transactions)
        .map(|t| t.steps.len())
        .sum();
    assert!(total < 20, "{total} steps");
}

const CAP: &str = "CREATE FUNCTION cap() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
n int;
BEGIN
SELECT count(*) INTO n FROM members WHERE team_id = NEW.team_id;
IF n >= 10 THEN
    RAISE EXCEPTION 'full';
END IF;
RETURN NEW;
END
$$;
CREATE FUNCTION log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
INSERT INTO member_log (user_id) VALUES (NEW.user_id);
RETURN NEW;
END
$$;
CREATE TRIGGER cap BEFORE INSERT ON public.members FOR EACH ROW EXECUTE FUNCTION cap();
CREATE TRIGGER log AFTER INSERT OR UPDATE ON members FOR EACH ROW EXECUTE PROCEDURE log();
";

#[test]
fn a_trigger_runs_the_arms_for_its_event_as_alternatives() {
    let u = units(
        "CREATE FUNCTION count_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
IF TG_OP = 'INSERT' THEN
    IF NEW.yanked THEN
        UPDATE totals SET yanked = yanked + 1 WHERE crate_id = NEW.crate_id;
    ELSE
        UPDATE totals SET live = live + 1 WHERE crate_id = NEW.crate_id;
    END IF;
ELSE
    UPDATE totals SET live = live - 1 WHERE crate_id = OLD.crate_id;
END IF;
RETURN NULL;
END
$$;
CREATE TRIGGER counted AFTER INSERT OR DELETE ON versions FOR EACH ROW EXECUTE FUNCTION count_versions();
BEGIN;
INSERT INTO versions (crate_id, yanked) VALUES ($1, false);
COMMIT;
",
    );
    let script = &u[0];
    let tx = script
        .transactions
        .iter()
        .find(|t| t.scope == Scope::Explicit)
        .expect("the transaction");
    // The insert, then the two arms for inserts; the `ELSE` is for deletes only.
    let sets: Vec<&str> = tx
        .steps
        .iter()
        .filter_map(|s| s.facts.sets.first())
        .map(|s| s.value.text.as_str())
        .collect();
    assert_eq!(sets, ["yanked + 1", "live + 1"]);
    let (a, b) = (&tx.steps[1].branch, &tx.steps[2].branch);
    assert_eq!(tx.steps[1].facts.filters[0].value.params, [1]);
    assert!(script.exclusive(a, b), "{a:?} and {b:?} are alternatives");
}

#[test]
fn triggers_run_before_and_after_the_row_with_new_as_its_values() {
    let u = units(&format!(
        "{CAP}BEGIN;\nINSERT INTO members (team_id, user_id) VALUES ($1, $2);\nDELETE FROM members WHERE team_id = 1;\nCOMMIT;\n"
    ));
    let tx = u[0]
        .transactions
        .iter()
        .find(|t| t.scope == Scope::Explicit)
        .expect("the transaction");
    let tables: Vec<(StmtKind, &str)> = tx
        .steps
        .iter()
        .map(|s| {
            let t = s.facts.writes.first().or(s.facts.reads.first());
            (s.facts.kind, t.map_or("", |t| t.name.as_str()))
        })
        .collect();
    // The count before the insert, the log after it; the delete fires neither.
    assert_eq!(
        tables,
        [
            (StmtKind::Select, "members"),
            (StmtKind::Insert, "members"),
            (StmtKind::Insert, "member_log"),
            (StmtKind::Delete, "members"),
        ]
    );
    assert_eq!(tx.steps[0].facts.filters[0].value.text, "$1");
    assert_eq!(tx.steps[2].facts.inserts[0].1.params, [2]);
    assert_eq!(tx.steps[2].host().calls.as_slice(), [tx.steps[1].span]);
    // The cap's `RAISE` is an exit between the count and the insert, taken on the count.
    let exit = u[0]
        .exits
        .iter()
        .find(|e| e.seq > tx.steps[0].seq && e.seq < tx.steps[1].seq)
        .expect("the refusal");
    assert_eq!(exit.kind, ExitKind::Return);
    let arm = *exit.branch.last().expect("its arm");
    assert!(
        u[0].conditions
            .iter()
            .any(|c| c.branch == arm && c.from == [tx.steps[0].seq])
    );
}
