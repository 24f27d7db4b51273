//! `check-then-act`, rows picked by their state then changed by key: a canceller picks the
//! pending tasks with a plain `SELECT`, a worker takes one in between, and the cancel that
//! tests the state only with `state < 'succeeded'` cancels the running task. Picking with `FOR
//! UPDATE SKIP LOCKED` (the fix maintainers used) or re-testing `state = 'pending'` in the
//! write leaves it running.

use super::db;

const TASKS: &str = "CREATE TABLE tasks (id int PRIMARY KEY, job int NOT NULL, state text NOT NULL); \
                     INSERT INTO tasks VALUES (1, 7, 'pending')";

/// The canceller picks with `pick`, the worker then takes task 1 (waiting if it must), the
/// canceller runs `cancel` for each task it picked and commits: the task's final state, and
/// whether the worker took the task (and is running it).
fn after_cancel(pick: &str, cancel: &str) -> (String, bool) {
    let db = db(TASKS);
    let (mut a, mut w) = (db.session(), db.session());
    a.run("BEGIN");
    let picked = a.run(pick);
    w.run("BEGIN");
    w.send("UPDATE tasks SET state = 'running' WHERE id = 1 AND state = 'pending' RETURNING id");
    // Under a lock the worker waits for the canceller; without one it goes ahead now.
    let locked = pick.contains("FOR UPDATE");
    let mut took = String::new();
    if locked {
        db.until_blocked(&w);
    } else {
        took = w.wait();
        w.run("COMMIT");
    }
    if picked.trim() == "1" {
        a.run(cancel);
    }
    a.run("COMMIT");
    if locked {
        took = w.wait();
        w.run("COMMIT");
    }
    let state = db.query("SELECT state FROM tasks WHERE id = 1");
    (state, took.trim() == "1")
}

#[test]
fn check_then_act_rows_picked_by_state_cancel_a_running_task() {
    let state = after_cancel(
        "SELECT id FROM tasks WHERE job = 7 AND state = 'pending'",
        "UPDATE tasks SET state = 'cancelled' WHERE id = 1 AND state < 'succeeded'",
    );
    // The worker took it and runs it, and the cancel marked it cancelled under it.
    assert_eq!(state, ("cancelled".to_string(), true));
}

#[test]
fn check_then_act_fix_rows_picked_by_state_locked_as_picked() {
    let state = after_cancel(
        "SELECT id FROM tasks WHERE job = 7 AND state = 'pending' FOR UPDATE SKIP LOCKED",
        "UPDATE tasks SET state = 'cancelled' WHERE id = 1 AND state < 'succeeded'",
    );
    // The cancel committed first and the worker's re-tested `state = 'pending'` no longer
    // holds: the task was cancelled while still pending, and never ran.
    assert_eq!(state, ("cancelled".to_string(), false));
}

#[test]
fn check_then_act_fix_rows_picked_by_state_retested() {
    let state = after_cancel(
        "SELECT id FROM tasks WHERE job = 7 AND state = 'pending'",
        "UPDATE tasks SET state = 'cancelled' WHERE id = 1 AND state = 'pending'",
    );
    // The cancel found no pending task: the one the worker took keeps running.
    assert_eq!(state, ("running".to_string(), true));
}
