//! Deterministic mutations of the fixtures and of PostgreSQL's regression SQL through the whole
//! pipeline, on the stable toolchain (the coverage-guided fuzz targets live in `fuzz/`): no
//! panic and every span inside its file. (Time is measured in `benches/`, not asserted here.)

use std::path::{Path, PathBuf};

use txlint::config::Config;

/// Tokens that matter to the lexers, the splitters and the rules.
const DICTIONARY: &[&str] = &[
    "$$",
    "$tag$",
    "$1",
    "E'",
    "'",
    "\"",
    "`",
    "/*",
    "*/",
    "--",
    "\n",
    "\r",
    ";",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "\\",
    "\\;",
    "\\gset",
    ":v",
    ":'v'",
    "::",
    ":=",
    "?",
    "?1",
    "FOR UPDATE",
    "FOR NO KEY UPDATE OF t SKIP LOCKED",
    "pg_advisory_xact_lock(",
    "pg_advisory_lock(1)",
    "BEGIN",
    "COMMIT",
    "ROLLBACK TO SAVEPOINT s",
    "SAVEPOINT s",
    "DO $$ BEGIN ",
    " END $$",
    "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$",
    "IF x THEN",
    "END IF",
    "ELSIF",
    "RAISE EXCEPTION 'x'",
    "WITH c AS (",
    "SELECT count(*) FROM t WHERE a = 1",
    "r#\"",
    "\"#",
    "fn f(pool: &PgPool) {",
    "sqlx::query(\"",
    "\").execute(pool)",
    ".bind(x)",
    "format!(\"",
    "?;",
    "return",
    "if let Err(e) = ",
    "\u{feff}",
    "\0",
    "é",
    "\u{1F600}",
];

/// xorshift64*: the same mutations on every run and every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut s = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(s.len() + 1);
        match rng.below(6) {
            0 => {
                let t = DICTIONARY[rng.below(DICTIONARY.len())];
                s.splice(at..at, t.bytes());
            }
            1 if !s.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(s.len());
                s.drain(at.min(end)..end);
            }
            2 if !s.is_empty() => {
                let i = at.min(s.len() - 1);
                s[i] = (rng.next() & 0xff) as u8;
            }
            3 if !s.is_empty() => {
                let from = rng.below(s.len());
                let to = (from + rng.below(64)).min(s.len());
                let piece = s[from..to].to_vec();
                s.splice(at..at, piece);
            }
            4 => s.truncate(at),
            _ => {
                let t = DICTIONARY[rng.below(DICTIONARY.len())];
                let n = 1 + rng.below(40);
                s.splice(at..at, t.repeat(n).into_bytes());
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "sql" || x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn mutated_inputs_never_panic_and_keep_spans_in_their_files() {
    let mut seeds = Vec::new();
    sources(Path::new("fixtures"), &mut seeds);
    let mut corpus = Vec::new();
    sources(Path::new("../shared/corpus/postgres-regress"), &mut corpus);
    corpus.sort();
    // Small corpus files keep each run short; every tenth is enough variety.
    seeds.extend(
        corpus
            .into_iter()
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() < 16 * 1024))
            .step_by(10),
    );
    seeds.sort();
    assert!(seeds.len() > 50, "only {} seeds", seeds.len());
    let texts: Vec<(String, String)> = seeds
        .iter()
        .filter_map(|p| {
            let text = String::from_utf8_lossy(&std::fs::read(p).ok()?).into_owned();
            let ext = p.extension()?.to_string_lossy().into_owned();
            Some((ext, text))
        })
        .collect();
    let config = Config::default();
    let mut rng = Rng(0x7478_6c69_6e74_2121);
    let mut failures = Vec::new();
    for i in 0..3_000 {
        let (ext, seed) = &texts[rng.below(texts.len())];
        let text = mutate(&mut rng, seed);
        let name = format!("mutant{i}.{ext}");
        let run = std::panic::catch_unwind(|| txlint::check_source(&name, &text, &config));
        let Ok(run) = run else {
            failures.push(format!("{name}: panicked on:\n{text}"));
            continue;
        };
        for d in &run.diagnostics {
            let spans = std::iter::once(d.span).chain(d.labels.iter().map(|l| l.span));
            for s in spans {
                let len = run.program.files[s.file].text().len();
                if s.start() > s.end() || s.end() > len {
                    failures.push(format!("{name}: {} span {s:?} outside 0..{len}", d.rule));
                }
            }
        }
        if failures.len() > 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Inputs the fuzz targets found a panic with, read as their target reads them (`sql`: the
/// bytes made text with `from_utf8_lossy`, linted as `fuzz.sql`).
#[test]
fn inputs_the_fuzzers_found_stay_fixed() {
    let cases: &[(&str, &[u8])] = &[
        // A quoted name left open at the end of the text, its last character a multi-byte
        // one: its quotes were cut off by byte, inside the character.
        ("fuzz.sql", b"SELECT * FROM `jobs\xff"),
        ("fuzz.sql", b"UPDATE \"t\xc3\xa9"),
        (
            "fuzz.sql",
            b"-- A foldeeditionr name\xff\xff\xff\xff\xff\xff\xff\xff\xff= ? \xe5\xf4 for MySQL.\x0aSELECT * FROM `jobs\xffxWHER\x00\x00\x00\x00\x00\x00\x00L \xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xffo\xff\xff\xff\xff\xff\xff\xff-- The ledger\xff\xff\xff\xff\xff's helpers: each locks the one account (id bigint \xff\xffP\xff",
        ),
    ];
    let config = Config::default();
    let mut failures = Vec::new();
    for (name, bytes) in cases {
        let text = String::from_utf8_lossy(bytes);
        if std::panic::catch_unwind(|| txlint::check_source(name, &text, &config)).is_err() {
            failures.push(format!("{name}: panicked on {text:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
