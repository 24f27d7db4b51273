//! How txlint grows with its input: PostgreSQL's regression SQL (../shared/corpus) copied 1, 2,
//! 4 and 8 times, as many files (a copy per folder) and as one file, against floors measured in
//! the same run: reading the files, sqlparser's own tokenizer on them and its parser on each of
//! their statements.
//!
//! `cargo bench --bench scale` prints, per shape and size, wall and CPU time and peak memory of
//! the `txlint check` process (its run of least CPU time out of three, as the floors are each
//! the best of three), its CPU time as a multiple of the floors, and the exponents over
//! the sizes analysed in full (one file stops at txlint's statement limit): the slope of
//! log(time) and log(memory) over log(copies) (1.0 is linear), with memory as a multiple of
//! the input. Nothing is asserted: speed is measured, not tested.

use std::path::{Path, PathBuf};
use std::time::Instant;

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Tokenizer;
use txlint::parse::split::split;
use txlint::source::Dialect;

mod common;
use common::{exponent, memory_floor, run_txlint};

const COPIES: [usize; 4] = [1, 2, 4, 8];

struct Sample {
    copies: usize,
    bytes: u64,
    seconds: f64,
    /// User and system CPU seconds of the process (it uses every core).
    cpu: f64,
    peak: u64,
    summary: String,
}

