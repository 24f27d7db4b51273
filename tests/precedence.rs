//! Which rule reports a race that two could: a lookup and the insert it decides race in every
//! case below, and exactly one of `check-then-act` and `unique-violation-unhandled` reports it
//! (or neither, when the code handles what a unique key makes of it). Both rules read one
//! pairing of decision reads and writes, so they cannot both report one race.

use txlint::config::Config;

/// The rules that report something in `sql`, sorted, with the line of each finding.
fn findings(sql: &str) -> Vec<(&'static str, usize)> {
    let run = txlint::check_source("club.sql", sql, &Config::default());
    let mut out: Vec<(&'static str, usize)> = run
        .diagnostics
        .iter()
        .map(|d| (d.rule, run.program.files[d.span.file].line(d.span.start())))
        .collect();
    out.sort();
    out
}

/// A get-or-create on `members`, with the table's `email` column given as `email_column`, and
/// an exception block given as `handler` (empty for none).
fn club(email_column: &str, handler: &str) -> String {
    format!(
        "CREATE TABLE members (id bigserial PRIMARY KEY, {email_column});

CREATE FUNCTION join_club(p_email text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    member_id bigint;
BEGIN
    SELECT id INTO member_id FROM members WHERE email = p_email;
    IF NOT FOUND THEN
        INSERT INTO members (email) VALUES (p_email) RETURNING id INTO member_id;
    END IF;
    RETURN member_id;
{handler}END
$$;
"
    )
}

#[test]
fn no_unique_key_the_race_is_check_then_act() {
    let sql = club("email text NOT NULL", "");
    assert_eq!(findings(&sql), vec![("check-then-act", 9)]);
}

#[test]
fn a_unique_key_refuses_the_second_insert_and_the_error_leaves() {
    let sql = club("email text NOT NULL UNIQUE", "");
    assert_eq!(findings(&sql), vec![("unique-violation-unhandled", 9)]);
}

#[test]
fn a_unique_key_and_a_handler_leave_nothing_to_report() {
    let handler = "EXCEPTION WHEN unique_violation THEN
    SELECT id INTO member_id FROM members WHERE email = p_email;
    RETURN member_id;
";
    let sql = club("email text NOT NULL UNIQUE", handler);
    assert_eq!(findings(&sql), vec![]);
}

#[test]
fn with_one_rule_off_the_other_does_not_take_its_race() {
    let sql = club("email text NOT NULL UNIQUE", "");
    let config =
        Config::parse("[rules]\nunique-violation-unhandled = \"off\"\n").expect("a configuration");
    let run = txlint::check_source("club.sql", &sql, &config);
    assert!(
        run.diagnostics.is_empty(),
        "check-then-act reported a race a unique key settles: {:?}",
        run.diagnostics.iter().map(|d| d.rule).collect::<Vec<_>>()
    );
}
