//! `check-then-act`, a range replaced with nothing locked first: `DELETE .. WHERE number >=
//! $1`, then `INSERT` the new rows, in one READ COMMITTED transaction.

use super::db;

const BLOCKS: &str = "CREATE TABLE blocks (number bigint NOT NULL, hash text NOT NULL)";

/// Two runs for one range: the second `DELETE` neither sees nor waits for the rows the first
/// is inserting, and both sets are kept.
#[test]
fn check_then_act_range_replaced_without_a_lock() {
    let db = db(BLOCKS);
    db.query("INSERT INTO blocks VALUES (10, 'old')");
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("DELETE FROM blocks WHERE number >= 10");
    a.run("INSERT INTO blocks VALUES (10, 'a')");
    b.send("DELETE FROM blocks WHERE number >= 10");
    // b waits for the old row a deleted, not for the one a inserted.
    db.until_blocked(&b);
    a.run("COMMIT");
    b.wait();
    b.run("INSERT INTO blocks VALUES (10, 'b')");
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT count(*) FROM blocks WHERE number = 10"),
        "2"
    );
}

/// Fix: an advisory lock taken first. The second run waits, and its `DELETE` (a new snapshot
/// at READ COMMITTED) removes the first run's rows.
#[test]
fn check_then_act_fix_range_replaced_under_a_lock() {
    let db = db(BLOCKS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(hashtext('blocks'))");
    b.send("SELECT pg_advisory_xact_lock(hashtext('blocks'))");
    db.until_blocked(&b);
    a.run("DELETE FROM blocks WHERE number >= 10");
    a.run("INSERT INTO blocks VALUES (10, 'a')");
    a.run("COMMIT");
    b.wait();
    b.run("DELETE FROM blocks WHERE number >= 10");
    b.run("INSERT INTO blocks VALUES (10, 'b')");
    b.run("COMMIT");
    assert_eq!(db.query("SELECT hash FROM blocks WHERE number = 10"), "b");
}
