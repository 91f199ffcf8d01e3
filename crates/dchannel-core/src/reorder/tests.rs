//! The reorder buffer's release rules (NSDI'23 §4.3, FIFO loss, adaptive timeout).

use super::*;
use Channel::{Hbc, Llc};

type Rb = ReorderBuffer<u16, u32>;

/// A bare flow id is a flow of device 0 (the tests of one device's flows).
impl DeviceKey for u16 {
    fn device(&self) -> usize {
        0
    }
}

/// A buffer with `cfg` and the list it delivers into.
fn rb_with(cfg: ReorderConfig) -> (Rb, Vec<u32>) {
    (ReorderBuffer::new(cfg), Vec::new())
}

fn rb() -> (Rb, Vec<u32>) {
    rb_with(ReorderConfig::default())
}

#[test]
fn llc_packet_waits_for_earlier_hbc_packets() {
    // Sender: seq 0,1 on HBC (40 ms), seq 2 (an ACK) on LLC (5 ms): the LLC
    // packet arrives first and must wait (NSDI'23 §4.3).
    let (mut b, mut out) = rb();
    b.push(5 * MS, 1, 2, Llc, 100, 2, &mut out);
    assert!(out.is_empty());
    assert_eq!(b.occupancy(), 100);
    b.push(40 * MS, 1, 0, Hbc, 1400, 0, &mut out);
    assert_eq!(out, vec![0]);
    b.push(41 * MS, 1, 1, Hbc, 1400, 1, &mut out);
    assert_eq!(out, vec![0, 1, 2]);
    assert_eq!(b.occupancy(), 0);
    let s = b.stats(41 * MS);
    assert_eq!(s.in_order_releases, 1);
    assert_eq!(s.timeout_releases, 0);
    // 100 bytes held from 5 ms to 41 ms over a span of 36 ms: mean 100 B.
    assert!((s.mean_occupancy_bytes - 100.0).abs() < 1e-9);
    assert_eq!(s.max_occupancy_bytes, 100);
}

#[test]
fn in_order_llc_packets_pass_straight_through() {
    let (mut b, mut out) = rb();
    for s in 0..5u32 {
        b.push(u64::from(s) * MS, 9, s, Llc, 60, s, &mut out);
    }
    assert_eq!(out, vec![0, 1, 2, 3, 4]);
    assert_eq!(b.stats(5 * MS).held, 0);
}

#[test]
fn timeout_releases_after_100ms() {
    // seq 0 on the HBC is lost; seq 1, 2 on the LLC arrive at 5 and 6 ms.
    let (mut b, mut out) = rb();
    b.push(5 * MS, 1, 1, Llc, 60, 1, &mut out);
    b.push(6 * MS, 1, 2, Llc, 60, 2, &mut out);
    assert_eq!(b.poll_timeout(), Some(105 * MS));
    b.handle_timeout(104 * MS, &mut out);
    assert!(out.is_empty());
    b.handle_timeout(105 * MS, &mut out);
    assert_eq!(out, vec![1, 2], "seq 2 follows seq 1 once 0 is given up on");
    let s = b.stats(105 * MS);
    assert_eq!((s.timeout_releases, s.in_order_releases), (1, 1));
    // late seq 0 is delivered immediately (the stack drops the duplicate)
    b.push(200 * MS, 1, 0, Hbc, 1400, 0, &mut out);
    assert_eq!(out, vec![1, 2, 0]);
    // and the flow continues in order
    b.push(201 * MS, 1, 3, Llc, 60, 3, &mut out);
    assert_eq!(out.last(), Some(&3));
}

/// Feeds `flow`'s arrivals `(ms, seq, channel)` in turn, each packet its own
/// seq as payload (60 bytes on the LLC, 1400 on the HBC).
fn feed(b: &mut Rb, out: &mut Vec<u32>, flow: u16, arrivals: &[(u64, u32, Channel)]) {
    for &(ms, seq, ch) in arrivals {
        let len = if ch == Llc { 60 } else { 1400 };
        b.push(ms * MS, flow, seq, ch, len, seq, out);
    }
}

/// The default buffer with the FIFO loss rule and/or the adaptive timeout.
fn rb_opts(fifo_loss: bool, adaptive: bool) -> (Rb, Vec<u32>) {
    let cfg = ReorderConfig::default();
    rb_with(ReorderConfig {
        fifo_loss,
        adaptive,
        ..cfg
    })
}

fn fifo() -> (Rb, Vec<u32>) {
    rb_opts(true, false)
}

