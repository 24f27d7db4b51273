use super::*;

fn sql(body: &str) -> Vec<String> {
    read_body(body, Dialect::Postgres)
        .statements
        .iter()
        .map(|s| s.raw.sql.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn strips_control_flow() {
    let body = "
    <<outer>>
    DECLARE
        v int := 0;
        r record;
    BEGIN
        SELECT balance INTO STRICT v FROM accounts WHERE id = 1;
        IF v > 10 THEN
            UPDATE accounts SET balance = v - 10 WHERE id = 1;
        ELSIF EXISTS (SELECT 1 FROM t) THEN
            PERFORM pg_advisory_xact_lock(1);
        ELSE
            v := (SELECT count(*) FROM t);
        END IF;
        FOR r IN SELECT * FROM t FOR UPDATE LOOP
            DELETE FROM t WHERE id = r.id;
        END LOOP outer;
        a[2:3] := 5;
        BEGIN
            INSERT INTO t VALUES (1) RETURNING id INTO v;
        EXCEPTION WHEN unique_violation THEN
            RAISE NOTICE 'dup';
        END;
        RETURN v;
    END outer;";
    assert_eq!(
        sql(body),
        vec![
            "SELECT balance FROM accounts WHERE id = 1",
            "SELECT v > 10",
            "UPDATE accounts SET balance = v - 10 WHERE id = 1",
            "SELECT EXISTS (SELECT 1 FROM t)",
            "SELECT pg_advisory_xact_lock(1)",
            "SELECT (SELECT count(*) FROM t)",
            "SELECT * FROM t FOR UPDATE",
            "DELETE FROM t WHERE id = r.id",
            "SELECT 5",
            "INSERT INTO t VALUES (1) RETURNING id",
            "SELECT v",
        ]
    );
    let b = read_body(body, Dialect::Postgres);
    assert_eq!(b.declared, vec!["v", "r"]);
    assert_eq!(b.statements[0].assigns, vec!["v"]);
    assert_eq!(b.statements[5].assigns, vec!["v"]);
}

#[test]
fn trigger_arms_know_the_columns_they_need_changed() {
    let body = "
    BEGIN
        IF NEW.total <> OLD.total OR (OLD.\"Owner\" IS DISTINCT FROM NEW.\"Owner\") THEN
            UPDATE totals SET n = n + 1;
        END IF;
        IF NEW.a = OLD.a AND NEW.b IS NOT DISTINCT FROM OLD.b THEN
            INSERT INTO same VALUES (1);
        ELSIF NEW.c > 0 THEN
            INSERT INTO grew VALUES (1);
        ELSE
            INSERT INTO moved VALUES (1);
        END IF;
        IF NEW.a <> OLD.a AND NEW.b <> OLD.b THEN
            INSERT INTO both VALUES (1);
        END IF;
        RETURN NEW;
    END;";
    let b = read_body(body, Dialect::Postgres);
    let cols = |text: &str| {
        let st = b
            .statements
            .iter()
            .find(|s| s.raw.sql.contains(text))
            .expect("statement");
        let mut out: Vec<String> = b
            .change_arms
            .iter()
            .filter(|(arm, _)| st.branch.contains(arm))
            .flat_map(|(_, c)| c.clone())
            .collect();
        out.sort();
        out
    };
    assert_eq!(cols("totals"), vec!["Owner", "total"]);
    assert_eq!(cols("same"), Vec::<String>::new());
    assert_eq!(cols("grew"), vec!["a", "b"]);
    assert_eq!(cols("moved"), vec!["a", "b"]);
    // `AND` of changes needs both: not a test of any one column.
    assert_eq!(cols("both"), Vec::<String>::new());
    assert_eq!(b.changed_after, None);
}

#[test]
fn an_early_return_on_unchanged_columns_guards_the_rest_of_the_body() {
    let body = "
    BEGIN
        IF NEW.path IS NOT DISTINCT FROM OLD.path AND NEW.parent = OLD.parent THEN
            RETURN NEW;
        END IF;
        UPDATE realms SET full_path = '' WHERE parent = NEW.id;
        RETURN NULL;
    END;";
    let b = read_body(body, Dialect::Postgres);
    let (after, cols) = b.changed_after.clone().expect("a guard");
    assert_eq!(cols, vec!["path", "parent"]);
    assert!(
        b.statements
            .iter()
            .any(|s| s.seq > after && s.raw.sql.contains("realms"))
    );
    // Nested in another structure, or refusing with an error, it guards nothing after it.
    for body in [
        "BEGIN IF x THEN IF NEW.a = OLD.a THEN RETURN NEW; END IF; END IF; RETURN NULL; END;",
        "BEGIN IF NEW.a = OLD.a THEN RAISE EXCEPTION 'same'; END IF; RETURN NULL; END;",
        "BEGIN IF NEW.a = OLD.a THEN NULL; ELSE RETURN NEW; END IF; RETURN NULL; END;",
    ] {
        assert_eq!(
            read_body(body, Dialect::Postgres).changed_after,
            None,
            "{body}"
        );
    }
}

#[test]
fn trigger_arms_know_the_events_they_run_for() {
    let body = "
    BEGIN
        IF (TG_OP = 'INSERT') THEN
            INSERT INTO counts (k, n) VALUES (NEW.k, 1);
        ELSIF TG_OP IN ('UPDATE', 'DELETE') AND OLD.k > 0 THEN
            UPDATE counts SET n = n - 1 WHERE k = OLD.k;
        ELSE
            DELETE FROM counts WHERE k = OLD.k;
        END IF;
        IF tg_op = 'DELETE' OR TG_OP = 'UPDATE' THEN
            DELETE FROM audit WHERE k = OLD.k;
        END IF;
        IF NEW.k > 0 THEN
            UPDATE totals SET n = n + 1;
        ELSE
            UPDATE totals SET n = n - 1;
        END IF;
        RETURN NULL;
    END;";
    let b = read_body(body, Dialect::Postgres);
    let events = |text: &str| {
        let st = b
            .statements
            .iter()
            .find(|st| st.raw.sql.contains(text))
            .unwrap();
        let arm = *st.branch.last().unwrap();
        b.events.iter().find(|e| e.0 == arm).map(|e| e.1)
    };
    assert_eq!(events("INSERT INTO counts"), Some(TG_INSERT));
    // Not a test of `TG_OP` alone: any event the first arm did not claim.
    assert_eq!(
        events("UPDATE counts"),
        Some(TG_UPDATE | TG_DELETE | TG_TRUNCATE)
    );
    assert_eq!(
        events("DELETE FROM counts"),
        Some(TG_UPDATE | TG_DELETE | TG_TRUNCATE)
    );
    assert_eq!(events("DELETE FROM audit"), Some(TG_DELETE | TG_UPDATE));
    assert_eq!(events("totals SET n = n + 1"), None);
    assert_eq!(events("totals SET n = n - 1"), None);
}

#[test]
fn arms_deeper_than_the_limit_are_read_as_the_one_enclosing_them() {
    let depth = MAX_NESTING + 10;
    let body = format!(
        "BEGIN {} UPDATE t SET a = 1; {} END",
        "IF x THEN ".repeat(depth),
        "END IF; ".repeat(depth)
    );
    let b = read_body(&body, Dialect::Postgres);
    let update = b
        .statements
        .iter()
        .find(|s| s.raw.sql.starts_with("UPDATE"));
    let update = update.expect("the update is read");
    // The block's frame has no arm: the outer IFs' arms fill the rest of the path.
    assert_eq!(update.branch.len(), MAX_NESTING - 1);
    // First past the limit: the condition of the IF that opens with the block and
    // MAX_NESTING IFs around it (`BEGIN ` then ten bytes per `IF x THEN `).
    assert_eq!(b.too_deep, Some(6 + 10 * MAX_NESTING + 3));
    let shallow = read_body(
        "BEGIN IF x THEN UPDATE t SET a = 1; END IF; END",
        Dialect::Postgres,
    );
    assert_eq!(shallow.too_deep, None);
}

#[test]
fn control_flow_arms_conditions_and_exits() {
    let body = "
    DECLARE
        n int := (SELECT count(*) FROM seats);
    BEGIN
        SELECT count(*) INTO n FROM bookings WHERE slot = s;
        IF n >= 10 THEN
            RAISE EXCEPTION 'full';
        ELSIF n > 5 THEN
            UPDATE slots SET busy = true WHERE id = s;
        ELSE
            RAISE NOTICE 'plenty';
        END IF;
        CASE kind
            WHEN 'a' THEN DELETE FROM a WHERE id = s;
            ELSE DELETE FROM b WHERE id = s;
        END CASE;
        LOOP
            EXIT WHEN n > 3;
            n := n + 1;
        END LOOP;
        INSERT INTO bookings (slot) VALUES (s);
        RETURN NULL;
    END;";
    let b = read_body(body, Dialect::Postgres);
    let at = |text: &str| {
        b.statements
            .iter()
            .find(|st| st.raw.sql.contains(text))
            .unwrap_or_else(|| panic!("no statement with {text}"))
    };
    // The initializer is a read, assigning `n`.
    assert_eq!(at("count(*) FROM seats").assigns, vec!["n"]);
    let read = at("FROM bookings");
    let first_cond = at("n >= 10");
    let update = at("UPDATE slots");
    assert!(read.branch.is_empty() && first_cond.branch.is_empty());
    // IF / ELSIF / ELSE are one choice; the UPDATE is in the ELSIF arm, taken on both
    // conditions of the chain.
    assert_eq!(update.branch.len(), 1);
    let arm = update.branch[0];
    assert!(b.choices.iter().any(|c| c.len() == 3 && c.contains(&arm)));
    let cond = b.conditions.iter().find(|c| c.arm == arm).unwrap();
    assert_eq!(cond.from, vec![first_cond.seq, at("n > 5").seq]);
    // RAISE EXCEPTION leaves (in the first arm); RAISE NOTICE does not; RETURN does.
    assert_eq!(b.exits.len(), 2);
    assert_eq!(b.exits[0].branch.len(), 1);
    assert!(b.exits[0].seq > first_cond.seq && b.exits[0].seq < update.seq);
    // The CASE arms are another choice.
    let (da, db) = (at("DELETE FROM a"), at("DELETE FROM b"));
    assert_ne!(da.branch, db.branch);
    assert!(
        b.choices
            .iter()
            .any(|c| c.contains(&da.branch[0]) && c.contains(&db.branch[0]))
    );
    // The loop body is an arm of its own; the INSERT after END LOOP is on every path.
    assert_eq!(at("SELECT n + 1").branch.len(), 1);
    assert!(at("INSERT INTO bookings").branch.is_empty());
    assert!(b.exits[1].branch.is_empty());
}

#[test]
fn exception_blocks_and_query_loops() {
    let body = "BEGIN
        BEGIN
            PERFORM pg_advisory_xact_lock(1);
            INSERT INTO t VALUES (1);
        EXCEPTION
            WHEN unique_violation THEN UPDATE t SET n = 1;
            WHEN others THEN RAISE;
        END;
        FOR r, q IN SELECT id, n FROM src WHERE batch = 1 LOOP
            UPDATE dst SET n = q WHERE id = r;
        END LOOP;
        FOR i IN 1..3 LOOP PERFORM f(i); END LOOP;
    END";
    let b = read_body(body, Dialect::Postgres);
    let seq = |text: &str| {
        b.statements
            .iter()
            .find(|s| s.raw.sql.contains(text))
            .unwrap()
    };
    // One handler block: its body is the lock and the INSERT; two handler arms.
    assert_eq!(b.handlers.len(), 1);
    let h = &b.handlers[0];
    assert_eq!(&body[h.range.clone()], "EXCEPTION");
    let (lock, insert) = (seq("pg_advisory_xact_lock").seq, seq("INSERT").seq);
    assert!(h.after < lock && insert <= h.upto);
    assert_eq!(h.arms.len(), 2);
    assert_eq!(seq("UPDATE t").branch.last(), Some(&h.arms[0]));
    assert_eq!(b.exits[0].branch.last(), Some(&h.arms[1]));
    // The query loop binds its targets; the integer loop is no query loop.
    assert_eq!(b.loops.len(), 1);
    let l = &b.loops[0];
    assert_eq!(l.vars, ["r", "q"]);
    assert_eq!(l.query, seq("FROM src").seq);
    assert_eq!(seq("UPDATE dst").branch, [l.arm]);
}

#[test]
fn positions_point_into_the_body() {
    let body = "BEGIN\n  PERFORM f();\nEND";
    let b = read_body(body, Dialect::Postgres);
    let s = &b.statements[0].raw;
    assert_eq!(&body[s.range.clone()], "PERFORM f()");
}
