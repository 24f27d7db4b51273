-- A small job queue, as a psql script: run `txlint check examples/`.
-- Two of these blocks race; the others show the safe forms.

CREATE TABLE IF NOT EXISTS jobs (
    id       bigserial PRIMARY KEY,
    state    text NOT NULL DEFAULT 'queued',
    attempts int  NOT NULL DEFAULT 0
);

-- Race: the advisory lock is released as soon as this statement ends (autocommit),
-- so two workers can both run the UPDATE below.
SELECT pg_advisory_xact_lock(hashtext('jobs'));
UPDATE jobs SET state = 'running' WHERE id = (SELECT min(id) FROM jobs WHERE state = 'queued');

-- Race: the row lock ends with the SELECT; the UPDATE runs unprotected.
SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;
UPDATE jobs SET state = 'running', attempts = attempts + 1 WHERE id = 1;

-- Safe: lock and work in one transaction.
BEGIN;
SELECT pg_advisory_xact_lock(hashtext('jobs'));
UPDATE jobs SET state = 'running' WHERE id = (SELECT min(id) FROM jobs WHERE state = 'queued');
COMMIT;

-- Safe: claim and update in one statement.
WITH next AS (
    SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE jobs SET state = 'running', attempts = attempts + 1 FROM next WHERE jobs.id = next.id;

-- Safe: a function runs inside its caller's transaction.
CREATE OR REPLACE FUNCTION claim_job(job bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(job) THEN
        RETURN false;
    END IF;
    UPDATE jobs SET state = 'running' WHERE id = job;
    RETURN true;
END
$$;
