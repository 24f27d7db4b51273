//! The PostgreSQL behaviour every rule rests on, shown on a real server: for each rule the race
//! happens without the fix, and each documented fix stops it. Sessions are driven one statement
//! at a time; a session that must wait is known to wait (`until_blocked`), never assumed to.
//! The rule pages cite these tests by name.

mod advisory_set;
mod create_if_missing;
mod pg;
mod picked_by_state;
mod range_replace;
mod replace_under_lock;
mod trigger_cascade;
mod upsert_after_check;
mod witness;

use pg::{Database, server, sqlstate};

const ACCOUNTS: &str = "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, version int NOT NULL DEFAULT 1); \
                        INSERT INTO accounts (id, balance) VALUES (1, 100), (2, 100)";

fn db(setup: &str) -> Database<'static> {
    server().database(setup)
}

fn balance(db: &Database, id: i32) -> String {
    db.query(&format!("SELECT balance FROM accounts WHERE id = {id}"))
}

// ---- lost-update ----

/// Two read-compute-write transactions at READ COMMITTED: the second write erases the first.
#[test]
fn lost_update_absolute_write_loses_update() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run("SELECT balance FROM accounts WHERE id = 1"), "100");
    assert_eq!(b.run("SELECT balance FROM accounts WHERE id = 1"), "100");
    a.run("UPDATE accounts SET balance = 70 WHERE id = 1");
    a.run("COMMIT");
    b.run("UPDATE accounts SET balance = 80 WHERE id = 1");
    b.run("COMMIT");
    // 100 - 30 - 20 would be 50: A's withdrawal is lost.
    assert_eq!(balance(&db, 1), "80");
}

/// `version = version + 1` without comparing it does not stop the lost update.
#[test]
fn lost_update_version_bumped_but_not_compared() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("SELECT balance, version FROM accounts WHERE id = 1");
    b.run("SELECT balance, version FROM accounts WHERE id = 1");
    a.run("UPDATE accounts SET balance = 70, version = version + 1 WHERE id = 1");
    a.run("COMMIT");
    b.run("UPDATE accounts SET balance = 80, version = version + 1 WHERE id = 1");
    b.run("COMMIT");
    assert_eq!(balance(&db, 1), "80");
}

/// Fix: compare what was read; the second write updates no row.
#[test]
fn lost_update_fix_compare_version() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run("SELECT version FROM accounts WHERE id = 1"), "1");
    assert_eq!(b.run("SELECT version FROM accounts WHERE id = 1"), "1");
    let sql = |v: i32| {
        format!(
            "UPDATE accounts SET balance = {v}, version = version + 1 WHERE id = 1 AND version = 1 RETURNING id"
        )
    };
    assert_eq!(a.run(&sql(70)), "1");
    a.run("COMMIT");
    assert_eq!(b.run(&sql(80)), "", "the stale write must update no row");
    b.run("COMMIT");
    assert_eq!(balance(&db, 1), "70");
}

/// Fix: `FOR UPDATE` on the read; the second reader waits and reads the new value.
#[test]
fn lost_update_fix_for_update() {
    locked_read("FOR UPDATE");
}

/// Fix: `FOR NO KEY UPDATE` serialises the two read-compute-writes as well.
#[test]
fn lost_update_fix_for_no_key_update() {
    locked_read("FOR NO KEY UPDATE");
}

fn locked_read(clause: &str) {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    let read = format!("SELECT balance FROM accounts WHERE id = 1 {clause}");
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(&read), "100");
    b.send(&read);
    db.until_blocked(&b);
    a.run("UPDATE accounts SET balance = 70 WHERE id = 1");
    a.run("COMMIT");
    assert_eq!(b.wait(), "70");
    b.run("UPDATE accounts SET balance = 50 WHERE id = 1");
    b.run("COMMIT");
    assert_eq!(balance(&db, 1), "50");
}

/// Fix: a relative write (`SET balance = balance - $x`) waits and applies to the new row.
#[test]
fn lost_update_fix_relative_write() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("UPDATE accounts SET balance = balance - 30 WHERE id = 1");
    b.send("UPDATE accounts SET balance = balance - 20 WHERE id = 1");
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), None);
    b.run("COMMIT");
    assert_eq!(balance(&db, 1), "50");
}

/// Fix: REPEATABLE READ refuses the stale write with 40001 (the snapshot starts at the first
/// statement, not at `BEGIN`).
#[test]
fn lost_update_fix_repeatable_read() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN ISOLATION LEVEL REPEATABLE READ");
    a.run("SELECT balance FROM accounts WHERE id = 1");
    b.run("SELECT balance FROM accounts WHERE id = 1");
    a.run("UPDATE accounts SET balance = 70 WHERE id = 1");
    a.run("COMMIT");
    assert_eq!(
        sqlstate(&b.run("UPDATE accounts SET balance = 80 WHERE id = 1")),
        Some("40001")
    );
    b.run("ROLLBACK");
    assert_eq!(balance(&db, 1), "70");
}

// ---- lock-order-inversion ----

/// Two transactions lock the same two things in opposite orders: exactly one gets 40P01.
fn opposite_order(first: [&str; 2], second: [&str; 2]) {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(sqlstate(&a.run(first[0])), None);
    assert_eq!(sqlstate(&b.run(second[0])), None);
    a.send(first[1]);
    db.until_blocked(&a);
    b.send(second[1]);
    let (ra, rb) = (b.wait(), a.wait());
    let errors: Vec<_> = [sqlstate(&ra), sqlstate(&rb)]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(errors, ["40P01"], "a: {rb:?}, b: {ra:?}");
}

/// One task, two sessions: its transaction holds a row and, before committing, it updates the
/// row on another connection. That session waits for the first, which is idle in its
/// transaction and waits for nothing PostgreSQL can see: no deadlock is detected, however long
/// past `deadlock_timeout` (100 ms here) it waits, and only the first session's end frees it.
#[test]
fn lock_order_wait_for_own_transaction_is_no_detected_deadlock() {
    let db = db(ACCOUNTS);
    let (mut tx, mut other) = (db.session(), db.session());
    tx.run("BEGIN");
    tx.run("UPDATE accounts SET balance = balance - 1 WHERE id = 1");
    other.send("UPDATE accounts SET balance = balance + 1 WHERE id = 1");
    db.until_blocked(&other);
    std::thread::sleep(std::time::Duration::from_millis(1000));
    db.until_blocked(&other);
    tx.run("COMMIT");
    assert_eq!(
        other.wait(),
        "",
        "the second session is freed by the commit, not by an error"
    );
    assert_eq!(balance(&db, 1), "100");
}