#[test]
fn fifo_loss_releases_at_the_next_hbc_arrival_not_the_timeout() {
    // seq 0 on the HBC is lost; seq 1 (LLC) arrives at 5 ms and is held; seq 2
    // (HBC) at 40 ms proves 0 lost (the HBC would have delivered it first):
    // 1 goes at 40 ms, before 2, not at the 105 ms timeout.
    let (mut b, mut out) = fifo();
    feed(&mut b, &mut out, 1, &[(5, 1, Llc)]);
    assert!(out.is_empty());
    feed(&mut b, &mut out, 1, &[(40, 2, Hbc)]);
    assert_eq!(out, vec![1, 2]);
    assert_eq!(b.occupancy(), 0);
    b.handle_timeout(105 * MS, &mut out);
    assert_eq!(out, vec![1, 2], "nothing left for the timeout");
    let s = b.stats(105 * MS);
    assert_eq!((s.fifo_releases, s.timeout_releases), (1, 0));
    // The same arrivals without the rule: 1 waits for the timeout.
    let (mut b, mut out) = rb();
    feed(&mut b, &mut out, 1, &[(5, 1, Llc), (40, 2, Hbc)]);
    assert_eq!(out, vec![2]);
    b.handle_timeout(105 * MS, &mut out);
    assert_eq!(out, vec![2, 1]);
}

#[test]
fn fifo_loss_still_waits_for_holes_above_the_hbc_arrival() {
    // Sent: 0 HBC, 1 HBC (lost), 2 HBC, 3 LLC, 4 HBC. 3 arrives first (held);
    // 0 arrives: in order, 3 still waits for 1 and 2; 2 arrives: 1 is lost
    // (FIFO), so 2 is delivered and 3 follows at once, in order.
    let (mut b, mut out) = fifo();
    feed(&mut b, &mut out, 7, &[(5, 3, Llc), (30, 0, Hbc)]);
    assert_eq!(out, vec![0]);
    assert_eq!(b.occupancy(), 60, "3 still waits for 1 and 2");
    feed(&mut b, &mut out, 7, &[(32, 2, Hbc)]);
    assert_eq!(out, vec![0, 2, 3]);
    feed(&mut b, &mut out, 7, &[(33, 4, Hbc)]);
    assert_eq!(out, vec![0, 2, 3, 4]);
    let s = b.stats(33 * MS);
    assert_eq!(
        (s.fifo_releases, s.in_order_releases, s.timeout_releases),
        (0, 1, 0)
    );
}

#[test]
fn fifo_loss_releases_several_held_below_in_order() {
    // 0 and 2 lost on the HBC; 1 and 3 on the LLC held; HBC 4 frees both.
    let (mut b, mut out) = fifo();
    let arrivals = [(5, 1, Llc), (6, 3, Llc), (40, 4, Hbc)];
    feed(&mut b, &mut out, 2, &arrivals);
    assert_eq!(out, vec![1, 3, 4]);
    assert_eq!(b.stats(40 * MS).fifo_releases, 2);
    // a late LLC packet below is delivered as before (the stack drops duplicates)
    feed(&mut b, &mut out, 2, &[(41, 0, Llc)]);
    assert_eq!(out, vec![1, 3, 4, 0]);
}

fn adaptive() -> (Rb, Vec<u32>) {
    rb_opts(false, true)
}

/// `flow`'s seq 1 arrives on the LLC at `t` ms and waits for seq 0 until the
/// timeout in force releases it; returns that moment (ms).
fn held_until_timeout(b: &mut Rb, out: &mut Vec<u32>, flow: u16, t: u64) -> u64 {
    feed(b, out, flow, &[(t, 1, Llc)]);
    let released = t + b.stats(t * MS).timeout_ms as u64;
    b.handle_timeout(released * MS, out);
    released
}

#[test]
fn a_late_arrival_after_a_timeout_doubles_the_adaptive_timeout() {
    // seq 0 (HBC) is stuck in a queue: seq 1 (LLC) at 5 ms times out at 105 ms,
    // then 0 arrives at 150 ms: late, not lost -> the timeout becomes 200 ms.
    let (mut b, mut out) = adaptive();
    assert_eq!(held_until_timeout(&mut b, &mut out, 1, 5), 105);
    feed(&mut b, &mut out, 1, &[(150, 0, Hbc)]);
    assert_eq!(out, vec![1, 0]);
    let s = b.stats(150 * MS);
    assert_eq!((s.late_after_timeout, s.timeout_ms), (1, 200.0));
    // The next held packet waits 200 ms: seq 3 at 200 ms, deadline 400 ms.
    feed(&mut b, &mut out, 1, &[(200, 3, Llc)]);
    assert_eq!(b.poll_timeout(), Some(400 * MS));
    // More late arrivals, one per flow: 400, 800, 1600, then the 2 s cap.
    let mut t = 1000;
    for (flow, want) in [
        (2, 400.0),
        (3, 800.0),
        (4, 1600.0),
        (5, 2000.0),
        (6, 2000.0),
    ] {
        t = held_until_timeout(&mut b, &mut out, flow, t);
        feed(&mut b, &mut out, flow, &[(t + 1, 0, Hbc)]);
        assert_eq!(b.stats(t * MS).timeout_ms, want, "flow {flow}");
    }
}

#[test]
fn a_lost_predecessor_leaves_the_adaptive_timeout_alone() {
    // seq 0 never comes: the timeout was right, nothing changes.
    let (mut b, mut out) = adaptive();
    held_until_timeout(&mut b, &mut out, 1, 5);
    feed(&mut b, &mut out, 1, &[(150, 2, Hbc)]);
    assert_eq!(out, vec![1, 2]);
    let s = b.stats(150 * MS);
    assert_eq!((s.late_after_timeout, s.timeout_ms), (0, 100.0));
}

