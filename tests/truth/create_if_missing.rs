//! `unique-violation-unhandled`, an object created when missing: `CREATE TABLE IF NOT EXISTS`
//! checks the catalog and creates in two steps.

use super::db;
use super::sqlstate;

/// Two sessions create one new table at once: the second waits on the catalog's unique index
/// for the first, and when it commits fails with 23505 instead of finding the table.
#[test]
fn create_if_not_exists_fails_the_second_creator() {
    let db = db("SELECT 1");
    let (mut a, mut b) = (db.session(), db.session());
    let create = "CREATE TABLE IF NOT EXISTS q_orders (id bigint PRIMARY KEY)";
    a.run("BEGIN");
    a.run(create);
    b.send(create);
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), Some("23505"));
}

/// Fix: a transaction-scoped advisory lock on the name first; the second session waits there,
/// then finds the table and skips it.
#[test]
fn create_if_not_exists_fix_advisory_lock() {
    let db = db("SELECT 1");
    let (mut a, mut b) = (db.session(), db.session());
    let lock = "SELECT pg_advisory_xact_lock(hashtext('q_orders'))";
    let create = "CREATE TABLE IF NOT EXISTS q_orders (id bigint PRIMARY KEY)";
    a.run("BEGIN");
    a.run(lock);
    a.run(create);
    b.run("BEGIN");
    b.send(lock);
    db.until_blocked(&b);
    a.run("COMMIT");
    b.wait();
    assert_eq!(sqlstate(&b.run(create)), None);
    assert_eq!(sqlstate(&b.run("COMMIT")), None);
}
