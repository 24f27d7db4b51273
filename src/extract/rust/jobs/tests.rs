use super::reach::Reach;
use super::*;

/// A function asked about by name alone (no package), as unit `i` (a span in no file).
fn asked(name: &str, i: usize) -> (Key, Span) {
    ((name.to_string(), None), Span::new(usize::MAX, i..i))
}

/// Files 0, 1, .. of no package, each with whether it is test code.
fn texts<'a>(files: &[(&'a str, bool)]) -> Vec<Text<'a>> {
    let text = |(id, &(text, test)): (usize, &(&'a str, bool))| Text {
        id,
        text,
        test,
        package: None,
    };
    files.iter().enumerate().map(text).collect()
}

fn jobs(files: &[(&str, bool)], names: &[&str]) -> Vec<String> {
    let texts = texts(files);
    let names: Vec<(Key, Span)> = names.iter().enumerate().map(|(i, n)| asked(n, i)).collect();
    let found = find(
        &texts,
        &HashSet::new(),
        (&names, &[], &[]),
        (Reach::default(), true),
        |_| Vec::new(),
    );
    let by_unit = |s: &Span| names.iter().find(|(_, u)| u == s).map(|(k, _)| k.0.clone());
    let mut found: Vec<String> = found.called.keys().filter_map(by_unit).collect();
    found.sort();
    found
}

#[test]
fn a_function_only_a_sleeping_loop_calls_is_a_job() {
    let main = "async fn main() { tokio::spawn(async move { loop { purge().await; \
                tokio::time::sleep(D).await; } }); serve().await }";
    let db = "async fn purge() {} async fn serve() { handle().await } async fn handle() {}";
    assert_eq!(
        jobs(&[(main, false), (db, false)], &["purge", "handle"]),
        ["purge"]
    );
}

#[test]
fn a_job_is_found_through_the_functions_between_the_loop_and_it() {
    let main = "async fn run() { let mut t = interval(D); loop { tokio::select! { _ = \
                t.tick() => { poll_once(&s).await } } } }";
    let chain = "async fn poll_once(s: &S) { s.store.update_head().await; } \
                 impl Store { async fn update_head(&self) {} }";
    assert_eq!(
        jobs(&[(main, false), (chain, false)], &["update_head"]),
        ["update_head"]
    );
}

#[test]
fn what_a_timer_loop_runs_before_its_first_turn_is_its_job() {
    let main = "async fn main() { run().await }";
    let first = "async fn run() { refresh().await; loop { sleep(D).await; refresh().await } }";
    assert_eq!(
        jobs(&[(main, false), (first, false)], &["refresh"]),
        ["refresh"]
    );
    // A closure bound before the loop, called there and in the loop.
    let bound = "async fn run() { let task = || async { refresh().await }; task().await; \
                 loop { sleep(D).await; task().await } }";
    assert_eq!(
        jobs(&[(main, false), (bound, false)], &["refresh"]),
        ["refresh"]
    );
    // Something the block runs beside the loop: what it runs before the loop is no job's.
    let spawned = "async fn run() { tokio::spawn(refresh()); \
                   loop { sleep(D).await; refresh().await } }";
    assert!(jobs(&[(main, false), (spawned, false)], &["refresh"]).is_empty());
    let selected = "async fn run() { let task = || async { refresh().await }; \
                    tokio::select! { _ = task() => {}, _ = stop() => {} } \
                    loop { sleep(D).await; task().await } }";
    assert!(jobs(&[(main, false), (selected, false)], &["refresh"]).is_empty());
    // After the loop, or in another block than the loop's, is not before its first turn.
    let after = "async fn run() { loop { sleep(D).await; if done() { break; } } refresh().await }";
    assert!(jobs(&[(main, false), (after, false)], &["refresh"]).is_empty());
    let beside = "async fn run() { if warm() { refresh().await } \
                  tokio::spawn(async move { loop { sleep(D).await; refresh().await } }); }";
    assert!(jobs(&[(main, false), (beside, false)], &["refresh"]).is_empty());
}

