//! A throw-away PostgreSQL server and psql sessions driven one statement at a time.
//!
//! The server is Debian's `postgresql-15` binaries (`/usr/lib/postgresql/<n>/bin`, or
//! `TXLINT_PG_BIN`), initialised into a folder under the target folder and listening only on a
//! unix socket there. It is started once per test binary by a thread that lives as long as the
//! process, and it is killed when the process ends, however it ends (the parent-death signal).
//! Without a server binary every test fails and says how to install one.
//!
//! A [`Session`] is one `psql` process: [`Session::send`] writes a statement and returns at
//! once, [`Session::wait`] reads its output up to a marker, [`Session::run`] does both. A
//! second session waits for the first to be blocked by polling `pg_stat_activity`
//! ([`Server::until_blocked`]), never by sleeping a fixed time.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// How long one statement may take before the test fails (a hang is a failure, not a wait).
const DEADLINE: Duration = Duration::from_secs(30);

pub struct Server {
    socket: PathBuf,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
static DATABASES: AtomicUsize = AtomicUsize::new(0);

/// The run's server, started on first use.
pub fn server() -> &'static Server {
    match SERVER.get_or_init(start) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("TXLINT_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists() && b.join("postgres").exists())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        "no PostgreSQL server binaries: install Debian's postgresql-15 (`.ci/run` does) or set \
         TXLINT_PG_BIN to the folder with initdb and postgres"
            .to_string()
    })
}

