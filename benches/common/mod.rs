//! What the benchmarks share: running `txlint check` as a child process and fitting exponents.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Wall and CPU seconds and peak resident bytes of `txlint check dir`, and its summary line.
pub fn run_txlint(dir: &Path) -> (f64, f64, u64, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_txlint"));
    command
        .args(["check", "--format", "json", "--output", "/dev/null"])
        .arg(dir);
    let (seconds, cpu, peak, err) = run(command);
    let summary = err
        .lines()
        .find(|l| l.starts_with("checked "))
        .unwrap_or("(no summary)")
        .to_string();
    (seconds, cpu, peak, summary)
}

/// Wall and CPU seconds and peak resident bytes of a child process, and what it wrote to
/// stderr.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its peak memory"
)]
pub fn run(mut command: Command) -> (f64, f64, u64, String) {
    let start = Instant::now();
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("child process");
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).ok();
        s
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for the child we spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` outlive the call.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(waited, pid, "wait4 failed");
    let err = reader.join().unwrap_or_default();
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
    (seconds, cpu, usage.ru_maxrss as u64 * 1024, err)
}

/// This process's peak resident bytes so far (`VmHWM`). A child it spawns shares its memory
/// until the child runs its program (posix_spawn), and the child's peak then counts this
/// process's high-water mark (measured: a parent holding 100 MB makes a 14 MB run of txlint
/// read 116 MB): a child's measured peak at or below it says only that its own is at most
/// that.
#[allow(
    dead_code,
    reason = "each bench compiles this module; not every one asks"
)]
pub fn high_water() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The memory floor: peak resident bytes of `txlint check` on a one-statement file (its code,
/// stacks and buffers), written under `scratch`.
#[allow(
    dead_code,
    reason = "each bench compiles this module; rust_tree has no floor"
)]
pub fn memory_floor(scratch: &Path) -> u64 {
    let tiny = scratch.join("floor");
    let _ = std::fs::create_dir_all(&tiny);
    let _ = std::fs::write(tiny.join("one.sql"), "SELECT 1;\n");
    run_txlint(&tiny).2
}

/// Least-squares slope of log(y) over log(x).
pub fn exponent(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (lx, ly): (Vec<f64>, Vec<f64>) = points.iter().map(|(x, y)| (x.ln(), y.ln())).unzip();
    let (mx, my) = (lx.iter().sum::<f64>() / n, ly.iter().sum::<f64>() / n);
    let cov: f64 = lx.iter().zip(&ly).map(|(x, y)| (x - mx) * (y - my)).sum();
    let var: f64 = lx.iter().map(|x| (x - mx).powi(2)).sum();
    cov / var
}