#[test]
fn a_loop_that_sleeps_until_stopped_is_a_timer_loop() {
    // `timeout(every, stop.changed())`: waits `every`, or less when asked to stop.
    let watch = "async fn run(mut stop: Receiver<bool>) { while !*stop.borrow_and_update() { \
                 sync_once().await; if timeout(EVERY, stop.changed()).await.is_ok() { break } } }";
    assert_eq!(jobs(&[(watch, false)], &["sync_once"]), ["sync_once"]);
    let token = "async fn run(t: CancellationToken) { loop { sync_once().await; \
                 let _ = tokio::time::timeout(EVERY, t.cancelled()).await; } }";
    assert_eq!(jobs(&[(token, false)], &["sync_once"]), ["sync_once"]);
    // A timeout around the work itself is no timer: the loop spins.
    let bounded = "async fn run() { loop { let _ = timeout(D, sync_once()).await; } }";
    assert!(jobs(&[(bounded, false)], &["sync_once"]).is_empty());
}

#[test]
fn one_caller_outside_a_timer_loop_makes_it_no_job() {
    let main = "async fn run() { loop { refresh().await; sleep(D).await; } } \
                async fn handler() { refresh().await }";
    assert!(jobs(&[(main, false)], &["refresh"]).is_empty());
    // Passed on by name (a route, a spawn) is a caller too.
    let routes = "async fn run() { loop { refresh().await; sleep(D).await; } } \
                  fn app() -> Router { Router::new().route(\"/r\", post(refresh)) }";
    assert!(jobs(&[(routes, false)], &["refresh"]).is_empty());
}

#[test]
fn tests_calling_a_job_do_not_make_it_a_request() {
    let main = "async fn run() { loop { refresh().await; sleep(D).await; } }";
    let unit = "#[cfg(test)] mod tests { #[tokio::test] async fn t() { refresh().await } }";
    let it = "async fn it() { refresh().await }";
    let files = [(main, false), (unit, false), (it, true)];
    assert_eq!(jobs(&files, &["refresh"]), ["refresh"]);
}

#[test]
fn a_retry_loop_without_a_timer_or_a_channel_consumer_is_no_job() {
    let spin = "async fn run() { loop { if step().await { break } } }";
    assert!(jobs(&[(spin, false)], &["step"]).is_empty());
    // Fed by this process's handlers: runs wherever they run.
    let fed = "async fn run() { loop { select! { m = rx.recv() => keep(m), _ = t.tick() \
               => flush().await } } }";
    assert!(jobs(&[(fed, false)], &["flush"]).is_empty());
    let drains = "async fn run() { loop { flush().await; sleep(D).await } } \
                  async fn flush() { while let Ok(r) = rx.try_recv() {} write().await }";
    assert!(jobs(&[(drains, false)], &["write"]).is_empty());
}

#[test]
fn test_attributes_are_the_front_end_s() {
    let main = "async fn run() { loop { refresh().await; sleep(D).await; } }";
    let rstest = "#[rstest] async fn t() { refresh().await }";
    assert_eq!(
        jobs(&[(main, false), (rstest, false)], &["refresh"]),
        ["refresh"]
    );
    // Production code that derives something only in tests is production code.
    let handler = "#[cfg_attr(test, derive(Debug))] async fn handler() { refresh().await }";
    assert!(jobs(&[(main, false), (handler, false)], &["refresh"]).is_empty());
}