#[test]
fn lock_order_opposite_row_locks_deadlock() {
    let one = "UPDATE accounts SET balance = balance - 1 WHERE id = 1";
    let two = "UPDATE accounts SET balance = balance + 1 WHERE id = 2";
    opposite_order([one, two], [two, one]);
}

/// A row claimed with `SKIP LOCKED` is held until commit: the claim never waits, but a
/// transaction that takes the rows in the other order without skipping waits for it.
#[test]
fn lock_order_skip_locked_claim_deadlocks() {
    opposite_order(
        [
            "SELECT id FROM accounts WHERE id = 1 FOR UPDATE SKIP LOCKED",
            "UPDATE accounts SET balance = balance + 1 WHERE id = 2",
        ],
        [
            "UPDATE accounts SET balance = balance - 1 WHERE id = 2",
            "UPDATE accounts SET balance = balance - 1 WHERE id = 1",
        ],
    );
}

/// A helper function's row locks are the calling transaction's: two transfers that call one
/// helper per account in argument order deadlock like the statements themselves.
#[test]
fn lock_order_helper_calls_in_argument_order_deadlock() {
    let db = db(&format!(
        "{ACCOUNTS}; \
         CREATE FUNCTION debit(acct int, amount int) RETURNS void LANGUAGE plpgsql AS $$ \
         BEGIN UPDATE accounts SET balance = balance - amount WHERE id = acct; END $$; \
         CREATE FUNCTION credit(acct int, amount int) RETURNS void LANGUAGE plpgsql AS $$ \
         BEGIN UPDATE accounts SET balance = balance + amount WHERE id = acct; END $$"
    ));
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(sqlstate(&a.run("SELECT debit(1, 10)")), None);
    assert_eq!(sqlstate(&b.run("SELECT debit(2, 10)")), None);
    a.send("SELECT credit(2, 10)");
    db.until_blocked(&a);
    b.send("SELECT credit(1, 10)");
    let (rb, ra) = (b.wait(), a.wait());
    let errors: Vec<_> = [sqlstate(&ra), sqlstate(&rb)]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(errors, ["40P01"], "a: {ra:?}, b: {rb:?}");
}

/// A loop over a query's rows locks another table's rows in the order the query returns them:
/// with no `ORDER BY`, the order the entries were stored in. Two settlements whose entries
/// name the same accounts in opposite orders deadlock; ordering the query by the account stops
/// it. Session `c` holds account 3 so that `a` waits inside its loop, holding account 1, while
/// `b` takes account 2 and waits for 1.
fn settle_batches(order_by: &str) -> Vec<String> {
    let db = db(&format!(
        "CREATE TABLE balances (account_id int PRIMARY KEY, amount int NOT NULL); \
         INSERT INTO balances VALUES (1, 0), (2, 0), (3, 0); \
         CREATE TABLE entries (batch text, account_id int, amount int); \
         INSERT INTO entries VALUES ('a', 1, 1), ('a', 3, 1), ('a', 2, 1), ('b', 2, 1), ('b', 1, 1); \
         CREATE FUNCTION settle(b text) RETURNS void LANGUAGE plpgsql AS $$ \
         DECLARE e record; BEGIN \
         FOR e IN SELECT account_id, amount FROM entries WHERE batch = b {order_by} LOOP \
         UPDATE balances SET amount = amount + e.amount WHERE account_id = e.account_id; \
         END LOOP; END $$"
    ));
    let (mut a, mut b, mut c) = (db.session(), db.session(), db.session());
    c.run("BEGIN");
    c.run("UPDATE balances SET amount = amount WHERE account_id = 3");
    a.send("SELECT settle('a')");
    db.until_blocked(&a);
    b.send("SELECT settle('b')");
    db.until_blocked(&b);
    c.run("COMMIT");
    let (ra, rb) = (a.wait(), b.wait());
    [sqlstate(&ra), sqlstate(&rb)]
        .into_iter()
        .flatten()
        .map(str::to_string)
        .collect()
}

#[test]
fn lock_order_query_loop_unordered_deadlocks() {
    assert_eq!(settle_batches(""), ["40P01"]);
}

#[test]
fn lock_order_fix_query_loop_ordered() {
    assert_eq!(settle_batches("ORDER BY account_id"), Vec::<String>::new());
}

/// A multi-row `UPDATE` over a key set locks rows in its scan's order, not the array's: blocked
/// on row 1 (held by `c`), the `UPDATE .. = ANY('{2,1}')` holds nothing yet, so row 2 is free.
/// Two runs of one statement under one plan take their rows in one order.
#[test]
fn lock_order_update_key_set_not_in_array_order() {
    let db = db(ACCOUNTS);
    let (mut a, mut c, mut d) = (db.session(), db.session(), db.session());
    c.run("BEGIN");
    c.run("UPDATE accounts SET balance = balance WHERE id = 1");
    a.send("UPDATE accounts SET balance = balance + 1 WHERE id = ANY('{2,1}')");
    db.until_blocked(&a);
    assert_eq!(
        d.run("SELECT id FROM accounts WHERE id = 2 FOR UPDATE NOWAIT"),
        "2"
    );
    c.run("COMMIT");
    assert_eq!(sqlstate(&a.wait()), None);
}

