//! Cell runs on synthetic traces with hand-computed decisions and queue delays.

use crate::cell::{run, CellConfig, PageResult, Rule};
use crate::trace::{Trace, HEADER};
use dchannel_core::MS;

/// A trace from rows `t_ns,dir,proto,src,sport,dst,dport,ip_len`.
fn trace(name: &str, rows: &[&str]) -> Trace {
    Trace::parse(name, &format!("{HEADER}\n{}\n", rows.join("\n"))).unwrap()
}

/// `users` users starting together at t=0 (think 1 ns, duration 1 ns: one page
/// each), C = `mbit`, no per-packet overhead, NSDI'23 §4.1's delays (HBC 20 ms,
/// LLC 5 ms one-way).
fn cfg(users: u32, mbit: f64, policy: &str, rule: Rule) -> CellConfig {
    CellConfig {
        users,
        capacity_bps: mbit * 1e6,
        limit_bytes: 1_000_000,
        rule,
        share_burst: 1500,
        policy: policy.into(),
        hbc_owd: 20 * MS,
        llc_owd: 5 * MS,
        overhead: 0,
        duration: 1,
        think: 1,
        seed: 1,
    }
}

fn pages(c: &CellConfig, traces: &[Trace]) -> Vec<PageResult> {
    let mut out = Vec::new();
    run(c, traces, |p| out.push(p)).unwrap();
    out.sort_by_key(|p| p.user);
    out
}