#[test]
fn a_retry_loop_is_no_job() {
    let found = "async fn load(c: &mut Conn) -> Result<Row> { loop { match get(c).await { \
                 Ok(r) => return Ok(r), Err(_) => sleep(D).await } } }";
    assert!(jobs(&[(found, false)], &["get"]).is_empty());
    let counted = "async fn load(c: &mut Conn) { let mut n = 0; while n < 5 { n += 1; \
                   if get(c).await.is_ok() { break; } sleep(D).await } }";
    assert!(jobs(&[(counted, false)], &["get"]).is_empty());
    let until_ok = "async fn mark(s: &S) { while let Err(e) = s.flag().await { sleep(D).await } }";
    assert!(jobs(&[(until_ok, false)], &["flag"]).is_empty());
    let connect = "fn listen() -> Client { loop { if let Ok(c) = connect() { break c; } \
                   backoff.sleep_async(); } }";
    assert!(jobs(&[(connect, false)], &["connect"]).is_empty());
    // Leaving without a value, at shutdown or when run once, is no retry.
    let daemon = "async fn run(daemon: bool) -> Result<()> { loop { harvest().await?; \
                  if stop() { break; } if daemon { sleep(D).await } else { return Ok(()); } } }";
    assert_eq!(jobs(&[(daemon, false)], &["harvest"]), ["harvest"]);
}

#[test]
fn work_a_loop_runs_side_by_side_is_no_job() {
    let spawned = "async fn run() { loop { let item = next().await; \
                   tokio::spawn(process(item)); sleep(D).await } }";
    assert!(jobs(&[(spawned, false)], &["process"]).is_empty());
    let joined = "async fn run() { loop { join_all(ids.iter().map(|i| process(i))).await; \
                  sleep(D).await } }";
    assert!(jobs(&[(joined, false)], &["process"]).is_empty());
    let unordered = "async fn run() { loop { let mut f = FuturesUnordered::new(); \
                     f.push(process(1)); sleep(D).await } }";
    assert!(jobs(&[(unordered, false)], &["process"]).is_empty());
    // A loop over the items, awaiting each, runs one at a time.
    let sequential = "async fn run() { loop { for i in ids { process(i).await } \
                      sleep(D).await } }";
    assert_eq!(jobs(&[(sequential, false)], &["process"]), ["process"]);
}

#[test]
fn a_worker_pool_is_no_job() {
    let pool = "async fn worker() { loop { claim().await; sleep(D).await } } \
                fn start(n: usize) { for _ in 0..n { tokio::spawn(worker()); } }";
    assert!(jobs(&[(pool, false)], &["claim"]).is_empty());
    let mapped = "async fn worker() { loop { claim().await; sleep(D).await } } \
                  fn start() { let h: Vec<_> = (0..4).map(|_| tokio::spawn(worker())).collect(); }";
    assert!(jobs(&[(mapped, false)], &["claim"]).is_empty());
    // Spawned once, from `main`.
    let one = "async fn worker() { loop { claim().await; sleep(D).await } } \
               fn main() { tokio::spawn(worker()); }";
    assert_eq!(jobs(&[(one, false)], &["claim"]), ["claim"]);
}

/// The span of the first `needle` in `text` (file 0).
fn at(text: &str, needle: &str) -> Span {
    let start = text.find(needle).unwrap_or(usize::MAX);
    Span::new(0, start..start + needle.len())
}

/// The span of the last `needle` in `text` (file 0).
fn last(text: &str, needle: &str) -> Span {
    let start = text.rfind(needle).unwrap_or(usize::MAX);
    Span::new(0, start..start + needle.len())
}

#[test]
fn statements_in_a_timer_loop_of_a_function_run_once_are_a_job() {
    let text = "async fn purge(pool: PgPool) { setup().await; loop { if due(&pool).await { \
                clean(&pool).await } sleep(D).await } report().await }\n\
                fn main() { tokio::spawn(purge(p)); }";
    let texts = texts(&[(text, false)]);
    let jobs = find(
        &texts,
        &HashSet::from([0]),
        (&[], &[], &[]),
        (Reach::default(), true),
        |_| vec![asked("purge", 0)],
    );
    assert!(jobs.once.contains(&asked("purge", 0).1));
    let [scan::TimerLoop { at: kw, whole, .. }] = jobs.loops[..] else {
        panic!("one loop expected: {:?}", jobs.loops);
    };
    assert_eq!(kw, at(text, "loop"));
    let body = "loop { if due(&pool).await { clean(&pool).await } sleep(D).await }";
    assert_eq!(whole, at(text, body));
    assert_eq!(
        jobs.loop_of([at(text, "clean(&pool)")].into_iter()),
        Some(kw)
    );
    // Run before the loop's first turn, in its block, with nothing beside it: the job's too;
    // after the loop, not.
    assert_eq!(jobs.loop_of([at(text, "setup()")].into_iter()), Some(kw));
    assert_eq!(jobs.loop_of([at(text, "report()")].into_iter()), None);
    // Reached from `main` through the spawned function.
    let chain = [at(text, "purge(p)"), at(text, "due(&pool)")];
    assert_eq!(jobs.loop_of(chain.into_iter()), Some(kw));
}