/// A multi-row upsert locks the rows it conflicts with in the order of its `VALUES` rows, unlike
/// the key-set `UPDATE` above: blocked on row 1 (held by `c`), the upsert of rows 2 then 1
/// already holds row 2, which a third session cannot lock. Two runs given the rows in opposite
/// orders (a `HashMap` iterated) take them in opposite orders.
#[test]
fn lock_order_multi_row_upsert_locks_in_row_order() {
    let db = db(ACCOUNTS);
    let (mut a, mut c, mut d) = (db.session(), db.session(), db.session());
    c.run("BEGIN");
    c.run("UPDATE accounts SET balance = balance WHERE id = 1");
    a.send(
        "INSERT INTO accounts (id, balance) VALUES (2, 1), (1, 1) \
         ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + excluded.balance",
    );
    db.until_blocked(&a);
    let held = d.run("SELECT id FROM accounts WHERE id = 2 FOR UPDATE NOWAIT");
    assert_eq!(sqlstate(&held), Some("55P03"), "{held}");
    c.run("COMMIT");
    assert_eq!(sqlstate(&a.wait()), None);
    assert_eq!(balance(&db, 2), "101");
}

#[test]
fn lock_order_opposite_advisory_locks_deadlock() {
    let one = "SELECT pg_advisory_xact_lock(1)";
    let two = "SELECT pg_advisory_xact_lock(2)";
    opposite_order([one, two], [two, one]);
}

/// Fix: the same order everywhere; the second transaction waits and then goes on.
#[test]
fn lock_order_fix_same_order() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    let one = "UPDATE accounts SET balance = balance - 1 WHERE id = 1";
    let two = "UPDATE accounts SET balance = balance + 1 WHERE id = 2";
    a.run("BEGIN");
    b.run("BEGIN");
    a.run(one);
    b.send(one);
    db.until_blocked(&b);
    a.run(two);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), None);
    assert_eq!(sqlstate(&b.run(two)), None);
    b.run("COMMIT");
    assert_eq!(balance(&db, 1), "98");
}

/// Fix: rows locked in one statement in key order; the other order never happens.
#[test]
fn lock_order_fix_one_statement_ordered() {
    let db = db(ACCOUNTS);
    let (mut a, mut b) = (db.session(), db.session());
    let lock = "SELECT id FROM accounts WHERE id IN (2, 1) ORDER BY id FOR UPDATE";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(lock), "1\n2");
    b.send(lock);
    db.until_blocked(&b);
    a.run("UPDATE accounts SET balance = balance + 1 WHERE id = 2");
    a.run("UPDATE accounts SET balance = balance - 1 WHERE id = 1");
    a.run("COMMIT");
    assert_eq!(b.wait(), "1\n2");
    b.run("COMMIT");
}

// ---- xact-lock-outside-transaction ----

fn holds_advisory(db: &Database, key: i32) -> bool {
    let other = db.query(&format!("SELECT pg_try_advisory_xact_lock({key})"));
    other == "f"
}

/// In autocommit a transaction-scoped lock ends with its statement.
#[test]
fn xact_lock_autocommit_released_with_statement() {
    let db = db("");
    let mut a = db.session();
    a.run("SELECT pg_advisory_xact_lock(42)");
    assert!(!holds_advisory(&db, 42), "the lock outlived its statement");
}

/// A `FOR UPDATE` in autocommit locks nothing once it returns.
#[test]
fn xact_lock_for_update_autocommit_released() {
    let db = db(ACCOUNTS);
    let mut a = db.session();
    a.run("SELECT id FROM accounts WHERE id = 1 FOR UPDATE");
    let mut b = db.session();
    assert_eq!(
        sqlstate(&b.run("SELECT id FROM accounts WHERE id = 1 FOR UPDATE NOWAIT")),
        None
    );
}

/// Within one simple-query message the lock lasts to the message's end, and no longer.
#[test]
fn xact_lock_fix_same_message() {
    let db = db("");
    let mut a = db.session();
    let held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND pid = pg_backend_pid()";
    assert_eq!(
        a.run(&format!("SELECT pg_advisory_xact_lock(42) \\; {held}")),
        "\n1"
    );
    assert_eq!(a.run(held), "0");
}

/// Fix: inside `BEGIN .. COMMIT` the lock is held until the transaction ends.
#[test]
fn xact_lock_fix_transaction() {
    let db = db("");
    let mut a = db.session();
    a.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(42)");
    assert!(holds_advisory(&db, 42));
    a.run("COMMIT");
    assert!(!holds_advisory(&db, 42));
}

/// A `DO` body's (or a function's) lock lasts until the calling transaction ends.
#[test]
fn xact_lock_fix_routine_body() {
    let db = db("");
    let mut a = db.session();
    a.run("BEGIN");
    a.run("DO $$ BEGIN PERFORM pg_advisory_xact_lock(42); END $$");
    assert!(holds_advisory(&db, 42));
    a.run("COMMIT");
    assert!(!holds_advisory(&db, 42));
}

/// `ROLLBACK TO SAVEPOINT` releases locks taken after the savepoint; `RELEASE` keeps them.
#[test]
fn xact_lock_rollback_to_savepoint_releases() {
    let db = db("");
    let mut a = db.session();
    a.run("BEGIN");
    a.run("SAVEPOINT s");
    a.run("SELECT pg_advisory_xact_lock(42)");
    a.run("ROLLBACK TO SAVEPOINT s");
    assert!(!holds_advisory(&db, 42), "ROLLBACK TO kept the lock");
    a.run("SAVEPOINT t");
    a.run("SELECT pg_advisory_xact_lock(43)");
    a.run("RELEASE SAVEPOINT t");
    assert!(holds_advisory(&db, 43), "RELEASE dropped the lock");
    a.run("COMMIT");
}

/// A PL/pgSQL block that catches an error is a savepoint: its locks go with it.
#[test]
fn xact_lock_exception_block_releases() {
    let db = db("");
    let mut a = db.session();
    a.run("BEGIN");
    a.run(
        "DO $$ BEGIN BEGIN PERFORM pg_advisory_xact_lock(42); RAISE EXCEPTION 'x'; \
         EXCEPTION WHEN OTHERS THEN NULL; END; END $$",
    );
    assert!(!holds_advisory(&db, 42));
    a.run("COMMIT");
}

