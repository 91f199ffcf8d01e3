//! The harness every crate's namespace tests share: prerequisites, shell
//! commands that must succeed, names unique per test process, running code
//! inside a network namespace, child processes that print `READY`, and
//! deterministic test data. Tests only ever use 198.18.0.0/15 inside
//! namespaces they create themselves.

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Why namespace tests cannot run here: the prerequisites missing among
/// root, iproute2 and, if `tun`, /dev/net/tun (`None`: they can run).
pub fn missing_prerequisites(tun: bool) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let mut missing = Vec::new();
    if uid != 0 {
        missing.push(format!("root (running as uid {uid})"));
    }
    if Command::new("ip").arg("-V").output().is_err() {
        missing.push("iproute2 (`ip`)".to_string());
    }
    if tun && !std::path::Path::new("/dev/net/tun").exists() {
        missing.push("/dev/net/tun".to_string());
    }
    (!missing.is_empty()).then(|| format!("needs {}", missing.join(", ")))
}

/// Whether namespace tests can run here (see [`missing_prerequisites`]);
/// prints why not.
pub fn can_run(tun: bool) -> bool {
    match missing_prerequisites(tun) {
        None => true,
        Some(why) => {
            eprintln!("cannot run namespace tests: {why}");
            false
        }
    }
}

/// A test function of a [`test_main!`](crate::test_main) binary and its name.
pub type NamedTest = (&'static str, fn());

/// The `main` of a test binary built with `harness = false` (libtest-mimic):
/// runs `plain` tests everywhere and `namespaced` ones only where
/// [`missing_prerequisites`]`(tun)` finds nothing missing. Elsewhere each
/// namespace test is reported as *ignored* (cargo's summary counts it under
/// "ignored", never "passed"), shown as `[needs ...] name ... ignored`, and
/// the reason is printed once. Panics fail a test, as under libtest.
pub fn run_tests(tun: bool, plain: &[NamedTest], namespaced: &[NamedTest]) -> ! {
    let args = libtest_mimic::Arguments::from_args();
    let missing = missing_prerequisites(tun);
    if let Some(why) = &missing {
        eprintln!(
            "skipping {} namespace test(s): {why}; they are reported as ignored",
            namespaced.len()
        );
    }
    let trial = |&(name, f): &NamedTest| {
        libtest_mimic::Trial::test(name, move || {
            f();
            Ok(())
        })
    };
    let mut trials: Vec<_> = plain.iter().map(trial).collect();
    trials.extend(namespaced.iter().map(|t| match &missing {
        None => trial(t),
        Some(why) => trial(t).with_kind(why.clone()).with_ignored_flag(true),
    }));
    libtest_mimic::run(&args, trials).exit()
}

/// Declares a test binary's `main` (with `harness = false` in Cargo.toml):
/// `plain` tests always run, `namespaced` ones need root, iproute2 and, with
/// `tun: true`, /dev/net/tun, and are reported as ignored (with the reason)
/// where these are missing. See [`run_tests`].
///
/// ```text
/// dchannel_base::test_main! {
///     tun: true,
///     plain: [flags_are_checked],
///     namespaced: [ping_through_the_tunnel, iperf_through_the_tunnel],
/// }
/// ```
#[macro_export]
macro_rules! test_main {
    (tun: $tun:expr, plain: [$($plain:ident),* $(,)?], namespaced: [$($ns:ident),* $(,)?] $(,)?) => {
        fn main() {
            $crate::testing::run_tests(
                $tun,
                &[$((stringify!($plain), $plain as fn())),*],
                &[$((stringify!($ns), $ns as fn())),*],
            )
        }
    };
}

/// Runs `args[0] args[1..]`; panics with its stderr and stdout (where e.g.
/// ping says what went wrong) unless it succeeds.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", args[0]));
    assert!(
        out.status.success(),
        "{} failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A short tag unique to this test process and call (pid + counter, hex), for
/// namespace and interface names (keep prefix + tag within 15 bytes).
pub fn unique_tag() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "{:x}{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// Runs `f` on a thread that has entered network namespace `ns` (setns is per
/// thread); sockets it creates live in that namespace.
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: setns on a valid namespace fd affects only this thread.
        let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

/// Spawns `argv` (stderr inherited, `RUST_LOG` default `warn`) and waits at
/// most 10 s for the line `READY` on its stdout; kills it and panics otherwise.
pub fn spawn_ready(argv: &[String]) -> Child {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {}: {e}", argv[0]));
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l == "READY" => child,
        other => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{:?} did not print READY: {other:?}", argv.join(" "));
        }
    }
}

/// SIGTERM to our child, then up to 5 s for it to exit (killed after that).
pub fn terminate(child: &mut Child) -> ExitStatus {
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    for _ in 0..100 {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait().expect("wait")
}

/// `len` deterministic, incompressible-looking bytes (xorshift64), different per `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_deterministic_and_seeded() {
        assert_eq!(pattern(64, 1), pattern(64, 1));
        assert_ne!(pattern(64, 1), pattern(64, 2));
        assert_eq!(pattern(3, 1).len(), 3);
        assert_ne!(unique_tag(), unique_tag());
    }

    #[test]
    fn missing_prerequisites_names_what_is_missing() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let why = missing_prerequisites(false);
        assert_eq!(why.as_deref().is_some_and(|w| w.contains("root")), !root);
        if let Some(w) = why {
            assert!(w.starts_with("needs "), "{w}");
        }
        assert_eq!(can_run(false), missing_prerequisites(false).is_none());
    }
}
