//! `check-then-act`, a replace under a lock on part of its key: `DELETE .. WHERE id = .. OR
//! token = ..`, then `INSERT`, serialised by an advisory lock on the id only.

use super::db;

const DEVICES: &str = "CREATE TABLE devices (id text PRIMARY KEY, token text NOT NULL)";

fn delete(id: &str) -> String {
    format!("DELETE FROM devices WHERE id = '{id}' OR token = 't'")
}

fn insert(id: &str) -> String {
    format!("INSERT INTO devices VALUES ('{id}', 't')")
}

/// Two registrations of one token under different ids: different locks, neither `DELETE`
/// sees the other's uncommitted row, and the token ends up on two rows.
#[test]
fn check_then_act_replace_under_partial_lock() {
    let db = db(DEVICES);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(hashtext('a'))");
    b.run("SELECT pg_advisory_xact_lock(hashtext('b'))");
    a.run(&delete("a"));
    b.run(&delete("b"));
    a.run(&insert("a"));
    b.run(&insert("b"));
    a.run("COMMIT");
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT count(*) FROM devices WHERE token = 't'"),
        "2"
    );
}

/// Fix: a lock on the token too. The second registration waits, and its `DELETE` (a new
/// snapshot at READ COMMITTED) removes the first one's row.
#[test]
fn check_then_act_fix_replace_locks_every_key() {
    let db = db(DEVICES);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(hashtext('a'))");
    a.run("SELECT pg_advisory_xact_lock(hashtext('t'))");
    b.run("SELECT pg_advisory_xact_lock(hashtext('b'))");
    b.send("SELECT pg_advisory_xact_lock(hashtext('t'))");
    db.until_blocked(&b);
    a.run(&delete("a"));
    a.run(&insert("a"));
    a.run("COMMIT");
    b.wait();
    b.run(&delete("b"));
    b.run(&insert("b"));
    b.run("COMMIT");
    assert_eq!(db.query("SELECT id FROM devices WHERE token = 't'"), "b");
}