#[test]
fn a_timer_loop_a_pool_of_workers_runs_is_no_job() {
    let text = "async fn purge() { loop { clean().await; sleep(D).await } }\n\
                fn main() { for _ in 0..4 { tokio::spawn(purge()); } }";
    let texts = texts(&[(text, false)]);
    let own = |_: &Jobs| vec![asked("purge", 0), asked("main", 1)];
    let jobs = find(
        &texts,
        &HashSet::from([0]),
        (&[], &[], &[]),
        (Reach::default(), true),
        own,
    );
    assert!(!jobs.once.contains(&asked("purge", 0).1));
    assert!(jobs.once.contains(&asked("main", 1).1));
    let chain = [last(text, "purge()"), at(text, "clean()")];
    assert_eq!(jobs.loop_of(chain.into_iter()), None);
}

#[test]
fn only_a_text_with_a_timer_or_a_scheduler_word_may_hold_a_job() {
    assert!(words::may_wait("loop { tokio::time::sleep(d).await }"));
    assert!(words::may_wait("interval.tick().await"));
    assert!(words::may_wait("start_async_cron(\"x\", d, f)"));
    assert!(!words::may_wait("loop { work().await; if done { break } }"));
}

#[test]
fn hostile_nesting_is_read_to_a_bounded_depth() {
    // Each `while` reads the rest as its condition: without a bound, n levels of n tokens.
    let chain = format!("fn f() {{ refresh(); {} {{}} }}", "while ".repeat(50_000));
    let read = texts(&[(&chain, false)]);
    let found = find(
        &read,
        &HashSet::from([0]),
        (&[asked("refresh", 0)], &[], &[]),
        (Reach::default(), true),
        |_| Vec::new(),
    );
    assert!(found.called.is_empty());
    let deep = format!(
        "fn g() {{ {} refresh(); {} }}",
        "loop {".repeat(50_000),
        "}".repeat(50_000)
    );
    let texts = texts(&[(&deep, false)]);
    assert!(
        find(
            &texts,
            &HashSet::from([0]),
            (&[asked("refresh", 0)], &[], &[]),
            (Reach::default(), true),
            |_| Vec::new()
        )
        .called
        .is_empty()
    );
}

#[test]
fn a_closure_handed_to_a_scheduler_is_a_job() {
    let lemmy = "fn setup() { scheduler.every(1.day()).run(move || async move { \
                 recount(&mut pool).await }); }";
    assert_eq!(jobs(&[(lemmy, false)], &["recount"]), ["recount"]);
}

#[test]
fn a_caller_in_a_file_that_cannot_be_read_is_no_job_s() {
    let main = "async fn run() { loop { refresh().await; sleep(D).await; } }";
    let broken = "fn handler() { refresh(); \"unterminated }";
    assert!(jobs(&[(main, false), (broken, false)], &["refresh"]).is_empty());
}

#[test]
fn an_uncalled_function_and_a_call_cycle_are_no_job() {
    let text = "async fn a() { b().await } async fn b() { a().await } \
                async fn run() { loop { c().await; sleep(D).await } }";
    assert!(jobs(&[(text, false)], &["a", "lonely"]).is_empty());
}

