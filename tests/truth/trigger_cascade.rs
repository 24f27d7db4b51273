//! `lock-order-inversion`, a row trigger that writes the rows related to the row that fired it:
//! the firing `UPDATE` holds its own row while the trigger locks the related ones, so two
//! updates of two rows related both ways (a link table holding both directions) each hold
//! their own row and wait for the other's. Locking both rows in key order first makes the
//! second update wait before it holds anything.
//!
//! A gate in the trigger (a shared advisory lock a third session holds) stops both triggers
//! after their firing rows are locked and before they reach the related rows, so the two
//! transactions meet there on every run, not only when the scheduler happens to interleave
//! them.

use super::db;
use super::pg::sqlstate;

const WORKS: &str = "CREATE TABLE work (id int PRIMARY KEY, title text, touched int NOT NULL DEFAULT 0); \
     CREATE TABLE work_relation (relator int NOT NULL, related int NOT NULL); \
     INSERT INTO work (id) VALUES (1), (2); \
     INSERT INTO work_relation VALUES (1, 2), (2, 1); \
     CREATE FUNCTION touch_related() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
       PERFORM pg_advisory_xact_lock_shared(42); \
       UPDATE work SET touched = touched + 1 FROM work_relation \
         WHERE work.id = work_relation.relator AND work_relation.related = NEW.id; \
       RETURN NULL; END $$; \
     CREATE TRIGGER touch AFTER UPDATE OF title ON work \
       FOR EACH ROW EXECUTE FUNCTION touch_related()";

/// Two transactions rename works 1 and 2 (each after `first`, if any) while the gate is shut,
/// then the gate opens: the SQLSTATEs the two got.
fn rename_both(first: Option<&str>) -> Vec<String> {
    let db = db(WORKS);
    let (mut a, mut b, mut gate) = (db.session(), db.session(), db.session());
    gate.run("SELECT pg_advisory_lock(42)");
    a.run("BEGIN");
    if let Some(sql) = first {
        a.run(sql);
    }
    a.send("UPDATE work SET title = 'a' WHERE id = 1");
    db.until_blocked(&a);
    b.run("BEGIN");
    match first {
        Some(sql) => b.send(sql),
        None => b.send("UPDATE work SET title = 'b' WHERE id = 2"),
    }
    db.until_blocked(&b);
    gate.run("SELECT pg_advisory_unlock(42)");
    let ra = a.wait();
    a.run(if sqlstate(&ra).is_some() {
        "ROLLBACK"
    } else {
        "COMMIT"
    });
    let rb = b.wait();
    if first.is_some() && sqlstate(&rb).is_none() {
        b.run("UPDATE work SET title = 'b' WHERE id = 2");
    }
    b.run("COMMIT");
    [ra, rb]
        .iter()
        .filter_map(|r| sqlstate(r).map(str::to_string))
        .collect()
}

#[test]
fn lock_order_trigger_cascade_to_related_rows_deadlocks() {
    assert_eq!(rename_both(None), ["40P01"]);
}

#[test]
fn lock_order_fix_trigger_cascade_rows_locked_in_key_order_first() {
    let errors = rename_both(Some(
        "SELECT id FROM work WHERE id IN (1, 2) ORDER BY id FOR UPDATE",
    ));
    assert!(errors.is_empty(), "{errors:?}");
}
