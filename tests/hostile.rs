//! Hostile input, generated here (nothing large is committed): every case runs the binary,
//! which must finish (no abort, no hang), say what it could not read, and stay inside a memory
//! bound. Peak memory is each child's own `ru_maxrss` (from `wait4`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Case {
    name: &'static str,
    /// Writes the input under the folder given and returns what to lint.
    make: fn(&Path) -> PathBuf,
    /// Something the report must contain (a rule and a piece of its message); when nothing
    /// could be read at all, the run exits 2 and says it on stderr instead.
    expect: Option<(&'static str, &'static str)>,
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("txlint-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = d.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn size_of(p: &Path) -> u64 {
    if p.is_dir() {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| size_of(&e.path())).sum())
            .unwrap_or(0)
    } else {
        std::fs::metadata(p).map_or(0, |m| m.len())
    }
}

/// Run `txlint check --format json` on `target`: exit code, report, stderr and peak resident
/// bytes. A run longer than two minutes is a hang.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its peak memory"
)]
fn run(target: &Path) -> (Option<i32>, Value, String, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_txlint"))
        .args(["check", "--format", "json"])
        .arg(target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("txlint");
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let pipe = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                r.read_to_string(&mut s).ok();
            }
            s
        })
    };
    let stdout = pipe(child.stdout.take().map(|o| Box::new(o) as _));
    let stderr = pipe(child.stderr.take().map(|e| Box::new(e) as _));
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: polls our own child; `status` and `usage` outlive the call.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed");
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{} did not finish in two minutes", target.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    let json = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, json, err, usage.ru_maxrss as u64 * 1024)
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "nul-bytes",
            make: |d| {
                write(
                    d,
                    "nul.sql",
                    b"SELECT 1;\0\0\0 SELECT pg_advisory_xact_lock(1);\n\0",
                )
            },
            expect: None,
        },
        Case {
            name: "utf16",
            make: |d| {
                let mut b = vec![0xff, 0xfe];
                for u in "SELECT 1;\n".encode_utf16() {
                    b.extend(u.to_le_bytes());
                }
                write(d, "wide.sql", b)
            },
            expect: Some(("read-error", "UTF-16")),
        },
        Case {
            name: "utf16-without-bom",
            make: |d| {
                let mut b = Vec::new();
                for u in "SELECT pg_advisory_xact_lock(1);\n".encode_utf16() {
                    b.extend(u.to_le_bytes());
                }
                write(d, "wide.sql", b)
            },
            expect: Some(("read-error", "UTF-16LE")),
        },
        Case {
            name: "crlf",
            make: |d| {
                write(
                    d,
                    "crlf.sql",
                    "SELECT 1;\r\nSELECT 'é', pg_advisory_xact_lock(1);\r\n",
                )
            },
            expect: Some(("xact-lock-outside-transaction", "pg_advisory_xact_lock(1)")),
        },
        Case {
            name: "fifo",
            make: |d| {
                let p = d.join("pipe.sql");
                let c = std::ffi::CString::new(p.to_string_lossy().as_bytes()).unwrap();
                // SAFETY: mkfifo reads the path it is given.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
                write(d, "ok.sql", "SELECT 1;\n");
                d.to_path_buf()
            },
            expect: Some(("read-error", "not a regular file")),
        },
        Case {
            name: "symlink-loop",
            make: |d| {
                std::fs::create_dir_all(d.join("a")).unwrap();
                write(&d.join("a"), "x.sql", "SELECT 1;\n");
                std::os::unix::fs::symlink(d, d.join("a").join("loop")).unwrap();
                d.to_path_buf()
            },
            expect: Some(("read-error", "loop")),
        },
        Case {
            name: "folder-named-sql",
            make: |d| {
                std::fs::create_dir_all(d.join("x.sql")).unwrap();
                write(
                    &d.join("x.sql"),
                    "inner.sql",
                    "SELECT pg_advisory_xact_lock(1);\n",
                );
                d.to_path_buf()
            },
            expect: Some(("xact-lock-outside-transaction", "pg_advisory_xact_lock")),
        },
        Case {
            name: "nested-parens",
            make: |d| {
                let s = format!(
                    "SELECT * FROM t WHERE {}1{} = 1;\n",
                    "(".repeat(100_000),
                    ")".repeat(100_000)
                );
                write(d, "parens.sql", s)
            },
            expect: Some(("syntax-error", "too deep")),
        },
        Case {
            // A `SELECT` that reads no table is read from its tokens and never parsed.
            name: "nested-parens-no-table",
            make: |d| {
                let s = format!("SELECT {}1{};\n", "(".repeat(100_000), ")".repeat(100_000));
                write(d, "parens.sql", s)
            },
            expect: None,
        },
        Case {
            name: "nested-blocks-in-a-body",
            make: |d| {
                let s = format!(
                    "DO $$\n{}PERFORM pg_advisory_xact_lock(1);\n{}$$;\n",
                    "BEGIN\n".repeat(10_000),
                    "END;\n".repeat(10_000)
                );
                write(d, "blocks.sql", s)
            },
            expect: None,
        },
        Case {
            name: "nested-ifs-in-a-body",
            make: |d| {
                // Each `IF` evaluates a condition, a statement nested as deep as the `IF`.
                let s = format!(
                    "DO $$ BEGIN\n{}PERFORM pg_advisory_xact_lock(1);\n{}END $$;\n",
                    "IF a THEN\n".repeat(30_000),
                    "END IF;\n".repeat(30_000)
                );
                write(d, "ifs.sql", s)
            },
            expect: Some(("analysis-limit", "nested more than 16 deep")),
        },
        Case {
            name: "and-chain",
            make: |d| {
                let s = format!(
                    "SELECT * FROM t WHERE {};\n",
                    vec!["a = 1"; 83_000].join(" AND ")
                );
                write(d, "and.sql", s)
            },
            expect: Some(("syntax-error", "too deep")),
        },
        Case {
            name: "rust-nested-blocks",
            make: |d| {
                // A file that sends SQL: one without any is not parsed at all.
                let s = format!(
                    "fn f(pool: &sqlx::PgPool) {}{}\n",
                    "{".repeat(5_000),
                    "}".repeat(5_000)
                );
                write(d, "blocks.rs", s)
            },
            expect: Some(("syntax-error", "too deep")),
        },
        Case {
            name: "rust-chains",
            make: |d| {
                write(
                    d,
                    "plus.rs",
                    format!(
                        "fn f(pool: &sqlx::PgPool) {{ let x = {}; }}\n",
                        vec!["1"; 94_000].join(" + ")
                    ),
                );
                write(
                    d,
                    "binds.rs",
                    format!(
                        "async fn f(p: &sqlx::PgPool) {{ sqlx::query(\"SELECT $1\"){}.execute(p).await; }}\n",
                        ".bind(1)".repeat(45_000)
                    ),
                );
                d.to_path_buf()
            },
            expect: Some(("syntax-error", "too deep")),
        },
        Case {
            name: "one-5mb-statement",
            make: |d| {
                let rows: Vec<String> = (0..400_000).map(|i| format!("({i}, 'x')")).collect();
                write(
                    d,
                    "one.sql",
                    format!("INSERT INTO t (a, b) VALUES {};\n", rows.join(", ")),
                )
            },
            expect: None,
        },
        Case {
            name: "rust-10mb-string",
            make: |d| {
                let s = format!(
                    "fn f(pool: &sqlx::PgPool) {{ let s = \"{}\"; sqlx::query(\"SELECT pg_advisory_xact_lock(1)\").execute(pool); }}\n",
                    "x".repeat(10 * 1024 * 1024)
                );
                write(d, "big.rs", s)
            },
            expect: Some(("xact-lock-outside-transaction", "pg_advisory_xact_lock")),
        },
        Case {
            // Each lock taken while holding the others is an edge: a dense lock graph.
            name: "transactions-holding-1000-tables",
            make: |d| {
                let tables: Vec<String> = (0..1_000).map(|i| format!("t{i}")).collect();
                let tx = format!("BEGIN;\nLOCK TABLE {};\nCOMMIT;\n", tables.join(", "));
                write(d, "dense.sql", tx.repeat(50))
            },
            expect: Some(("analysis-limit", "distinct resources")),
        },
        Case {
            name: "tiny-files",
            make: |d| {
                for i in 0..50_000 {
                    write(d, &format!("f{i}.sql"), "SELECT 1;\n");
                }
                d.to_path_buf()
            },
            expect: None,
        },
        Case {
            name: "50mb-of-small-statements",
            make: |d| {
                let line = "UPDATE t SET a = 1 WHERE id = 2;\n";
                write(d, "big.sql", line.repeat(50 * 1024 * 1024 / line.len()))
            },
            expect: Some(("analysis-limit", "statements of this file")),
        },
    ]
}