impl Sample {
    fn statements(&self) -> usize {
        self.summary
            .split(", ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// One file past txlint's statement limit: only its first statements were analysed.
    fn limited(&self, one: bool) -> bool {
        one && self.statements() >= txlint::extract::MAX_STATEMENTS
    }
}

fn main() {
    let corpus = Path::new("../shared/corpus/postgres-regress");
    let mut files = Vec::new();
    sql_files(corpus, &mut files);
    files.sort();
    if files.is_empty() {
        eprintln!(
            "{} has no .sql files: the corpus ships in ../shared",
            corpus.display()
        );
        std::process::exit(2);
    }
    let texts: Vec<String> = files
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned())
        .collect();
    let scratch = std::env::temp_dir().join(format!("txlint-scale-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    // txlint runs first: a child's peak memory counts what it inherited from this process at
    // the fork, so the floors (which allocate) are measured after.
    let memory_floor = memory_floor(&scratch);
    let mut shapes = Vec::new();
    for shape in ["many files", "one file"] {
        let mut samples = Vec::new();
        for copies in COPIES {
            let dir = scratch.join(format!("{}-{copies}", shape.replace(' ', "-")));
            let bytes = lay_out(&dir, &files, &texts, copies, shape == "one file");
            // The best of three, as for the floors: on a shared machine one run can be slowed
            // by others, and a ratio of a single run to a best-of-three floor would show it.
            let (seconds, cpu, peak, summary) = (0..3)
                .map(|_| run_txlint(&dir))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("three runs");
            samples.push(Sample {
                copies,
                bytes,
                seconds,
                cpu,
                peak,
                summary,
            });
            let _ = std::fs::remove_dir_all(&dir);
        }
        shapes.push((shape, samples));
    }
    let floors = floors(&files, &texts);
    println!(
        "floors on one copy ({} files, {} bytes): read {:.3} s, sqlparser tokenize {:.3} s, sqlparser parse {:.3} s",
        files.len(),
        texts.iter().map(|t| t.len()).sum::<usize>(),
        floors.0,
        floors.1,
        floors.2
    );
    println!(
        "memory floor: {:.1} MB (txlint on a one-statement file); `net x` is the peak above it per byte of input",
        memory_floor as f64 / 1e6
    );
    for (shape, samples) in &shapes {
        report(shape, samples, floors, memory_floor, *shape == "one file");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

fn sql_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            sql_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "sql") {
            out.push(p);
        }
    }
}

/// Seconds to read the files, to tokenize them with sqlparser, and to parse each of their
/// statements with sqlparser.
fn floors(files: &[PathBuf], texts: &[String]) -> (f64, f64, f64) {
    let best = |f: &dyn Fn()| {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let read = best(&|| {
        let n: usize = files
            .iter()
            .map(|p| std::fs::read(p).map_or(0, |b| b.len()))
            .sum();
        std::hint::black_box(n);
    });
    let tokenize = best(&|| {
        for t in texts {
            let n = Tokenizer::new(&PostgreSqlDialect {}, t)
                .tokenize()
                .map_or(0, |v| v.len());
            std::hint::black_box(n);
        }
    });
    // Statement by statement, as txlint hands them to sqlparser (cut beforehand, untimed).
    let statements: Vec<String> = texts
        .iter()
        .flat_map(|t| split(t, Dialect::Postgres, true).statements)
        .map(|s| s.sql)
        .collect();
    let parse = best(&|| {
        for sql in &statements {
            let n = Parser::parse_sql(&PostgreSqlDialect {}, sql).map_or(0, |v| v.len());
            std::hint::black_box(n);
        }
    });
    (read, tokenize, parse)
}

/// Write `copies` copies of the corpus under `dir`, as one folder per copy or as one file.
fn lay_out(dir: &Path, files: &[PathBuf], texts: &[String], copies: usize, one: bool) -> u64 {
    std::fs::create_dir_all(dir).expect("scratch folder");
    let mut bytes = 0;
    if one {
        let mut all = String::new();
        for _ in 0..copies {
            for t in texts {
                all.push_str(t);
                all.push('\n');
            }
        }
        bytes = all.len() as u64;
        std::fs::write(dir.join("all.sql"), all).expect("write");
        return bytes;
    }
    for c in 0..copies {
        let sub = dir.join(format!("copy{c}"));
        std::fs::create_dir_all(&sub).expect("scratch folder");
        for (p, t) in files.iter().zip(texts) {
            std::fs::write(sub.join(p.file_name().expect("file name")), t).expect("write");
            bytes += t.len() as u64;
        }
    }
    bytes
}

fn report(
    shape: &str,
    samples: &[Sample],
    (read, tokenize, parse): (f64, f64, f64),
    memory_floor: u64,
    one: bool,
) {
    let net = |s: &Sample| s.peak.saturating_sub(memory_floor) as f64 / s.bytes as f64;
    println!("\n{shape}:");
    println!(
        "{:>6} {:>7} {:>7} {:>7} {:>10} {:>8} {:>8} {:>8} {:>6}  summary",
        "copies", "MB", "wall s", "cpu s", "cpu/parse", "tokenize", "peak MB", "x input", "net x"
    );
    for s in samples {
        let c = s.copies as f64;
        println!(
            "{:>6} {:>7.1} {:>7.2} {:>7.2} {:>10.2} {:>8.2} {:>8.1} {:>8.1} {:>6.1}  {}{}",
            s.copies,
            s.bytes as f64 / 1e6,
            s.seconds,
            s.cpu,
            s.cpu / (parse * c),
            s.cpu / (tokenize * c),
            s.peak as f64 / 1e6,
            s.peak as f64 / s.bytes as f64,
            net(s),
            s.summary,
            if s.limited(one) {
                " [statement limit: the rest of the file was not analysed]"
            } else {
                ""
            }
        );
    }
    // Exponents over the sizes analysed in full.
    let full: Vec<&Sample> = samples.iter().filter(|s| !s.limited(one)).collect();
    if full.len() < 2 {
        println!("(fewer than two sizes analysed in full: no exponents)");
        return;
    }
    let fit = |f: &dyn Fn(&Sample) -> f64| {
        exponent(
            &full
                .iter()
                .map(|s| (s.copies as f64, f(s)))
                .collect::<Vec<_>>(),
        )
    };
    let (wall, cpu, memory) = (
        fit(&|s| s.seconds),
        fit(&|s| s.cpu),
        fit(&|s| s.peak as f64),
    );
    let worst = full
        .iter()
        .map(|s| s.peak as f64 / s.bytes as f64)
        .fold(0.0, f64::max);
    let worst_net = full.iter().map(|s| net(s)).fold(0.0, f64::max);
    println!(
        "exponents over {}-{} copies: wall {wall:.2}, cpu {cpu:.2}, memory {memory:.2}; peak memory at most {worst:.1}x the input, {worst_net:.1}x above the floor (read floor {read:.3} s per copy)",
        full[0].copies,
        full[full.len() - 1].copies
    );
}