/// The `main`s (file numbers) from which every run of the function named `name` in file 0 is
/// awaited to its end; none if some caller can drop it part way.
fn whole(files: &[(&str, bool)], name: &str) -> Option<Vec<FileId>> {
    let texts = texts(files);
    let found = find(
        &texts,
        &HashSet::new(),
        (&[], &[(name, 0)], &[]),
        (Reach::default(), true),
        |_| Vec::new(),
    );
    found.whole.get(&(name.to_string(), 0)).cloned()
}

#[test]
fn a_function_awaited_through_its_callers_from_main_is_run_whole() {
    let lib = "pub async fn run(p: &P) { loop { match run_once(p).await { _ => {} } } } \
               async fn run_once(p: &P) -> bool { true }";
    let main = "#[tokio::main] async fn main() { migrate::run(&pool).await; \
                worker::run(&pool).await.unwrap() }";
    assert_eq!(
        whole(&[(lib, false), (main, false)], "run_once"),
        Some(vec![1])
    );
}

#[test]
fn a_timeout_a_select_or_a_held_future_can_drop_it() {
    let lib = "pub async fn migrate(p: &P) {}";
    let cases = [
        "async fn main() { timeout(D, async { migrate(&p).await }).await; }",
        "async fn main() { tokio::select! { _ = async { migrate(&p).await } => {} } }",
        "async fn main() { tokio::select! { _ = migrate(&p) => {} } }",
        "async fn main() { let f = migrate(&p); f.await; }",
        "async fn main() { tokio::try_join!(async { migrate(&p).await }, other()); }",
    ];
    for main in cases {
        assert_eq!(
            whole(&[(lib, false), (main, false)], "migrate"),
            None,
            "{main}"
        );
    }
    let plain = "async fn main() { migrate(&p).await; }";
    assert_eq!(
        whole(&[(lib, false), (plain, false)], "migrate"),
        Some(vec![1])
    );
}

#[test]
fn a_handler_a_library_function_or_a_callback_is_not_run_whole() {
    let lib = "pub async fn reindex(p: &P) {} async fn handler(p: P) { reindex(&p).await }";
    let router = "async fn main() { serve(Router::new().route(\"/r\", post(handler))).await }";
    assert_eq!(whole(&[(lib, false), (router, false)], "reindex"), None);
    // Nothing in the run calls it: its callers are elsewhere.
    assert_eq!(whole(&[(lib, false)], "reindex"), None);
}

#[test]
fn tests_and_method_calls_do_not_call_a_free_function() {
    let lib = "pub async fn run(p: &P) {} struct R; impl R { async fn go(&self) { \
               self.run(|| async {}).await; } }";
    let main = "async fn main() { run(&p).await; tokio::spawn(r.run(f)); }";
    let test = "#[tokio::test] async fn t() { timeout(D, run(&p)).await; }";
    assert_eq!(
        whole(&[(lib, false), (main, false), (test, true)], "run"),
        Some(vec![1])
    );
    // A field of the name is no call of it either.
    let fields = "struct Args { run: bool } fn parse() -> Args { Args { run: true } }";
    assert_eq!(
        whole(&[(lib, false), (main, false), (fields, false)], "run"),
        Some(vec![1])
    );
    // A method named so is called by every site of the name.
    let method = "struct M; impl M { pub async fn run(&self) {} }";
    assert_eq!(whole(&[(method, false), (main, false)], "run"), None);
}

#[test]
fn a_call_cycle_leaves_the_answer_to_the_other_callers() {
    let lib = "pub async fn walk(d: u32) { if d > 0 { Box::pin(walk(d - 1)).await; \
               walk_again(d).await } } async fn walk_again(d: u32) { walk(d - 1).await }";
    let main = "async fn main() { walk(3).await }";
    assert_eq!(
        whole(&[(lib, false), (main, false)], "walk_again"),
        Some(vec![1])
    );
    // Called only on its cycle: no `main` runs it.
    assert_eq!(whole(&[(lib, false)], "walk_again"), Some(vec![]));
}