/// A procedure that commits ends the caller's transaction mid-`CALL`, and its locks with it.
#[test]
fn xact_lock_procedure_commit_releases() {
    let db = db("CREATE TABLE seen (at text, n bigint)");
    let held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 42 AND pid = pg_backend_pid()";
    db.query(&format!(
        "CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN \
         PERFORM pg_advisory_xact_lock(42); \
         INSERT INTO seen SELECT 'before', ({held}); COMMIT; \
         INSERT INTO seen SELECT 'after', ({held}); END $$"
    ));
    let mut a = db.session();
    assert_eq!(sqlstate(&a.run("CALL p()")), None);
    assert_eq!(
        db.query("SELECT at || '=' || n FROM seen ORDER BY at DESC"),
        "before=1\nafter=0"
    );
}

// ---- session-lock-on-pool ----

/// A session lock survives `ROLLBACK` and another session cannot unlock it.
#[test]
fn session_lock_survives_rollback_and_foreign_unlock() {
    let db = db("");
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    a.run("SELECT pg_advisory_lock(42)");
    a.run("ROLLBACK");
    assert_eq!(
        b.run("SELECT pg_advisory_unlock(42)"),
        "WARNING:  01000\nf",
        "another session's unlock fails with a warning"
    );
    assert_eq!(b.run("SELECT pg_try_advisory_lock(42)"), "f");
}

/// Session locks stack: two locks need two unlocks.
#[test]
fn session_lock_stacks() {
    let db = db("");
    let (mut a, mut b) = (db.session(), db.session());
    a.run("SELECT pg_advisory_lock(42)");
    a.run("SELECT pg_advisory_lock(42)");
    assert_eq!(a.run("SELECT pg_advisory_unlock(42)"), "t");
    assert_eq!(b.run("SELECT pg_try_advisory_lock(42)"), "f");
    assert_eq!(a.run("SELECT pg_advisory_unlock(42)"), "t");
    assert_eq!(b.run("SELECT pg_try_advisory_lock(42)"), "t");
}

/// `pg_advisory_unlock_all()` leaves `_xact_` locks, and unlocking an `_xact_` key fails.
#[test]
fn session_unlock_does_not_touch_xact_locks() {
    let db = db("");
    let mut a = db.session();
    a.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(42)");
    assert_eq!(a.run("SELECT pg_advisory_unlock(42)"), "WARNING:  01000\nf");
    a.run("SELECT pg_advisory_unlock_all()");
    assert!(holds_advisory(&db, 42));
    a.run("COMMIT");
}

// ---- row-lock-predicate-gap ----

const MEMBERS: &str = "CREATE TABLE members (email text NOT NULL)";

/// Check-then-insert under `FOR UPDATE`: no row, nothing locked, both insert.
#[test]
fn row_lock_gap_for_update_on_no_row() {
    let db = db(MEMBERS);
    let (mut a, mut b) = (db.session(), db.session());
    let check = "SELECT email FROM members WHERE email = 'x' FOR UPDATE";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(check), "");
    assert_eq!(b.run(check), "", "the second check must not wait");
    a.run("INSERT INTO members VALUES ('x')");
    a.run("COMMIT");
    b.run("INSERT INTO members VALUES ('x')");
    b.run("COMMIT");
    assert_eq!(db.query("SELECT count(*) FROM members"), "2");
}

/// Fix: an advisory transaction lock on the key, at READ COMMITTED: the second check waits and
/// then sees the row.
#[test]
fn row_lock_gap_fix_advisory_lock_read_committed() {
    let db = db(MEMBERS);
    let (mut a, mut b) = (db.session(), db.session());
    let lock = "SELECT pg_advisory_xact_lock(hashtext('x'))";
    let check = "SELECT count(*) FROM members WHERE email = 'x'";
    a.run("BEGIN");
    b.run("BEGIN");
    a.run(lock);
    assert_eq!(a.run(check), "0");
    b.send(lock);
    db.until_blocked(&b);
    a.run("INSERT INTO members VALUES ('x')");
    a.run("COMMIT");
    b.wait();
    assert_eq!(b.run(check), "1");
    b.run("COMMIT");
}

/// Under REPEATABLE READ the advisory lock does not help: the snapshot predates the wait.
#[test]
fn row_lock_gap_advisory_lock_useless_at_repeatable_read() {
    let db = db(MEMBERS);
    let (mut a, mut b) = (db.session(), db.session());
    let lock = "SELECT pg_advisory_xact_lock(hashtext('x'))";
    let check = "SELECT count(*) FROM members WHERE email = 'x'";
    a.run("BEGIN ISOLATION LEVEL REPEATABLE READ");
    b.run("BEGIN ISOLATION LEVEL REPEATABLE READ");
    a.run(lock);
    b.send(lock);
    db.until_blocked(&b);
    assert_eq!(a.run(check), "0");
    a.run("INSERT INTO members VALUES ('x')");
    a.run("COMMIT");
    b.wait();
    assert_eq!(b.run(check), "0", "the snapshot was taken before the wait");
    b.run("COMMIT");
}

/// Fix: a unique key; the second insert fails with 23505 (or `ON CONFLICT` settles it).
#[test]
fn row_lock_gap_fix_unique_key() {
    let db = db("CREATE TABLE members (email text PRIMARY KEY)");
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("INSERT INTO members VALUES ('x')");
    b.send("INSERT INTO members VALUES ('x') ON CONFLICT DO NOTHING RETURNING email");
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(b.wait(), "", "the conflicting insert must do nothing");
    assert_eq!(
        sqlstate(&b.run("INSERT INTO members VALUES ('x')")),
        Some("23505")
    );
    b.run("ROLLBACK");
}

/// `unique-violation-unhandled`: get-or-create behind a unique key. Both lookups find nothing,
/// both insert; the second insert waits for the first transaction and then fails with 23505,
/// which is what its caller gets unless the code handles it.
#[test]
fn unique_key_fails_the_second_get_or_create() {
    let db = db("CREATE TABLE users (id serial PRIMARY KEY, email text UNIQUE)");
    let (mut a, mut b) = (db.session(), db.session());
    let find = "SELECT count(*) FROM users WHERE email = 'x'";
    let insert = "INSERT INTO users (email) VALUES ('x')";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(find), "0");
    assert_eq!(b.run(find), "0");
    a.run(insert);
    b.send(insert);
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), Some("23505"));
    b.run("ROLLBACK");
    assert_eq!(db.query("SELECT count(*) FROM users"), "1");
}