#[test]
fn the_adaptive_timeout_halves_after_ten_quiet_seconds() {
    let (mut b, mut out) = adaptive();
    held_until_timeout(&mut b, &mut out, 1, 5);
    feed(&mut b, &mut out, 1, &[(150, 0, Hbc)]); // late: 200 ms from 150 ms
    feed(&mut b, &mut out, 1, &[(10_149, 2, Hbc)]);
    assert_eq!(b.stats(10_149 * MS).timeout_ms, 200.0, "not yet 10 s");
    feed(&mut b, &mut out, 1, &[(10_150, 3, Hbc)]);
    assert_eq!(b.stats(10_150 * MS).timeout_ms, 100.0);
    feed(&mut b, &mut out, 1, &[(30_000, 4, Hbc)]);
    assert_eq!(
        b.stats(30_000 * MS).timeout_ms,
        100.0,
        "never below the base"
    );
}

#[test]
fn late_arrivals_are_counted_without_adapting() {
    // The paper's fixed timeout: the late packet is counted, the timeout stays.
    let (mut b, mut out) = rb();
    held_until_timeout(&mut b, &mut out, 1, 5);
    feed(&mut b, &mut out, 1, &[(150, 0, Hbc), (151, 0, Hbc)]);
    let s = b.stats(151 * MS);
    assert_eq!(
        (s.late_after_timeout, s.timeout_ms),
        (1, 100.0),
        "counted once"
    );
}

#[test]
fn hbc_gap_then_llc_fills_it() {
    // seq 0 on the LLC is *slower* (queued), seq 1 on the HBC arrives first.
    let (mut b, mut out) = rb();
    let arrivals = [(10, 1, Hbc), (12, 0, Llc), (13, 2, Llc)];
    feed(&mut b, &mut out, 1, &arrivals);
    assert_eq!(
        out,
        vec![1, 0, 2],
        "nothing held: predecessors all delivered"
    );
}

#[test]
fn flows_are_independent() {
    let (mut b, mut out) = rb();
    b.push(0, 1, 1, Llc, 60, 11, &mut out);
    b.push(0, 2, 0, Llc, 60, 20, &mut out);
    assert_eq!(out, vec![20]);
}

#[test]
fn per_flow_bound_releases_in_order() {
    let (mut b, mut out) = rb_with(ReorderConfig {
        max_flow_bytes: 250,
        ..ReorderConfig::default()
    });
    b.push(0, 1, 1, Llc, 100, 1, &mut out);
    b.push(0, 1, 2, Llc, 100, 2, &mut out);
    assert!(out.is_empty());
    b.push(0, 1, 3, Llc, 100, 3, &mut out);
    assert_eq!(out, vec![1, 2, 3]);
    assert_eq!(b.occupancy(), 0);
    assert_eq!(b.stats(0).overflow_releases, 3);
}

#[test]
fn sequence_wraps() {
    let (mut b, mut out) = rb();
    // Jumps of 2^30 are taken as restarts (resync); they bring the flow
    // to just before the u32 wrap.
    for (i, s) in [0x4000_0000u32, 0x8000_0000, 0xC000_0000, u32::MAX - 1]
        .into_iter()
        .enumerate()
    {
        b.push(0, 1, s, Hbc, 10, i as u32, &mut out);
    }
    assert_eq!(out, vec![0, 1, 2, 3]);
    b.push(0, 1, 1, Llc, 10, 10, &mut out); // after the wrap: u32::MAX, 0 missing
    assert_eq!(out.len(), 4, "held");
    b.push(0, 1, u32::MAX, Hbc, 10, 11, &mut out);
    b.push(0, 1, 0, Hbc, 10, 12, &mut out);
    assert_eq!(out[4..], [11, 12, 10]);
}

#[test]
fn bounded_flow_count() {
    let (mut b, mut out) = rb_with(ReorderConfig {
        max_flows: 10,
        ..ReorderConfig::default()
    });
    for k in 0..100u16 {
        b.push(u64::from(k), k, 1, Llc, 10, u32::from(k), &mut out);
    }
    assert_eq!(b.flows(), 10);
    assert!(b.occupancy() <= 100);
}

/// A gateway's `--threads 3`: each worker's buffer gets a third of the
/// gateway-wide caps, rounded up (67,108,864 / 3 = 22,369,621.3 bytes,
/// 65,536 / 3 = 21,845.3 flows), the per-flow and per-device ones whole.
#[test]
fn per_worker_splits_the_gateway_wide_caps_only() {
    let all = ReorderConfig::default();
    let one = all.per_worker(3);
    assert_eq!((one.max_total_bytes, one.max_flows), (22_369_622, 21_846));
    assert_eq!(
        (
            one.max_flow_bytes,
            one.max_device_bytes,
            one.max_device_flows
        ),
        (
            all.max_flow_bytes,
            all.max_device_bytes,
            all.max_device_flows
        )
    );
    let same = all.per_worker(1);
    assert_eq!(
        (same.max_total_bytes, same.max_flows),
        (all.max_total_bytes, all.max_flows)
    );
}