/// The uid and gid server processes run as: `postgres` when the tests run as root (initdb
/// refuses root), else the current user.
fn server_user() -> Option<(u32, u32)> {
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new("postgres").ok()?;
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return None;
    }
    Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn as_server_user(cmd: &mut Command, user: Option<(u32, u32)>, die_with_parent: bool) {
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = user
                && (libc::setgid(gid) != 0 || libc::setuid(uid) != 0)
            {
                return Err(std::io::Error::last_os_error());
            }
            // After the user change, which would clear it.
            if die_with_parent && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn start() -> Result<Server, String> {
    let bin = bin_dir()?;
    let user = server_user();
    if unsafe { libc::geteuid() } == 0 && user.is_none() {
        return Err("running as root and there is no `postgres` user to run the server".into());
    }
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("truth-{}", std::process::id()));
    // Folders of earlier runs (their servers died with them).
    if let Ok(entries) = std::fs::read_dir(env!("CARGO_TARGET_TMPDIR")) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with("truth-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let data = root.join("data");
    let socket = root.join("socket");
    std::fs::create_dir_all(&socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    if let Some((uid, gid)) = user {
        for dir in [&root, &socket] {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", dir.display()))?;
        }
    }
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
            "-D",
        ])
        .arg(&data)
        .stdout(Stdio::null());
    as_server_user(&mut initdb, user, false);
    let out = initdb.output().map_err(|e| {
        format!(
            "{}: {e} (install Debian's postgresql-15, or set TXLINT_PG_BIN)",
            bin.join("initdb").display()
        )
    })?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // The server is the child of a thread that never ends, so it dies with the process.
    let (tx, rx) = channel();
    let (postgres, data_dir, sock) = (bin.join("postgres"), data.clone(), socket.clone());
    std::thread::spawn(move || {
        let mut cmd = Command::new(postgres);
        cmd.arg("-D")
            .arg(&data_dir)
            .arg("-k")
            .arg(&sock)
            .args(["-c", "listen_addresses=", "-c", "fsync=off"])
            .args(["-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            .args(["-c", "deadlock_timeout=100ms", "-c", "max_connections=50"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        as_server_user(&mut cmd, user, true);
        match cmd.spawn() {
            Ok(child) => {
                let _ = tx.send(Ok(()));
                let _keep = child;
                loop {
                    std::thread::park();
                }
            }
            Err(e) => {
                let _ = tx.send(Err(format!("postgres: {e}")));
            }
        }
    });
    rx.recv().map_err(|e| e.to_string())??;
    let server = Server { socket };
    let ready = Instant::now();
    while psql_status(&server, "postgres", "SELECT 1").is_err() {
        if ready.elapsed() > DEADLINE {
            return Err("the server did not accept connections within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(server)
}

fn psql(server: &Server, db: &str) -> Command {
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-q", "-A", "-t", "-U", "postgres", "-h"])
        .arg(&server.socket)
        .args(["-d", db])
        .env("PGOPTIONS", "-c client_min_messages=warning");
    cmd
}

fn psql_status(server: &Server, db: &str, sql: &str) -> Result<String, String> {
    let out = psql(server, db)
        .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

impl Server {
    /// A new empty database for one test, with `setup` run in it.
    pub fn database(&self, setup: &str) -> Database<'_> {
        let name = format!("t{}", DATABASES.fetch_add(1, Ordering::Relaxed));
        psql_status(self, "postgres", &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        let db = Database { server: self, name };
        db.query(setup);
        db
    }
}

pub struct Database<'s> {
    server: &'s Server,
    name: String,
}

impl Database<'_> {
    /// Run `sql` on a session of its own and return what it printed; a failure fails the test.
    pub fn query(&self, sql: &str) -> String {
        psql_status(self.server, &self.name, sql).unwrap_or_else(|e| panic!("{sql}\nfailed: {e}"))
    }

    pub fn session(&self) -> Session {
        let mut child = psql(self.server, &self.name)
            .args(["-v", "VERBOSITY=sqlstate"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("psql");
        let stdin = child.stdin.take().expect("psql stdin");
        let (tx, lines) = channel();
        // Results (stdout) and errors (stderr) in one stream; each pipe has its own marker
        // (see `send`), so nothing of one statement is read as the next one's.
        let out = child.stdout.take().expect("psql stdout");
        let err = child.stderr.take().expect("psql stderr");
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((false, line));
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx2.send((true, line));
            }
        });
        let mut s = Session {
            child,
            stdin,
            lines,
            marker: 0,
            pid: 0,
        };
        s.pid = s
            .run("SELECT pg_backend_pid()")
            .trim()
            .parse()
            .expect("pid");
        s
    }

    /// Wait until the session with backend `pid` waits for a lock.
    pub fn until_blocked(&self, s: &Session) {
        let sql = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = {} AND wait_event_type = 'Lock'",
            s.pid
        );
        let start = Instant::now();
        while self.query(&sql) != "1" {
            assert!(
                start.elapsed() < DEADLINE,
                "session {} never blocked on a lock",
                s.pid
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

pub struct Session {
    child: Child,
    stdin: ChildStdin,
    /// Lines of stdout (`false`) and stderr (`true`).
    lines: Receiver<(bool, String)>,
    marker: usize,
    pub pid: i32,
}

impl Session {
    /// Send a statement (or several; `;` is added at the end) without waiting for it.
    pub fn send(&mut self, sql: &str) {
        self.marker += 1;
        // A statement ended by psql's `\g` family (`\gset`) is complete as it is.
        let last = sql.trim_end().lines().last().unwrap_or("");
        let end = if last.ends_with(';') || last.contains("\\g") {
            ""
        } else {
            ";"
        };
        let m = self.marker;
        writeln!(
            self.stdin,
            "{sql}{end}\n\\echo __done_{m}__\n\\warn __done_{m}__"
        )
        .expect("psql stdin");
        self.stdin.flush().expect("psql stdin");
    }

    /// What the last statement sent printed, once it is done: its errors and warnings first
    /// (`ERROR:  <sqlstate>`, `WARNING:  <sqlstate>`), then its result rows.
    pub fn wait(&mut self) -> String {
        let marker = format!("__done_{}__", self.marker);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut seen = 0;
        loop {
            match self.lines.recv_timeout(DEADLINE) {
                // Once on stdout and once on stderr.
                Ok((_, line)) if line == marker => {
                    seen += 1;
                    if seen == 2 {
                        err.extend(out);
                        return err.join("\n");
                    }
                }
                Ok((true, line)) => err.push(line),
                Ok((false, line)) => out.push(line),
                Err(_) => panic!(
                    "session {}: no answer within 30 s; so far: {out:?}",
                    self.pid
                ),
            }
        }
    }

    pub fn run(&mut self, sql: &str) -> String {
        self.send(sql);
        self.wait()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The SQLSTATE of an error in a session's output, if there is one.
pub fn sqlstate(output: &str) -> Option<&str> {
    output
        .lines()
        .find_map(|l| l.strip_prefix("ERROR:"))
        .map(str::trim)
}