/// The same in one statement: `INSERT .. WHERE NOT EXISTS` does not wait before its check, so
/// the second one also fails with 23505 instead of inserting nothing.
#[test]
fn unique_key_fails_the_second_insert_where_not_exists() {
    let db = db("CREATE TABLE users (id serial PRIMARY KEY, email text UNIQUE)");
    let (mut a, mut b) = (db.session(), db.session());
    let insert = "INSERT INTO users (email) SELECT 'x' WHERE NOT EXISTS (SELECT 1 FROM users WHERE email = 'x')";
    a.run("BEGIN");
    a.run(insert);
    b.send(insert);
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), Some("23505"));
}

/// Fix: SERIALIZABLE; of two check-then-inserts one fails with 40001.
#[test]
fn row_lock_gap_fix_serializable() {
    let db = db(MEMBERS);
    let (mut a, mut b) = (db.session(), db.session());
    let check = "SELECT count(*) FROM members WHERE email = 'x'";
    a.run("BEGIN ISOLATION LEVEL SERIALIZABLE");
    b.run("BEGIN ISOLATION LEVEL SERIALIZABLE");
    assert_eq!(a.run(check), "0");
    assert_eq!(b.run(check), "0");
    let mut errors: Vec<String> = Vec::new();
    for out in [
        a.run("INSERT INTO members VALUES ('x')"),
        b.run("INSERT INTO members VALUES ('x')"),
        a.run("COMMIT"),
        b.run("COMMIT"),
    ] {
        errors.extend(sqlstate(&out).map(str::to_string));
    }
    assert_eq!(errors, ["40001"]);
    assert_eq!(db.query("SELECT count(*) FROM members"), "1");
}

const PARENT_CHILD: &str = "CREATE TABLE parents (id int PRIMARY KEY, note text); \
     CREATE TABLE children (id int PRIMARY KEY, parent int REFERENCES parents, state text); \
     INSERT INTO parents VALUES (1, ''); INSERT INTO children VALUES (1, 1, 'new')";

/// A parent locked `FOR UPDATE` does not stop an `UPDATE` of a child's state...
#[test]
fn row_lock_gap_parent_lock_does_not_block_child_update() {
    let db = db(PARENT_CHILD);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    a.run("SELECT id FROM parents WHERE id = 1 FOR UPDATE");
    b.run("BEGIN");
    assert_eq!(
        b.run("UPDATE children SET state = 'done' WHERE parent = 1 RETURNING id"),
        "1"
    );
    b.run("COMMIT");
    a.run("COMMIT");
}

/// ... but does block a child `INSERT` (the foreign-key check takes `FOR KEY SHARE`), which
/// `FOR NO KEY UPDATE` on the parent does not.
#[test]
fn row_lock_gap_parent_lock_blocks_child_insert_only_for_update() {
    let db = db(PARENT_CHILD);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    a.run("SELECT id FROM parents WHERE id = 1 FOR UPDATE");
    b.send("INSERT INTO children VALUES (2, 1, 'new')");
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), None);
    a.run("BEGIN");
    a.run("SELECT id FROM parents WHERE id = 1 FOR NO KEY UPDATE");
    assert_eq!(
        sqlstate(&b.run("INSERT INTO children VALUES (3, 1, 'new')")),
        None
    );
    a.run("COMMIT");
}

// ---- check-then-act ----

const ROTA: &str = "CREATE TABLE rota (doctor text PRIMARY KEY, on_call bool NOT NULL); \
     INSERT INTO rota VALUES ('a', true), ('b', true); \
     CREATE TABLE wards (id int PRIMARY KEY); INSERT INTO wards VALUES (1)";

/// Each doctor leaves the rota if someone else is on call, decided from `count(*)` after
/// taking `guard` (which the second waits for). Returns the doctors left on call, and the
/// SQLSTATEs the two sessions met.
fn leave_rota(guard: &str) -> (String, Vec<String>) {
    let db = db(ROTA);
    let (mut a, mut b) = (db.session(), db.session());
    let count = "SELECT count(*) FROM rota WHERE on_call";
    let mut errors = Vec::new();
    let mut note = |out: String| {
        if let Some(s) = sqlstate(&out) {
            errors.push(s.to_string());
        }
    };
    a.run("BEGIN");
    b.run("BEGIN");
    a.run(guard);
    b.send(guard);
    db.until_blocked(&b);
    assert_eq!(a.run(count), "2");
    note(a.run("UPDATE rota SET on_call = false WHERE doctor = 'a'"));
    note(a.run("COMMIT"));
    note(b.wait());
    // B decides from what it reads: it leaves only if someone else is on call.
    if b.run(count) == "2" {
        note(b.run("UPDATE rota SET on_call = false WHERE doctor = 'b'"));
    }
    note(b.run("COMMIT"));
    (db.query("SELECT count(*) FROM rota WHERE on_call"), errors)
}

/// Both read that two doctors are on call, both leave: nobody is left.
#[test]
fn check_then_act_write_skew_read_committed() {
    let db = db(ROTA);
    let (mut a, mut b) = (db.session(), db.session());
    let count = "SELECT count(*) FROM rota WHERE on_call";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(count), "2");
    assert_eq!(b.run(count), "2");
    a.run("UPDATE rota SET on_call = false WHERE doctor = 'a'");
    a.run("COMMIT");
    b.run("UPDATE rota SET on_call = false WHERE doctor = 'b'");
    b.run("COMMIT");
    assert_eq!(db.query("SELECT count(*) FROM rota WHERE on_call"), "0");
}

#[test]
fn check_then_act_write_skew_repeatable_read_commits_both() {
    let db = db(ROTA);
    let (mut a, mut b) = (db.session(), db.session());
    let count = "SELECT count(*) FROM rota WHERE on_call";
    a.run("BEGIN ISOLATION LEVEL REPEATABLE READ");
    b.run("BEGIN ISOLATION LEVEL REPEATABLE READ");
    assert_eq!(a.run(count), "2");
    assert_eq!(b.run(count), "2");
    a.run("UPDATE rota SET on_call = false WHERE doctor = 'a'");
    a.run("COMMIT");
    assert_eq!(
        sqlstate(&b.run("UPDATE rota SET on_call = false WHERE doctor = 'b'")),
        None
    );
    assert_eq!(sqlstate(&b.run("COMMIT")), None);
    assert_eq!(db.query("SELECT count(*) FROM rota WHERE on_call"), "0");
}

