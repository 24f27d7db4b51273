//! txlint on a large real Rust tree, copied 1, 2 and 4 times, against floors measured in the
//! same run: reading its `.rs` files and syn's own `parse_file` on each of them.
//!
//! The tree is `$TXLINT_RUST_TREE`, or else the crates.io sources cargo has unpacked
//! (`$CARGO_HOME/registry/src`): real code, most of it sending no SQL, as in a monorepo.
//! Whole crates are taken in name order up to `$TXLINT_RUST_TREE_MB` megabytes of `.rs`
//! (default 100); copies are hard links, so they cost no disk.
//!
//! `cargo bench --bench rust_tree` prints, per size, wall and CPU time and peak memory of the
//! `txlint check` process (the run with the least CPU of three; syn's floor is its best of three
//! too), its CPU time as a multiple of syn's, its peak memory as a multiple
//! of the input, how many files the pre-scan let through, and the exponents over the sizes.
//! Nothing is asserted: speed is measured, not tested.

use std::path::{Path, PathBuf};
use std::time::Instant;

mod common;
use common::{exponent, run_txlint};

const COPIES: [usize; 3] = [1, 2, 4];

/// Runs of txlint per size and of syn's floor, the fastest kept.
const RUNS: usize = 3;

/// Copies, wall seconds, CPU seconds, peak bytes.
type Point = (f64, f64, f64, f64);

fn main() {
    let tree = std::env::var_os("TXLINT_RUST_TREE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("CARGO_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cargo")
                });
            home.join("registry/src")
        });
    let cap: u64 = std::env::var("TXLINT_RUST_TREE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
        * 1_000_000;
    let crates = crates(&tree, cap);
    let mut files = Vec::new();
    for c in &crates {
        rs_files(c, &mut files);
    }
    if files.is_empty() {
        eprintln!(
            "{} has no .rs files: set TXLINT_RUST_TREE to a Rust tree",
            tree.display()
        );
        std::process::exit(2);
    }
    let bytes: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    // txlint runs first: a child's peak memory counts what it inherited from this process at
    // the fork, so the floors (which hold every file's text) are measured after.
    let scratch = std::env::temp_dir().join(format!("txlint-rust-tree-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let mut points: Vec<Point> = Vec::new();
    let mut summaries = Vec::new();
    for copies in COPIES {
        let dir = scratch.join(format!("x{copies}"));
        for c in 0..copies {
            for cr in &crates {
                let name = cr.file_name().unwrap_or_default();
                link_tree(cr, &dir.join(format!("copy{c}")).join(name));
            }
        }
        // The best of three, as for the floors: one run on a shared machine can be slowed by
        // others, and the exponents then measure the machine (1.20 in one run, 0.95 the next).
        let (wall, cpu, peak, summary) = (0..RUNS)
            .map(|_| run_txlint(&dir))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("runs");
        points.push((copies as f64, wall, cpu, peak as f64));
        summaries.push(summary);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (read, syn) = floors(&files);
    println!(
        "floors on one copy ({} crates of {}, {} files, {:.1} MB): read {read:.2} s, syn::parse_file {syn:.2} s (one core)",
        crates.len(),
        tree.display(),
        files.len(),
        bytes as f64 / 1e6
    );
    println!(
        "{:>6} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}  summary",
        "copies", "MB", "wall s", "cpu s", "cpu/syn", "peak MB", "x input"
    );
    for (&(copies, wall, cpu, peak), summary) in points.iter().zip(&summaries) {
        let input = bytes as f64 * copies;
        println!(
            "{copies:>6} {:>7.1} {wall:>7.2} {cpu:>7.2} {:>8.2} {:>8.1} {:>8.1}  {summary}",
            input / 1e6,
            cpu / (syn * copies),
            peak / 1e6,
            peak / input,
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let fit = |f: &dyn Fn(&Point) -> f64| {
        exponent(&points.iter().map(|p| (p.0, f(p))).collect::<Vec<_>>())
    };
    println!(
        "exponents over 1-4 copies: wall {:.2}, cpu {:.2}, memory {:.2}",
        fit(&|p| p.1),
        fit(&|p| p.2),
        fit(&|p| p.3)
    );
}

/// Crate folders (`<registry>/<index>/<crate>-<version>`, or the tree's own subfolders), in
/// name order, until their `.rs` files reach `cap` bytes.
fn crates(tree: &Path, cap: u64) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for e in std::fs::read_dir(tree).into_iter().flatten().flatten() {
        let p = e.path();
        if p.join("Cargo.toml").is_file() || !p.is_dir() {
            dirs.push(p);
        } else {
            let inner = std::fs::read_dir(&p).into_iter().flatten().flatten();
            dirs.extend(inner.map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    dirs.sort();
    let mut out = Vec::new();
    let mut total = 0;
    for d in dirs {
        if total >= cap {
            break;
        }
        let mut fs = Vec::new();
        rs_files(&d, &mut fs);
        total += fs
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum::<u64>();
        out.push(d);
    }
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        if dir.extension().is_some_and(|x| x == "rs") {
            out.push(dir.to_path_buf());
        }
        return;
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_symlink() {
            continue;
        }
        rs_files(&p, out);
    }
}

/// Seconds to read the files, and to parse each with `syn::parse_file` on one core (on a
/// thread with a large stack, as txlint's own; files syn rejects count what it spent).
fn floors(files: &[PathBuf]) -> (f64, f64) {
    let texts: Vec<String> = files
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned())
        .collect();
    let read = (0..3)
        .map(|_| {
            let t = Instant::now();
            let n: usize = files
                .iter()
                .map(|p| std::fs::read(p).map_or(0, |b| b.len()))
                .sum();
            std::hint::black_box(n);
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min);
    let syn = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || {
            (0..RUNS)
                .map(|_| {
                    let t = Instant::now();
                    for text in &texts {
                        std::hint::black_box(syn::parse_file(text).map(|f| f.items.len()).ok());
                    }
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::MAX, f64::min)
        })
        .expect("thread")
        .join()
        .unwrap_or(f64::NAN);
    (read, syn)
}

/// `to` as a copy of `from` made of hard links (a plain copy where links are refused).
fn link_tree(from: &Path, to: &Path) {
    if from.is_symlink() {
        return;
    }
    if from.is_dir() {
        let _ = std::fs::create_dir_all(to);
        for e in std::fs::read_dir(from).into_iter().flatten().flatten() {
            link_tree(&e.path(), &to.join(e.file_name()));
        }
    } else if std::fs::hard_link(from, to).is_err() {
        let _ = std::fs::copy(from, to);
    }
}
