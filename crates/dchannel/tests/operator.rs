//! What an operator trips on (issue 38): `genkey --out` never destroys a key
//! by accident, `--stats-json` into a missing directory is refused at start,
//! logs redirected to a file carry no colour codes, SIGHUP neither kills the
//! agent nor loses its stats (the gateway reloads its devices file), `--tun-route` routes into the TUN at start, and
//! `dchannel show` prints both channels with their traffic.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn genkey_out_refuses_an_existing_file_unless_forced() {
    let dir = std::env::temp_dir().join(format!("dch-genkey-{}", unique_tag()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("device.key");
    let k = key.to_str().unwrap();
    dchannel(&["genkey", "--out", k]);
    let live = std::fs::read_to_string(&key).unwrap();
    let o = run(&["genkey", "--out", k]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("--out {k}: the file exists")) && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&key).unwrap(), live, "key changed");
    dchannel(&["genkey", "--out", k, "--force"]);
    let new = std::fs::read_to_string(&key).unwrap();
    assert!(new != live && new.trim().len() == 44, "{new}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// [`GATEWAY_ARGV_UNSTARTED`] plus `extra`.
fn gateway_unstarted(extra: &[&str]) -> std::process::Output {
    run(&[&GATEWAY_ARGV_UNSTARTED[..], extra].concat())
}

/// Starts `argv` (an agent) with its stderr in `log` and stdout piped.
fn spawn_logged(argv: &[String], log: &std::path::Path) -> std::process::Child {
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn stats_json_into_a_missing_directory_is_refused_at_start() {
    let missing = std::env::temp_dir().join(format!("dch-no-such-dir-{}", unique_tag()));
    let path = missing.join("gateway.json");
    let o = gateway_unstarted(&["--stats-json", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--stats-json {}: directory {} does not exist",
            path.display(),
            missing.display()
        )),
        "{err}"
    );
    // A directory that exists passes this check (the run stops later: no --key).
    let ok = std::env::temp_dir().join("gateway.json");
    let o = gateway_unstarted(&["--stats-json", ok.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(1) && err.contains("--key FILE is required"),
        "{err}"
    );
}

fn logs_carry_no_colour_codes_when_stderr_is_not_a_terminal() {
    // A warning (scale outside 0.2..5) is logged before the run stops (no --key).
    let o = gateway_unstarted(&["--hbc-rtt-scale", "0.1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("WARN") && err.contains("--hbc-rtt-scale 0.1 is outside"),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "colour codes in {err:?}");
}

fn sighup_is_logged_and_ignored_and_tun_route_is_added() {
    let t = Topo::new();
    let log = t.path("gw.log");
    let argv = t.gateway_argv("dchannel", &["--tun-route", "198.19.0.2/32"]);
    let mut gw = spawn_logged(&argv, &log);
    let mut first = String::new();
    BufReader::new(gw.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "READY");
    let route = Command::new("ip")
        .args(["-n", &t.gw, "route", "show", "198.19.0.2/32"])
        .output()
        .unwrap();
    let route = String::from_utf8_lossy(&route.stdout).to_string();
    assert!(route.contains(&format!("dev {}", t.tuns().0)), "{route:?}");
    // SAFETY: signalling our own child by its pid.
    unsafe { libc::kill(gw.id() as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(300));
    assert!(gw.try_wait().unwrap().is_none(), "SIGHUP ended the gateway");
    let text = std::fs::read_to_string(&log).unwrap();
    // an encrypted gateway reloads its devices file (unchanged here)
    assert!(
        text.contains("SIGHUP: ") && text.contains("no change"),
        "{text}"
    );
    assert!(terminate(&mut gw).success());
    let stats = read_json(&t.path("gw.json"));
    assert_eq!(stats["role"], "gateway", "{stats}");
}

fn client_with_a_wrong_gateway_key_never_prints_ready_and_says_why() {
    let t = Topo::new();
    let gw_log = t.path("gw.log");
    let mut gw = spawn_logged(&t.gateway_argv("dchannel", &[]), &gw_log);
    let gw_out = BufReader::new(gw.stdout.take().unwrap());
    assert!(
        gw_out.lines().map_while(Result::ok).any(|l| l == "READY"),
        "gateway: no READY"
    );
    // A valid key, but not the gateway's (RFC 7748 §6.1, Bob's public key).
    let wrong = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=";
    let mut argv = t.client_argv("dchannel", &[]);
    let at = argv.iter().position(|a| a == "--gateway-key").unwrap() + 1;
    argv[at] = wrong.to_string();
    let log = t.path("ue.log");
    let mut ue = spawn_logged(&argv, &log);
    let out = ue.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    // The first warning is due after 3 s: within 5 s, and no READY meanwhile.
    let got = rx.recv_timeout(Duration::from_secs(5));
    assert!(got.is_err(), "client printed {got:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let warn = text
        .lines()
        .find(|l| l.contains("not READY: no session with the gateway after 3 s"))
        .unwrap_or_else(|| panic!("no warning in {text}"));
    // Probes start a handshake at once and retry it every second: 3 or 4 by now.
    let sent: u64 = warn
        .split("handshake sent ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{warn}"));
    assert!((2..=5).contains(&sent), "{warn}");
    assert!(warn.contains("wrong --gateway-key"), "{warn}");
    // Stopped while connecting: exits 0 with its stats, like a connected agent.
    assert!(terminate(&mut ue).success());
    let ue_stats = read_json(&t.path("ue.json"));
    assert_eq!(
        ue_stats["crypto"]["handshakes"]["completed_as_initiator"], 0,
        "{ue_stats}"
    );
    assert!(terminate(&mut gw).success());
    // The gateway names the refusals in its log (at most one line per 10 s): the
    // first handshake is refused within a second of the client's start.
    let text = std::fs::read_to_string(&gw_log).unwrap();
    let refused = text
        .lines()
        .find(|l| l.contains("WARN") && l.contains("refused"))
        .unwrap_or_else(|| panic!("no refused handshakes in {text}"));
    assert!(
        refused.contains("bad_mac1") && refused.contains("wrong gateway key"),
        "{refused}"
    );
    assert_eq!(text.matches("handshake message(s)").count(), 1, "{text}");
    let gw_stats = read_json(&t.path("gw.json"));
    assert!(
        gw_stats["crypto"]["drops"]["bad_mac1"].as_u64() >= Some(2),
        "{gw_stats}"
    );
}

fn show_prints_both_channels_with_their_traffic() {
    let t = Topo::new();
    let metrics = ["--metrics-addr", "127.0.0.1:9100"];
    // by size: the bulk down the HBC, the ACKs up the LLC, both channels carry data
    let mut agents = t.start("pkt-size:750", &metrics);
    // 256 KiB down the tunnel (bulk down, ACKs up)
    assert_eq!(t.download(pattern(1 << 18, 3), 7002).len(), 1 << 18);
    let show = |extra: &[&str]| {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &t.ue,
                BIN,
                "show",
                "--metrics",
                "127.0.0.1:9100",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let text = show(&[]);
    assert!(
        text.starts_with("role: client  sessions: 1/1  session age: "),
        "{text}"
    );
    assert!(
        text.contains("\nchannel HBC\n") && text.contains("\nchannel LLC\n"),
        "{text}"
    );
    assert!(text.contains("completed_as_initiator 1"), "{text}");
    let j: serde_json::Value = serde_json::from_str(&show(&["--json"])).unwrap();
    for ch in ["hbc", "llc"] {
        let c = &j["channels"][ch];
        let bytes = c["tx_bytes"].as_u64().unwrap() + c["rx_bytes"].as_u64().unwrap();
        assert!(bytes > 0, "{ch}: no bytes in {j}");
        assert_eq!(c["peers"][0]["up"], true, "{j}");
        assert!(c["peers"][0]["rtt_ms"].as_f64().unwrap() > 0.0, "{j}");
    }
    // the download came down the tunnel: at least its bytes were received
    let rx: u64 = ["hbc", "llc"]
        .iter()
        .map(|ch| j["channels"][ch]["rx_bytes"].as_u64().unwrap())
        .sum();
    assert!(rx > 1 << 18, "{j}");
    assert!(j["session_age_s"].as_f64().unwrap() > 0.0, "{j}");
    agents.stop();
}

dchannel_base::test_main! {
    tun: true,
    plain: [
        genkey_out_refuses_an_existing_file_unless_forced,
        stats_json_into_a_missing_directory_is_refused_at_start,
        logs_carry_no_colour_codes_when_stderr_is_not_a_terminal,
    ],
    namespaced: [
        sighup_is_logged_and_ignored_and_tun_route_is_added,
        client_with_a_wrong_gateway_key_never_prints_ready_and_says_why,
        show_prints_both_channels_with_their_traffic,
    ],
}