/// Fix: SERIALIZABLE fails one of the two with 40001.
#[test]
fn check_then_act_fix_serializable() {
    let db = db(ROTA);
    let (mut a, mut b) = (db.session(), db.session());
    let count = "SELECT count(*) FROM rota WHERE on_call";
    a.run("BEGIN ISOLATION LEVEL SERIALIZABLE");
    b.run("BEGIN ISOLATION LEVEL SERIALIZABLE");
    assert_eq!(a.run(count), "2");
    assert_eq!(b.run(count), "2");
    a.run("UPDATE rota SET on_call = false WHERE doctor = 'a'");
    let mut errors: Vec<String> = Vec::new();
    for out in [
        a.run("COMMIT"),
        b.run("UPDATE rota SET on_call = false WHERE doctor = 'b'"),
        b.run("COMMIT"),
    ] {
        errors.extend(sqlstate(&out).map(str::to_string));
    }
    assert_eq!(errors, ["40001"]);
    assert_eq!(db.query("SELECT count(*) FROM rota WHERE on_call"), "1");
}

/// Fix: a guard row that every writer locks first; the second decision is made after the
/// first write commits.
#[test]
fn check_then_act_fix_guard_row_lock() {
    let (left, errors) = leave_rota("SELECT id FROM wards WHERE id = 1 FOR UPDATE");
    assert_eq!((left.as_str(), errors.len()), ("1", 0));
}

/// Fix: an advisory transaction lock on the decision's key, at READ COMMITTED.
#[test]
fn check_then_act_fix_advisory_lock() {
    let (left, errors) = leave_rota("SELECT pg_advisory_xact_lock(7)");
    assert_eq!((left.as_str(), errors.len()), ("1", 0));
}

/// `max + 1` numbering with no unique key: both transactions take the same number.
#[test]
fn check_then_act_max_plus_one_duplicates() {
    let db = db("CREATE TABLE invoices (n int NOT NULL)");
    let (mut a, mut b) = (db.session(), db.session());
    let next = "SELECT coalesce(max(n), 0) + 1 FROM invoices";
    a.run("BEGIN");
    b.run("BEGIN");
    let (na, nb) = (a.run(next), b.run(next));
    a.run(&format!("INSERT INTO invoices VALUES ({na})"));
    b.run(&format!("INSERT INTO invoices VALUES ({nb})"));
    a.run("COMMIT");
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT count(DISTINCT n) || '/' || count(*) FROM invoices"),
        "1/2"
    );
}

const JOBS: &str = "CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL, worker text); \
     INSERT INTO jobs VALUES (1, 'queued', NULL), (2, 'queued', NULL)";

/// Two workers run `claim` (with `$w` for the worker): what each claimed, and the job rows.
fn claim_twice(claim: &str) -> (String, String, String) {
    let db = db(JOBS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    let ra = a.run(&claim.replace("$w", "'a'"));
    b.send(&claim.replace("$w", "'b'"));
    // Job 1 is A's until it commits: B, picking job 1 too, must wait (unless it skips
    // locked rows, and then it does not wait at all).
    if ra == "1" && !claim.contains("SKIP LOCKED") {
        db.until_blocked(&b);
    }
    a.run("COMMIT");
    let rb = b.wait();
    b.run("COMMIT");
    (
        ra,
        rb,
        db.query("SELECT id || ':' || state || ':' || coalesce(worker, '') FROM jobs ORDER BY id"),
    )
}

/// A one-statement claim whose subquery takes no lock: the waiting `UPDATE` re-checks only
/// `id = 1` against the row the first wrote, and claims job 1 again.
#[test]
fn check_then_act_one_statement_claim_claims_twice() {
    let (a, b, jobs) = claim_twice(
        "UPDATE jobs SET state = 'running', worker = $w \
         WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1) RETURNING id",
    );
    assert_eq!((a.as_str(), b.as_str()), ("1", "1"), "both claimed job 1");
    assert_eq!(jobs, "1:running:b\n2:queued:");
}

/// Fix: `FOR UPDATE SKIP LOCKED` in the subquery; the second worker takes job 2.
#[test]
fn check_then_act_one_statement_claim_fix_skip_locked() {
    let (a, b, jobs) = claim_twice(
        "UPDATE jobs SET state = 'running', worker = $w WHERE id = \
         (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
    );
    assert_eq!((a.as_str(), b.as_str()), ("1", "2"));
    assert_eq!(jobs, "1:running:a\n2:running:b");
}

/// Fix: the state tested again outside the subquery; the waiting claim matches no row.
#[test]
fn check_then_act_one_statement_claim_fix_repeated_test() {
    let (a, b, jobs) = claim_twice(
        "UPDATE jobs SET state = 'running', worker = $w \
         WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1) \
         AND state = 'queued' RETURNING id",
    );
    assert_eq!((a.as_str(), b.as_str()), ("1", ""));
    assert_eq!(jobs, "1:running:a\n2:queued:");
}

/// Fix: an advisory transaction lock taken first (READ COMMITTED): the second claim waits for
/// it, and its statement's snapshot, taken after the wait, sees job 1 claimed.
#[test]
fn check_then_act_one_statement_claim_fix_advisory_lock() {
    let db = db(JOBS);
    let (mut a, mut b) = (db.session(), db.session());
    let lock = "SELECT pg_advisory_xact_lock(hashtext('jobs'))";
    let claim = |w: &str| {
        format!(
            "UPDATE jobs SET state = 'running', worker = '{w}' \
             WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1) RETURNING id"
        )
    };
    a.run("BEGIN");
    b.run("BEGIN");
    a.run(lock);
    b.send(lock);
    db.until_blocked(&b);
    assert_eq!(a.run(&claim("a")), "1");
    a.run("COMMIT");
    b.wait();
    assert_eq!(b.run(&claim("b")), "2");
    b.run("COMMIT");
}

/// A state transition decided on a plain read (READ COMMITTED): both workers read `queued`;
/// the second `UPDATE .. WHERE id = 1` waits for the first, then re-checks only `id = 1` and
/// starts the job again. With `write` testing the state as well, it changes no row.
fn start_twice(write: &str) -> (String, String, String) {
    let db = db(JOBS);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run("SELECT state FROM jobs WHERE id = 1"), "queued");
    assert_eq!(b.run("SELECT state FROM jobs WHERE id = 1"), "queued");
    let a_started = a.run(&write.replace("$w", "a"));
    b.send(&write.replace("$w", "b"));
    db.until_blocked(&b);
    a.run("COMMIT");
    let b_started = b.wait();
    b.run("COMMIT");
    (
        a_started,
        b_started,
        db.query("SELECT worker FROM jobs WHERE id = 1"),
    )
}