#[test]
fn two_users_one_mtu_packet_each_second_waits_one_millisecond() {
    // C = 12 Mbit/s: a 1500 B packet takes 1 ms; both go on the LLC (all-llc)
    // at t=0, so user 1's (second in line: ties go by user) waits 1 ms.
    let t = trace("p", &["0,up,17,198.19.0.2,1000,198.18.0.1,2000,1500"]);
    let c = cfg(2, 12.0, "all-llc", Rule::None);
    let mut got = Vec::new();
    let s = run(&c, std::slice::from_ref(&t), |p| got.push(p)).unwrap();
    got.sort_by_key(|p| p.user);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].wait_p99_ms, Some(0.0));
    assert!((got[1].wait_p50_ms.unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(
        (got[1].llc_pkts, got[1].llc_bytes, got[1].llc_frac),
        (1, 1500, 1.0)
    );
    assert_eq!((s.pages, s.pkts, s.llc_pkts, s.overflow_pkts), (2, 2, 2, 0));
    // cell p95 of {0, 1 ms}: 1 ms, within the histogram's 1/128
    assert!((s.wait_p95_ms.unwrap() - 1.0).abs() < 1.0 / 128.0);
}

/// Three 1000 B downlink packets of different flows at t=0.
fn three_kilobyte_packets() -> Trace {
    trace(
        "burst",
        &[
            "0,down,17,198.18.0.1,53,198.19.0.2,1001,1000",
            "0,down,17,198.18.0.1,53,198.19.0.2,1002,1000",
            "0,down,17,198.18.0.1,53,198.19.0.2,1003,1000",
        ],
    )
}

#[test]
fn rule_a_users_steer_as_if_alone_and_queue_behind_each_other() {
    // dchannel alpha 0.75, 15 ms gap, C = 2 Mbit/s = 250 B/ms: LLC while
    // packet + own virtual queue < 15 / 1.75 x 250 = 2142.9 B (steer.rs), so
    // each user sends 1000 B (queue 0) and 1000 B (queue 1000) on the LLC and
    // the third (queue 2000) on the HBC, as if it were alone. The shared queue
    // holds all four: waits 0, 4 ms (user 0), 8 ms, 12 ms (user 1).
    let got = pages(
        &cfg(2, 2.0, "dchannel", Rule::None),
        &[three_kilobyte_packets()],
    );
    assert_eq!(got.len(), 2);
    for p in &got {
        assert_eq!((p.pkts, p.llc_pkts, p.diverted_pkts), (3, 2, 0));
        assert!((p.llc_frac - 2.0 / 3.0).abs() < 1e-12);
    }
    assert_eq!(got[0].wait_p50_ms, Some(0.0));
    assert!((got[0].wait_p99_ms.unwrap() - 4.0).abs() < 1e-9);
    assert!((got[1].wait_p50_ms.unwrap() - 8.0).abs() < 1e-9);
    assert!((got[1].wait_p95_ms.unwrap() - 12.0).abs() < 1e-9);
}

#[test]
fn rule_b_diverts_over_budget_packets_to_the_hbc() {
    // Same burst, rule (b): C split into 1 Mbit/s per user, burst 1500 B. Each
    // user's first 1000 B fits its bucket (500 B left), its second (which
    // Algorithm 1 put on the LLC) does not and goes to the HBC. The shared
    // queue holds two packets: user 1 waits 1000 B / 250 B/ms = 4 ms.
    let got = pages(
        &cfg(2, 2.0, "dchannel", Rule::Share),
        &[three_kilobyte_packets()],
    );
    for p in &got {
        assert_eq!((p.llc_pkts, p.llc_bytes, p.diverted_pkts), (1, 1000, 1));
    }
    assert_eq!(got[0].wait_p50_ms, Some(0.0));
    assert!((got[1].wait_p50_ms.unwrap() - 4.0).abs() < 1e-9);
}

#[test]
fn packets_over_the_shared_limit_overflow() {
    // all-llc, limit 2500 B: user 0's 1000 + 1000 fit, its third (3000 B) does
    // not; user 1 finds 2000 B ahead at t=0, so each of its packets needs
    // 2000 + 1000 > 2500 B: all three overflow.
    let mut c = cfg(2, 2.0, "all-llc", Rule::None);
    c.limit_bytes = 2500;
    let got = pages(&c, &[three_kilobyte_packets()]);
    assert_eq!((got[0].llc_pkts, got[0].overflow_pkts), (3, 1));
    assert_eq!((got[1].llc_pkts, got[1].overflow_pkts), (3, 3));
    assert_eq!(got[1].wait_p50_ms, None);
}

#[test]
fn users_browse_page_after_page_until_the_duration() {
    // One user, 10 ms pages, think mean 50 ms, 1 s: every page starts before
    // 1 s and after the previous one's last packet; numbered in order.
    let t = trace(
        "p",
        &[
            "0,up,6,198.19.0.2,40000,198.18.0.1,443,60",
            "10000000,down,6,198.18.0.1,443,198.19.0.2,40000,1500",
        ],
    );
    let mut c = cfg(1, 10.0, "dchannel", Rule::None);
    c.duration = 1_000 * MS;
    c.think = 50 * MS;
    let got = pages(&c, std::slice::from_ref(&t));
    // 1 s / (10 ms + 50 ms) ~ 17 pages; a wide band that still fails if
    // think times were ignored (100) or the duration (unbounded)
    assert!((8..=30).contains(&got.len()), "{} pages", got.len());
    for (i, w) in got.windows(2).enumerate() {
        assert_eq!(w[1].seq, w[0].seq + 1);
        assert!(w[1].start_ms > w[0].start_ms + 10.0, "page {i}");
    }
    assert!(got.iter().all(|p| p.start_ms < 1_000.0 && p.pkts == 2));
    // the same seed gives the same cell
    assert_eq!(pages(&c, &[t]), got);
}

#[test]
fn bad_configurations_are_refused() {
    let t = three_kilobyte_packets();
    let e = run(
        &cfg(0, 2.0, "dchannel", Rule::None),
        std::slice::from_ref(&t),
        |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("users"));
    let e = run(
        &cfg(1, 2.0, "bogus", Rule::None),
        std::slice::from_ref(&t),
        |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("unknown policy"), "{e}");
    let e = run(&cfg(1, 2.0, "dchannel", Rule::None), &[], |_| {}).unwrap_err();
    assert!(e.to_string().contains("no trace"));
}

#[test]
fn rule_b_keeps_every_user_within_its_share_plus_one_packet_per_direction() {
    // 4 users, C = 2 Mbit/s: 500 kbit/s = 62.5 B/ms each per direction, burst
    // 1500 B. A trace offering 1000 B every ms in both directions for 50 ms
    // (t = 0..49 ms, far over the share), all-llc. Per direction: t=0 admits
    // 1000 B (500 B left); 1000 B of credit is back at 8 ms, then every 16 ms:
    // 0, 8, 24, 40 ms = 4000 B, within 62.5 B/ms x 49 ms + 1500 B = 4562.5 B.
    // The other 46 packets per direction are diverted, none lost.
    let rows: Vec<String> = (0..50u64)
        .flat_map(|i| {
            let t = i * MS;
            [
                format!("{t},up,17,198.19.0.2,1000,198.18.0.1,2000,1000"),
                format!("{t},down,17,198.18.0.1,2000,198.19.0.2,1000,1000"),
            ]
        })
        .collect();
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let got = pages(
        &cfg(4, 2.0, "all-llc", Rule::Share),
        &[trace("heavy", &rows)],
    );
    assert_eq!(got.len(), 4);
    for p in &got {
        assert_eq!(p.pkts, 100);
        assert!(
            p.llc_bytes <= 2 * 4625,
            "user {}: {} B",
            p.user,
            p.llc_bytes
        );
        // at least the two bursts' worth got through, and the rest was diverted
        assert!(p.llc_bytes >= 2 * 1000, "user {}", p.user);
        assert_eq!(p.llc_pkts + p.diverted_pkts, p.pkts, "user {}", p.user);
        assert_eq!(p.overflow_pkts, 0);
    }
}
