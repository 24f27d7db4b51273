//! Files and threads: reading a file's text as txlint reads every input, showing a path, and
//! running jobs on every core. The bottom of the house: it knows nothing of SQL or findings.

use std::path::Path;

/// Files larger than this are reported and not analysed.
pub const MAX_FILE_SIZE: u64 = 64 * 1024 * 1024;

/// Stack of every thread that parses and analyses: parsers and tree walks recurse per nesting
/// level, and the inputs they are given are bounded to fit (a stack overflow aborts the whole
/// process, with no output). Reserved, not committed: only the pages used cost memory.
pub const STACK: usize = 256 * 1024 * 1024;

/// Set by [`run_on_this_thread`].
static HERE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, every run of this process does its work on the thread that asks for it: no
/// thread is started for the analysis or for [`parallel`] jobs. For a caller that runs many
/// small inputs one after another on one thread it made with a [`STACK`]-sized stack (a fuzz
/// target: starting a thread per input, under a sanitizer that clears each new stack's shadow,
/// cost most of a small input's time).
pub fn run_on_this_thread() {
    HERE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`run_on_this_thread`] was called.
pub fn on_this_thread() -> bool {
    HERE.load(std::sync::atomic::Ordering::Relaxed)
}

/// `job(0) .. job(n - 1)` on every core (up to 8 threads with a [`STACK`]-sized stack), taken
/// in order; the results in order. Runs here when no thread can be had, or after
/// [`run_on_this_thread`].
pub fn parallel<T: Send>(n: usize, job: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = match on_this_thread() {
        true => 1,
        false => std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 8)
            .min(n),
    };
    if threads <= 1 {
        return (0..n).map(&job).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, job(i)));
        }
    };
    let mut done: Vec<(usize, T)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::Builder::new()
                    .stack_size(STACK)
                    .spawn_scoped(scope, work)
            })
            .collect();
        let mut done = Vec::new();
        for w in workers {
            match w.map(|w| w.join()) {
                Ok(Ok(results)) => done.extend(results),
                // A panic is a bug in txlint: report it as one, not as a clean run.
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                // No thread to be had: the others (or this one) take its share.
                Err(_) => {}
            }
        }
        // Whatever no thread took (every spawn failed) is done here.
        done.extend(work());
        done
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, x)| x).collect()
}

/// The text of a file, and the offset of the first invalid UTF-8 byte if there is one.
pub fn read(path: &Path) -> Result<(String, Option<usize>), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read file: {e}"))?;
    // A FIFO or a device would block or never end.
    if !meta.is_file() {
        return Err("not a regular file; not read".to_string());
    }
    if meta.len() > MAX_FILE_SIZE {
        return Err(format!(
            "file is {} MiB, larger than the {} MiB txlint reads; not analysed",
            meta.len() / (1024 * 1024),
            MAX_FILE_SIZE / (1024 * 1024)
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read file: {e}"))?;
    if bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]) {
        return Err("file is UTF-16 (it starts with a UTF-16 byte-order mark); txlint reads UTF-8: save it as UTF-8, not analysed".to_string());
    }
    if let Some(order) = utf16_without_bom(&bytes) {
        return Err(format!(
            "file looks like UTF-16{order} without a byte-order mark (every other byte is NUL); txlint reads UTF-8: save it as UTF-8, not analysed"
        ));
    }
    // A NUL near the start, as git tells binary files: no SQL or Rust text holds one
    // (PostgreSQL rejects it in a query), and printing the rest would send bytes to a terminal.
    if let Some(at) = bytes.iter().take(8000).position(|&b| b == 0) {
        return Err(format!(
            "binary file (a NUL byte at offset {at}), not SQL or Rust text; not analysed"
        ));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, None)),
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            Ok((replace_invalid(e.into_bytes()), Some(offset)))
        }
    }
}

/// `LE` or `BE` when the file's start reads as UTF-16 text with no byte-order mark: nearly
/// every pair of bytes is one character and a NUL, in the same order (UTF-8 text has no NULs
/// there, so PostgreSQL would reject it anyway).
fn utf16_without_bom(bytes: &[u8]) -> Option<&'static str> {
    let head = &bytes[..bytes.len().min(4096) & !1];
    let pairs = head.len() / 2;
    if pairs < 2 {
        return None;
    }
    let count = |f: fn(&[u8]) -> bool| head.chunks_exact(2).filter(|p| f(p)).count();
    let le = count(|p| p[0] != 0 && p[1] == 0);
    let be = count(|p| p[0] == 0 && p[1] != 0);
    match (le * 10 >= pairs * 9, be * 10 >= pairs * 9) {
        (true, _) => Some("LE"),
        (_, true) => Some("BE"),
        _ => None,
    }
}

/// The text with each byte that is not part of valid UTF-8 replaced by one byte (U+001A), so
/// that byte offsets stay those of the file.
fn replace_invalid(mut bytes: Vec<u8>) -> String {
    let mut at = 0;
    loop {
        match std::str::from_utf8(&bytes[at..]) {
            Ok(_) => break,
            Err(e) => {
                let bad = at + e.valid_up_to();
                let n = e.error_len().unwrap_or(bytes.len() - bad);
                bytes[bad..bad + n].fill(0x1a);
                at = bad + n;
            }
        }
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// `path` relative to `root` (as given when `root` is empty or the file is outside it).
pub fn relative_to(root: &Path, path: &Path) -> std::path::PathBuf {
    if root.as_os_str().is_empty() {
        return path.to_path_buf();
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    abs.strip_prefix(root)
        .map_or_else(|_| path.to_path_buf(), Path::to_path_buf)
}

/// `path` absolute and without `.` or `..` steps, read from its text (the file need not
/// exist; a path that cannot be made absolute is kept as it is).
pub fn absolute(path: &Path) -> std::path::PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = std::path::PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// `path` relative to `cwd` when it is below it, with `/` separators.
pub fn display_path(path: &Path, cwd: &Path) -> String {
    let abs = cwd.join(path);
    let shown = abs.strip_prefix(cwd).unwrap_or(path);
    let s = shown.to_string_lossy().replace('\\', "/");
    s.strip_prefix("./").map(str::to_string).unwrap_or(s)
}