#[test]
fn check_then_act_status_transition_starts_twice() {
    let (a, b, worker) =
        start_twice("UPDATE jobs SET state = 'running', worker = '$w' WHERE id = 1 RETURNING id");
    assert_eq!((a.as_str(), b.as_str(), worker.as_str()), ("1", "1", "b"));
}

/// A weaker test than the decision: `state < 'succeeded'` lets `running` through as well as
/// the `queued` both workers read, so the second worker still starts the job.
#[test]
fn check_then_act_stale_state_predicate_starts_twice() {
    let (a, b, worker) = start_twice(
        "UPDATE jobs SET state = 'running', worker = '$w' WHERE id = 1 AND state < 'succeeded' RETURNING id",
    );
    assert_eq!((a.as_str(), b.as_str(), worker.as_str()), ("1", "1", "b"));
}

/// Fix: the write tests the state it decided on; the second worker's `UPDATE` matches no row.
#[test]
fn check_then_act_status_transition_fix_state_tested() {
    let (a, b, worker) = start_twice(
        "UPDATE jobs SET state = 'running', worker = '$w' WHERE id = 1 AND state = 'queued' RETURNING id",
    );
    assert_eq!((a.as_str(), b.as_str(), worker.as_str()), ("1", "", "a"));
}

/// `INSERT .. SELECT .. WHERE NOT EXISTS` with no unique key: neither sees the other's
/// uncommitted row, both insert.
#[test]
fn check_then_act_insert_where_not_exists_duplicates() {
    let (a, b, rows) = register_twice(MEMBERS, None);
    assert_eq!((a.as_str(), b.as_str(), rows.as_str()), ("x", "x", "2"));
}

/// Fix: an advisory transaction lock on the key first (READ COMMITTED): the second statement
/// waits, then its `NOT EXISTS` sees the committed row.
#[test]
fn check_then_act_insert_where_not_exists_fix_advisory_lock() {
    let (a, b, rows) = register_twice(MEMBERS, Some("SELECT pg_advisory_xact_lock(hashtext('x'))"));
    assert_eq!((a.as_str(), b.as_str(), rows.as_str()), ("x", "", "1"));
}

/// Fix: a unique key; with `ON CONFLICT DO NOTHING` the second insert waits and inserts nothing.
#[test]
fn check_then_act_insert_where_not_exists_fix_unique_key() {
    let db = db("CREATE TABLE members (email text PRIMARY KEY)");
    let (mut a, mut b) = (db.session(), db.session());
    let insert = "INSERT INTO members (email) SELECT 'x' WHERE NOT EXISTS \
                  (SELECT 1 FROM members WHERE email = 'x') ON CONFLICT DO NOTHING RETURNING email";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(insert), "x");
    b.send(insert);
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(b.wait(), "");
    b.run("COMMIT");
}

/// Two sessions register `x` with `INSERT .. WHERE NOT EXISTS`, each after `lock` if given:
/// what each inserted, and the rows in the end.
fn register_twice(setup: &str, lock: Option<&str>) -> (String, String, String) {
    let db = db(setup);
    let (mut a, mut b) = (db.session(), db.session());
    let insert = "INSERT INTO members (email) SELECT 'x' WHERE NOT EXISTS \
                  (SELECT 1 FROM members WHERE email = 'x') RETURNING email";
    a.run("BEGIN");
    b.run("BEGIN");
    if let Some(l) = lock {
        a.run(l);
        b.send(l);
        db.until_blocked(&b);
    }
    let ra = a.run(insert);
    if lock.is_none() {
        // Nothing makes B wait: it inserts before A commits.
        let rb = b.run(insert);
        a.run("COMMIT");
        b.run("COMMIT");
        return (ra, rb, db.query("SELECT count(*) FROM members"));
    }
    a.run("COMMIT");
    b.wait();
    let rb = b.run(insert);
    b.run("COMMIT");
    (ra, rb, db.query("SELECT count(*) FROM members"))
}

/// Get-or-create: both look the name up, find nothing, and insert it.
#[test]
fn check_then_act_get_or_create_duplicates() {
    let db = db(MEMBERS);
    let (mut a, mut b) = (db.session(), db.session());
    let lookup = "SELECT email FROM members WHERE email = 'x'";
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(a.run(lookup), "");
    assert_eq!(b.run(lookup), "");
    a.run("INSERT INTO members VALUES ('x')");
    b.run("INSERT INTO members VALUES ('x')");
    a.run("COMMIT");
    b.run("COMMIT");
    assert_eq!(db.query("SELECT count(*) FROM members"), "2");
}

/// A guard read `FOR SHARE` waits for a concurrent update of the row and sees the new value; a
/// plain read does not wait and sees the old one.
#[test]
fn check_then_act_guard_for_share_sees_update() {
    let db = db(ROTA);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    a.run("UPDATE rota SET on_call = false WHERE doctor = 'a'");
    assert_eq!(b.run("SELECT on_call FROM rota WHERE doctor = 'a'"), "t");
    b.send("SELECT on_call FROM rota WHERE doctor = 'a' FOR SHARE");
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(b.wait(), "f");
}

