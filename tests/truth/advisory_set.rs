//! `lock-order-inversion`, one advisory lock per row of a key list: `SELECT
//! pg_advisory_xact_lock(k) FROM unnest($1) AS k` takes the locks in the order of the rows,
//! here the array's, and holds each one while it waits for the next.

use super::db;
use super::pg::sqlstate;

/// Runs `locks` while another session holds key 1, and says whether key 2 was already held
/// when it blocked.
fn holds_two_while_waiting_for_one(locks: &str) -> bool {
    let db = db("SELECT 1");
    let (mut a, mut c, mut d) = (db.session(), db.session(), db.session());
    c.run("BEGIN");
    c.run("SELECT pg_advisory_xact_lock(1)");
    a.run("BEGIN");
    a.send(locks);
    db.until_blocked(&a);
    let two = d.run("SELECT pg_try_advisory_xact_lock(2)");
    c.run("COMMIT");
    assert_eq!(sqlstate(&a.wait()), None);
    a.run("COMMIT");
    two.trim() == "f"
}

#[test]
fn lock_order_advisory_locks_per_row_follow_the_array() {
    assert!(holds_two_while_waiting_for_one(
        "SELECT pg_advisory_xact_lock(k) FROM unnest('{2,1}'::bigint[]) AS k"
    ));
}

#[test]
fn lock_order_fix_advisory_locks_per_row_sorted() {
    assert!(!holds_two_while_waiting_for_one(
        "SELECT pg_advisory_xact_lock(k) FROM unnest('{2,1}'::bigint[]) AS k ORDER BY k"
    ));
}
