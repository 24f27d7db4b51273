//! `row-lock-predicate-gap`, the upsert after a check: `SELECT .. FOR UPDATE` finds no row for
//! a new key, both transactions pass the check, and the second one's `ON CONFLICT DO UPDATE`
//! overwrites the row the first inserted and finished.

use super::db;

const REQUESTS: &str = "CREATE TABLE requests (key text PRIMARY KEY, status text NOT NULL)";
const CHECK: &str = "SELECT status FROM requests WHERE key = 'k' FOR UPDATE";
const CLAIM: &str = "INSERT INTO requests VALUES ('k', 'running') \
                     ON CONFLICT (key) DO UPDATE SET status = excluded.status";

/// The second claim waits for the first transaction, then puts its finished record back to
/// `running`: the work starts again.
#[test]
fn row_lock_gap_upsert_overwrites_checked_row() {
    let db = db(REQUESTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(CHECK), "");
    assert_eq!(
        b.run(CHECK),
        "",
        "nothing to lock: the second check must not wait"
    );
    a.run(CLAIM);
    b.send(CLAIM);
    db.until_blocked(&b);
    a.run("UPDATE requests SET status = 'done' WHERE key = 'k'");
    a.run("COMMIT");
    b.wait();
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT status FROM requests WHERE key = 'k'"),
        "running"
    );
}

/// Fix: the upsert tests the state again (`DO UPDATE .. WHERE`): the finished record stays.
#[test]
fn row_lock_gap_fix_upsert_rechecks_state() {
    let db = db(REQUESTS);
    let (mut a, mut b) = (db.session(), db.session());
    let claim = "INSERT INTO requests VALUES ('k', 'running') ON CONFLICT (key) \
                 DO UPDATE SET status = excluded.status WHERE requests.status <> 'done'";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(CHECK), "");
    assert_eq!(b.run(CHECK), "");
    a.run(claim);
    b.send(claim);
    db.until_blocked(&b);
    a.run("UPDATE requests SET status = 'done' WHERE key = 'k'");
    a.run("COMMIT");
    b.wait();
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT status FROM requests WHERE key = 'k'"),
        "done"
    );
}
