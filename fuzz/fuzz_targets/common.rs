//! What every target asserts of a run: it returned (no panic, no abort), every span of every
//! diagnostic lies inside its file, and every output format renders.
//!
//! SARIF carries every rule's documentation, whatever the input: rendering it is most of a
//! small input's time. It is rendered for the inputs [`full`] picks (an eighth, chosen by
//! their bytes, so a crash reproduces), the other formats for all.
//!
//! Every input runs on one thread with txlint's stack, started once ([`on_stack`]): a thread
//! per input, whose stack the address sanitizer clears when it starts and ends, cost most of a
//! small input's time.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Mutex, OnceLock};

use txlint::Run;
use txlint::report::{self, TextStyle};

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on the fuzzing thread and waits for it to end (a panic there aborts the process,
/// as libFuzzer's panic hook does on every thread).
pub fn on_stack(job: impl FnOnce() + Send + 'static) {
    static WORKER: OnceLock<Mutex<(Sender<Job>, Receiver<()>)>> = OnceLock::new();
    let worker = WORKER.get_or_init(|| {
        txlint::io::run_on_this_thread();
        let (jobs, take) = channel::<Job>();
        let (done, wait) = channel();
        std::thread::Builder::new()
            .name("fuzz".into())
            .stack_size(txlint::STACK)
            .spawn(move || {
                for job in take {
                    job();
                    if done.send(()).is_err() {
                        return;
                    }
                }
            })
            .expect("the fuzzing thread starts");
        Mutex::new((jobs, wait))
    });
    let worker = worker.lock().expect("one input at a time");
    worker
        .0
        .send(Box::new(job))
        .expect("the fuzzing thread runs");
    worker.1.recv().expect("the input's run ends");
}

/// The inputs whose runs render SARIF too.
pub fn full(data: &[u8]) -> bool {
    data.iter()
        .fold(0u8, |h, b| h.wrapping_mul(31).wrapping_add(*b))
        % 8
        == 0
}

pub fn check(run: &Run, full: bool) {
    for d in &run.diagnostics {
        let spans = std::iter::once(d.span).chain(d.labels.iter().map(|l| l.span));
        for s in spans {
            let len = run.program.files[s.file].text().len();
            assert!(
                s.start() <= s.end() && s.end() <= len,
                "{}: span {s:?} outside 0..{len}",
                d.rule
            );
        }
    }
    report::json::render(run);
    if full {
        report::sarif::render(run);
    }
    report::model::render(run);
    report::text::render(
        run,
        TextStyle {
            color: false,
            width: 100,
        },
    );
}