#[test]
fn calls_from_a_package_that_cannot_name_the_function_are_another_s() {
    let worker = "fn main() { tokio::spawn(async { loop { purge().await; sleep(D).await } }) } \
                  async fn purge() {}";
    // Another package runs a `purge` of its own side by side, once per request.
    let web = "async fn handle(rs: Vec<R>) { for r in rs { tokio::spawn(purge()); } } \
               async fn purge() {}";
    let run = |worker: &str, seen_by: Vec<Vec<usize>>| {
        let mut texts = texts(&[(worker, false), (web, false)]);
        texts.iter_mut().for_each(|t| t.package = Some(t.id));
        let names = [(
            ("purge".to_string(), Some(0)),
            Span::new(0, 0..worker.len()),
        )];
        let files = HashSet::from([0, 1]);
        let found = find(
            &texts,
            &files,
            (&names, &[], &[]),
            (Reach::of(seen_by), true),
            |_| Vec::new(),
        );
        found.called.contains_key(&names[0].1)
    };
    // `web` does not depend on the worker's package: its calls are of its own `purge`.
    assert!(run(worker, vec![vec![0], vec![1]]));
    // It does: one of its calls may be the worker's `purge`, run side by side.
    assert!(!run(worker, vec![vec![0, 1], vec![1]]));
    // A trait's method is called through the trait, from packages that need not depend on
    // the one implementing it.
    let dispatched = worker.replace(
        "async fn purge() {}",
        "impl Job for W { async fn purge() {} }",
    );
    assert!(!run(&dispatched, vec![vec![0], vec![1]]));
}

#[test]
fn a_variable_or_another_type_s_function_of_the_name_is_no_call() {
    // `Collector::start` runs a timer loop, and `main` starts it once.
    let collector = "impl Collector { fn start(self) { tokio::spawn(async move { loop { \
                     tick().await; self.collect().await } }); } }\nfn main() { c.start(); }";
    let once = |handler: &str| {
        let texts = texts(&[(collector, false), (handler, false)]);
        let unit = Span::new(0, 0..collector.find("\nfn main").unwrap_or(0));
        let own = |_: &Jobs| vec![(("start".to_string(), None), unit)];
        let found = find(
            &texts,
            &HashSet::from([0, 1]),
            (&[], &[], &[]),
            (Reach::default(), true),
            own,
        );
        found.once.contains(&unit)
    };
    // Handlers run side by side, one per request: what they mention there runs so too.
    let spawn = |body: &str| {
        format!("async fn handle(rs: Vec<R>) {{ for r in rs {{ tokio::spawn({body}); }} }}")
    };
    assert!(!once(&spawn("Collector::start(r)")));
    assert!(!once(&spawn("async move { record(start, r).await }")));
    // A variable of the name (bound by `let`, a parameter, a closure's), and another type's
    // function of the name, are no call of it.
    let bound = "async fn handle(rs: Vec<R>) { let start = now(); for r in rs { \
                 tokio::spawn(async move { record(start, r).await }); } }";
    assert!(once(bound));
    let param = "async fn handle(start: Instant, rs: Vec<R>) { for r in rs { \
                 tokio::spawn(async move { record(start, r).await }); } }";
    assert!(once(param));
    let closure = "async fn handle(rs: Vec<R>) { rs.into_iter().map(|(r, start)| \
                   tokio::spawn(async move { record(start, r).await })); }";
    assert!(once(closure));
    let other = spawn("Timer::start(r)") + " impl Timer { fn start(r: R) {} }";
    assert!(once(&other));
}

#[test]
fn modules_named_for_tests() {
    let named = |p: &str| module_named_for_tests(std::path::Path::new(p));
    assert!(named("crates/db/src/database/test_utils.rs"));
    assert!(named("src/testing/mod.rs") && named("src/fixtures.rs"));
    assert!(!named("src/contest.rs") && !named("src/db/mod.rs") && !named("src/latest_utils.rs"));
}