#[test]
fn hostile_inputs_finish_say_what_was_not_read_and_stay_in_bounds() {
    let mut failures = Vec::new();
    for case in cases() {
        let d = dir(case.name);
        let target = (case.make)(&d);
        let input = size_of(&target);
        let (code, json, err, peak) = run(&target);
        // Exit 0 (nothing at warning or above) or 1 (findings), or 2 when nothing could be read:
        // not a signal.
        if !matches!(code, Some(0..=2)) {
            failures.push(format!("{}: exit {code:?}: {err}", case.name));
        }
        if let Some((rule, piece)) = case.expect {
            let found = json["diagnostics"].as_array().is_some_and(|ds| {
                ds.iter().any(|d| {
                    d["rule"] == rule && d["message"].as_str().is_some_and(|m| m.contains(piece))
                })
            }) || (code == Some(2) && err.contains(piece));
            if !found {
                failures.push(format!("{}: no {rule} saying `{piece}`: {err}", case.name));
            }
        }
        // Spans stay inside the files they name.
        for d in json["diagnostics"].as_array().into_iter().flatten() {
            let path = d["path"].as_str().unwrap_or("");
            let len = std::fs::metadata(path).map_or(u64::MAX, |m| m.len());
            if d["end"]["offset"].as_u64().is_some_and(|o| o > len) {
                failures.push(format!("{}: span past the end of {path}", case.name));
            }
        }
        // 96 MB for the binary and its threads, six bytes per byte of input, 4 KB per file.
        let files = if target.is_dir() {
            std::fs::read_dir(&target).map_or(1, |rd| rd.count() as u64)
        } else {
            1
        };
        let bound = 96 * 1024 * 1024 + 6 * input + 4096 * files;
        if peak > bound {
            failures.push(format!(
                "{}: peak memory {} MB, over {} MB for {} MB of input",
                case.name,
                peak >> 20,
                bound >> 20,
                input >> 20
            ));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A link out of the folder walked (to `/`, to `/proc`, to another checkout) is not followed:
/// its files are not linted and the run says so; named on the command line, it is read.
#[test]
fn links_out_of_the_folder_walked_are_not_followed_unless_named() {
    let d = dir("link-out");
    let project = d.join("project");
    let outside = d.join("outside");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    write(&project, "ok.sql", "SELECT 1;\n");
    write(&outside, "far.sql", "SELECT pg_advisory_xact_lock(1);\n");
    std::os::unix::fs::symlink(&outside, project.join("elsewhere")).unwrap();
    // A hidden folder is not walked: its file is reached only through the link inside.
    std::fs::create_dir_all(project.join(".inner")).unwrap();
    std::os::unix::fs::symlink(project.join(".inner"), project.join("near")).unwrap();
    write(
        &project.join(".inner"),
        "near.sql",
        "SELECT pg_advisory_xact_lock(2);\n",
    );

    let (code, json, err, _) = run(&project);
    let paths: Vec<String> = json["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["path"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        !paths.iter().any(|p| p.contains("far.sql")),
        "a file behind a link out of the folder was linted: {paths:?}"
    );
    assert!(
        err.contains("elsewhere") && err.contains("out of the folder walked"),
        "the link out is not mentioned: {err}"
    );
    assert!(
        paths.iter().any(|p| p.contains("near/near.sql")),
        "a link inside the folder must still be followed: {paths:?}"
    );
    assert_eq!(code, Some(1));

    let (_, json, _, _) = run(&project.join("elsewhere"));
    assert!(
        json["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|d| d["path"].as_str().is_some_and(|p| p.contains("far.sql"))),
        "a link named on the command line must be read: {json}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