/// Every core rule's page cites this suite, and every test it cites exists here (in this file
/// or a module of it).
#[test]
fn rule_pages_cite_this_suite() {
    let suite = [
        include_str!("main.rs"),
        include_str!("advisory_set.rs"),
        include_str!("picked_by_state.rs"),
        include_str!("range_replace.rs"),
        include_str!("replace_under_lock.rs"),
        include_str!("trigger_cascade.rs"),
        include_str!("upsert_after_check.rs"),
    ]
    .concat();
    for rule in [
        "lost-update",
        "lock-order-inversion",
        "xact-lock-outside-transaction",
        "session-lock-on-pool",
        "row-lock-predicate-gap",
        "check-then-act",
    ] {
        let page = std::fs::read_to_string(format!("rules/{rule}.md")).expect("rule page");
        let cited: Vec<&str> = page
            .split("`truth::")
            .skip(1)
            .filter_map(|rest| rest.split('`').next())
            .collect();
        assert!(!cited.is_empty(), "rules/{rule}.md cites no truth test");
        for path in cited {
            let name = path.rsplit("::").next().unwrap_or(path);
            assert!(
                suite.contains(&format!("fn {name}(")),
                "rules/{rule}.md cites truth::{path}, which tests/truth does not have"
            );
        }
    }
}

/// A `BEFORE INSERT` trigger that counts a team's members and refuses one over the cap (here
/// 1): two sessions each count 0, neither sees the other's uncommitted row, and both rows are
/// committed (the primary key does not help: the rows differ).
const TEAM: &str = "CREATE TABLE members (team_id int NOT NULL, user_id int NOT NULL, PRIMARY KEY (team_id, user_id)); \
    CREATE FUNCTION cap() RETURNS trigger LANGUAGE plpgsql AS $$ \
    DECLARE n int; BEGIN LOCK_FIRST \
    SELECT count(*) INTO n FROM members WHERE team_id = NEW.team_id; \
    IF n >= 1 THEN RAISE EXCEPTION 'team % is full', NEW.team_id; END IF; RETURN NEW; END $$; \
    CREATE TRIGGER cap BEFORE INSERT ON members FOR EACH ROW EXECUTE FUNCTION cap()";

#[test]
fn check_then_act_trigger_cap_is_exceeded() {
    let db = db(&TEAM.replace("LOCK_FIRST", ""));
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(sqlstate(&a.run("INSERT INTO members VALUES (1, 1)")), None);
    assert_eq!(sqlstate(&b.run("INSERT INTO members VALUES (1, 2)")), None);
    a.run("COMMIT");
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT count(*) FROM members WHERE team_id = 1"),
        "2"
    );
}

/// Fix: the trigger takes `pg_advisory_xact_lock` on the team first; the second session waits,
/// then counts the first one's row and is refused.
#[test]
fn check_then_act_trigger_fix_advisory_lock() {
    let db = db(&TEAM.replace("LOCK_FIRST", "PERFORM pg_advisory_xact_lock(NEW.team_id);"));
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    assert_eq!(sqlstate(&a.run("INSERT INTO members VALUES (1, 1)")), None);
    b.send("INSERT INTO members VALUES (1, 2)");
    db.until_blocked(&b);
    a.run("COMMIT");
    assert_eq!(sqlstate(&b.wait()), Some("P0001"));
    b.run("ROLLBACK");
    assert_eq!(
        db.query("SELECT count(*) FROM members WHERE team_id = 1"),
        "1"
    );
}

/// An advisory lock on one key does not serialise a check that other keys also match: two
/// sessions lock different ids, both find no invite with the token, and both insert it.
const INVITES: &str = "CREATE TABLE invites (id int PRIMARY KEY, token text NOT NULL)";

#[test]
fn check_then_act_advisory_lock_on_another_key_races() {
    let db = db(INVITES);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(1)");
    b.run("SELECT pg_advisory_xact_lock(2)");
    let check = |id: i32| format!("SELECT count(*) FROM invites WHERE id = {id} OR token = 'x'");
    assert_eq!(a.run(&check(1)), "0");
    assert_eq!(b.run(&check(2)), "0");
    a.run("INSERT INTO invites VALUES (1, 'x')");
    b.run("INSERT INTO invites VALUES (2, 'x')");
    a.run("COMMIT");
    b.run("COMMIT");
    assert_eq!(
        db.query("SELECT count(*) FROM invites WHERE token = 'x'"),
        "2"
    );
}

/// Fix: the key is the checked value: the second session waits for the first to commit, and
/// its count then sees the first one's row.
#[test]
fn check_then_act_advisory_lock_on_the_checked_key() {
    let db = db(INVITES);
    let (mut a, mut b) = (db.session(), db.session());
    a.run("BEGIN");
    b.run("BEGIN");
    a.run("SELECT pg_advisory_xact_lock(hashtext('x'))");
    b.send("SELECT pg_advisory_xact_lock(hashtext('x'))");
    db.until_blocked(&b);
    assert_eq!(a.run("SELECT count(*) FROM invites WHERE token = 'x'"), "0");
    a.run("INSERT INTO invites VALUES (1, 'x')");
    a.run("COMMIT");
    b.wait();
    assert_eq!(b.run("SELECT count(*) FROM invites WHERE token = 'x'"), "1");
    b.run("COMMIT");
}

/// A multi-row `UPDATE .. FROM unnest(..)` joined by key takes its rows in the order of the
/// array when the plan loops over the array and looks each key up (a nested loop, the plan for
/// a short array against a table with many rows): blocked on row 1 (held by `c`), the update of
/// `{2,1}` already holds row 2.
#[test]
fn lock_order_update_from_unnest_locks_in_array_order() {
    let db = db(
        "CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); \
                 INSERT INTO accounts SELECT g, 100 FROM generate_series(1, 10000) g; ANALYZE accounts",
    );
    let (mut a, mut c, mut d) = (db.session(), db.session(), db.session());
    c.run("BEGIN");
    c.run("UPDATE accounts SET balance = balance WHERE id = 1");
    a.send(
        "UPDATE accounts SET balance = balance + 1 FROM unnest('{2,1}'::int[]) AS k(id) \
         WHERE accounts.id = k.id",
    );
    db.until_blocked(&a);
    let held = d.run("SELECT id FROM accounts WHERE id = 2 FOR UPDATE NOWAIT");
    assert_eq!(sqlstate(&held), Some("55P03"), "{held}");
    c.run("COMMIT");
    assert_eq!(sqlstate(&a.wait()), None);
}
