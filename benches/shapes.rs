//! How txlint grows on generated inputs of the shapes hostile or generated code takes: each
//! shape written at three sizes (1, 2 and 4 times a base), linted as a folder.
//!
//! `cargo bench --bench shapes` prints, per shape and size, the input's bytes, wall and CPU
//! time and peak memory of the `txlint check` process (its run of least CPU time out of
//! three), and the peak above the process floor (txlint on a one-statement file) per byte of
//! input; then per shape the exponents of CPU time and memory over the sizes (1.0 is linear)
//! and the peak's growth per byte of input between the two largest sizes (what a constant the
//! process holds at any size does not blur, as it does `B/B` at a small size). A child's peak
//! counts this benchmark's own peak so far (see `common::high_water`): a figure marked `<=` is
//! that, an upper bound of the child's, and a growth from one is marked `>=`.
//! For a Rust shape it also prints syn's own floor: the peak of a process that only reads the
//! file and parses it with `syn::parse_file` (this benchmark run again as a child), above that
//! process on a one-item file, per byte (`syn B/B`): txlint holds a file's syntax tree while it
//! walks it, so its bytes per byte are at least syn's.
//! Nothing is asserted: speed is measured, not tested.
//!
//! The shapes: one line of 500,000 commas per size; Rust query functions (10,000 per size);
//! Rust helpers calling each other in a ring (2,000 per size); a PL/pgSQL body of statements
//! (50,000 per size); small statements in one file (20,000 per size); `IF` statements nested
//! in a PL/pgSQL body (2,000 deep per size); `concat!` of string pieces (10,000 per size).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

mod common;
use common::{exponent, high_water, memory_floor, run, run_txlint};

/// Set in the environment of this benchmark's own child that only parses the file it names
/// with syn (the floor of a Rust shape's memory).
const SYN_CHILD: &str = "TXLINT_SHAPES_SYN_PARSE";

const SIZES: [usize; 3] = [1, 2, 4];

/// A shape's name, its file's name, and what writes its text at a size (streamed to the file:
/// this benchmark never holds a large text, so its own peak stays below its children's).
type Shape = (
    &'static str,
    &'static str,
    fn(usize, &mut dyn Write) -> io::Result<()>,
);

const SHAPES: [Shape; 7] = [
    ("one line of commas", "a.sql", commas),
    ("Rust query functions", "lib.rs", query_functions),
    ("Rust helpers in a ring", "lib.rs", helper_ring),
    ("PL/pgSQL body", "a.sql", plpgsql_body),
    ("small statements", "a.sql", small_statements),
    ("nested IF", "a.sql", nested_ifs),
    ("concat! pieces", "lib.rs", concat_pieces),
];

fn main() {
    if let Some(path) = std::env::var_os(SYN_CHILD) {
        let text = std::fs::read_to_string(path).expect("the shape's file");
        std::hint::black_box(syn::parse_file(&text).map(|f| f.items.len()).ok());
        return;
    }
    let scratch = std::env::temp_dir().join(format!("txlint-shapes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let floor = memory_floor(&scratch);
    println!(
        "memory floor: {:.1} MB (txlint on a one-statement file); `B/B` is the peak above it per byte of input",
        floor as f64 / 1e6
    );
    println!(
        "`<=`: the peak measured is this benchmark's own peak so far (which a spawned child's peak counts): txlint's is at most that"
    );
    let syn_dir = scratch.join("syn-floor");
    write(
        &syn_dir,
        "lib.rs",
        |_, out| out.write_all(b"fn f() {}\n"),
        1,
    );
    let syn_floor = syn_peak(&file_path(&syn_dir, "lib.rs"));
    println!(
        "{:<24} {:>4} {:>10} {:>8} {:>8} {:>9} {:>7} {:>9}",
        "shape", "size", "bytes", "wall s", "cpu s", "peak MB", "B/B", "syn B/B"
    );
    for (name, file, text) in SHAPES {
        let mut cpu = Vec::new();
        let mut memory = Vec::new();
        let mut grown = Vec::new();
        for size in SIZES {
            let dir = scratch.join(format!("{}-{size}", name.replace([' ', '/', '!'], "-")));
            let (path, bytes) = (file_path(&dir, file), write(&dir, file, text, size));
            let parent = high_water();
            let (seconds, cpu_s, peak, _) = (0..3)
                .map(|_| run_txlint(&dir))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("three runs");
            let net = peak.saturating_sub(floor) as f64;
            // A peak that is this process's own (see `high_water`; within 5 %, what the
            // benchmark itself may add after it is read) bounds the child's.
            let bounded = |peak: u64| peak <= parent + parent / 20;
            let mark = |peak: u64| if bounded(peak) { "<=" } else { "" };
            let syn = match file.ends_with(".rs") {
                true => {
                    let syn = syn_peak(&path);
                    let net = syn.saturating_sub(syn_floor) as f64;
                    format!("{}{:.1}", mark(syn), net / bytes as f64)
                }
                false => "-".to_string(),
            };
            let ratio = format!("{}{:.1}", mark(peak), net / bytes as f64);
            println!(
                "{name:<24} {size:>4} {bytes:>10} {seconds:>8.2} {cpu_s:>8.2} {:>9.1} {ratio:>7} {syn:>9}",
                peak as f64 / 1e6
            );
            cpu.push((size as f64, cpu_s.max(1e-3)));
            memory.push((size as f64, net.max(1.0)));
            grown.push((bytes as f64, peak as f64, bounded(peak)));
            let _ = std::fs::remove_dir_all(&dir);
        }
        // What one more byte of input costs, from the two largest sizes: what the process
        // holds whatever its input cancels out. When the smaller one's peak was only a bound
        // (`<=`), the growth is at least this; when the larger one's was, nothing is known.
        let slope = match grown[..] {
            [.., _, (_, _, true)] => "? (the larger size's peak is a bound)".to_string(),
            [.., (b1, p1, low), (b2, p2, false)] if b2 > b1 => {
                let at_least = if low { ">=" } else { "" };
                format!("{at_least}{:.1}", (p2 - p1) / (b2 - b1))
            }
            _ => "?".to_string(),
        };
        println!(
            "{name:<24} exponents: cpu {:.2}, memory {:.2}; {slope} bytes per byte added",
            exponent(&cpu),
            exponent(&memory)
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The least peak resident bytes of three processes that only parse `path` with syn.
fn syn_peak(path: &Path) -> u64 {
    (0..3)
        .map(|_| {
            let exe = std::env::current_exe().expect("this benchmark's path");
            let mut child = std::process::Command::new(exe);
            child.env(SYN_CHILD, path);
            run(child).2
        })
        .min()
        .unwrap_or(0)
}

/// Where a shape's file goes: a Rust file under `src/`.
fn file_path(dir: &Path, file: &str) -> PathBuf {
    match file.ends_with(".rs") {
        true => dir.join("src").join(file),
        false => dir.join(file),
    }
}

/// Writes a shape's text at `size` as `dir/file` (see [`file_path`]), and returns its length.
fn write(
    dir: &Path,
    file: &str,
    text: fn(usize, &mut dyn Write) -> io::Result<()>,
    size: usize,
) -> usize {
    let path = file_path(dir, file);
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let mut out = BufWriter::new(std::fs::File::create(&path).expect("scratch file"));
    text(size, &mut out)
        .and_then(|()| out.flush())
        .expect("scratch file written");
    std::fs::metadata(&path).map_or(0, |m| m.len() as usize)
}

fn commas(size: usize, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(b"SELECT 1")?;
    for _ in 0..500_000 * size {
        out.write_all(b", 1")?;
    }
    out.write_all(b";\n")
}

fn query_functions(size: usize, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "use sqlx::PgPool;")?;
    for i in 0..10_000 * size {
        writeln!(
            out,
            "pub async fn q{i}(pool: &PgPool) -> sqlx::Result<()> {{ sqlx::query(\"UPDATE t{} SET n = n + 1 WHERE id = $1\").bind({i}).execute(pool).await?; Ok(()) }}",
            i % 50
        )?;
    }
    Ok(())
}

fn helper_ring(size: usize, out: &mut dyn Write) -> io::Result<()> {
    let n = 2_000 * size;
    writeln!(out, "use sqlx::PgConnection;")?;
    for i in 0..n {
        writeln!(
            out,
            "pub async fn h{i}(c: &mut PgConnection, d: u32) -> sqlx::Result<()> {{ if d > 0 {{ Box::pin(h{}(c, d - 1)).await?; Box::pin(h{}(c, d - 1)).await?; }} sqlx::query(\"UPDATE r{} SET n = n + 1 WHERE id = 1\").execute(&mut *c).await?; Ok(()) }}",
            (i + 1) % n,
            (i * 7 + 3) % n,
            i % 20
        )?;
    }
    Ok(())
}

fn plpgsql_body(size: usize, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$\nBEGIN"
    )?;
    for i in 0..50_000 * size {
        writeln!(out, "  UPDATE p{} SET n = n + 1 WHERE id = {i};", i % 30)?;
    }
    writeln!(out, "END $$;")
}

/// 80,000 at the largest size: below the 100,000 statements txlint reads of one file.
fn small_statements(size: usize, out: &mut dyn Write) -> io::Result<()> {
    for i in 0..20_000 * size {
        writeln!(out, "UPDATE s{} SET n = n + 1 WHERE id = {i};", i % 30)?;
    }
    Ok(())
}

fn nested_ifs(size: usize, out: &mut dyn Write) -> io::Result<()> {
    let depth = 2_000 * size;
    writeln!(out, "DO $$ BEGIN")?;
    for _ in 0..depth {
        writeln!(out, "IF a THEN UPDATE t SET n = 1 WHERE id = 1;")?;
    }
    for _ in 0..depth {
        writeln!(out, "END IF;")?;
    }
    writeln!(out, "END $$;")
}

fn concat_pieces(size: usize, out: &mut dyn Write) -> io::Result<()> {
    write!(
        out,
        "pub async fn f(pool: &sqlx::PgPool) -> sqlx::Result<()> {{\n    sqlx::query(concat!(\"UPDATE t SET n = 1 WHERE id = 1\""
    )?;
    for _ in 0..10_000 * size {
        out.write_all(b", \" \"")?;
    }
    writeln!(out, ")).execute(pool).await?;\n    Ok(())\n}}")
}
