//! Limits between a gateway's devices at the endpoint (issue 37): the
//! gateway-wide cap on sender flows takes from the device with the most, and
//! the per-device counters reach [`Shared`]. Synthetic time.

use super::test_devices::device;
use super::*;
use crate::packet::build;
use crate::policy::parse_spec;
use crate::MS;

/// A gateway for devices 198.19.0.2 and .3 (endpoints known) with at most
/// `total` sender flows in all.
fn gateway(total: usize) -> SendHalf<TokenAuth> {
    send_workers(total, 1).pop().expect("one worker")
}

/// The send halves of `n` workers of [`gateway`]`(total)`.
fn send_workers(total: usize, n: usize) -> Vec<SendHalf<TokenAuth>> {
    let peers = vec![device(2, 1), device(3, 2)];
    let mut cfg = Config::new(Role::Gateway);
    cfg.max_flows_total = total;
    let auth = TokenAuth::new(&peers).unwrap();
    new_workers::<Vec<u8>, _>(cfg, peers, auth, || parse_spec("all-hbc", 0.75).unwrap(), n)
        .unwrap()
        .into_iter()
        .map(|(tx, _rx)| tx)
        .collect()
}

/// Sends a downlink UDP packet from source port `sport` to device `.dev`.
fn send(tx: &mut SendHalf<TokenAuth>, now: Nanos, dev: u8, sport: u16) {
    let pkt = build::udp4([198, 18, 3, 2], [198, 19, 0, dev], sport, 40000, &[0; 20]);
    let mut buf = vec![0u8; HEADROOM + pkt.len() + tx.tailroom()];
    buf[HEADROOM..HEADROOM + pkt.len()].copy_from_slice(&pkt);
    tx.handle_tun(now, &mut buf, pkt.len()).unwrap();
}

fn flows_of(tx: &mut SendHalf<TokenAuth>, peer: usize) -> usize {
    tx.steerer(peer).flows()
}

#[test]
fn at_the_gateway_flow_cap_the_device_with_the_most_flows_loses_one() {
    let mut tx = gateway(4);
    for sport in 1..=3 {
        send(&mut tx, sport as u64 * MS, 2, sport);
    }
    send(&mut tx, 10 * MS, 3, 1);
    send(&mut tx, 11 * MS, 2, 1); // device .2's flow 1 seen again
    assert_eq!(tx.flows(), 4);
    // device .3's second flow: .2 (3 flows) loses its least recently seen (port 2)
    send(&mut tx, 12 * MS, 3, 2);
    assert_eq!((flows_of(&mut tx, 0), flows_of(&mut tx, 1)), (2, 2));
    let st = tx.steerer(0).flow_table().stats;
    assert_eq!((st.gateway_evictions, st.forced_evictions), (1, 0));
    // device .2 cycling new flows from here on evicts only its own (a tie
    // goes to the device adding the flow)
    for sport in 100..200 {
        send(&mut tx, 20 * MS + u64::from(sport), 2, sport);
    }
    assert_eq!((flows_of(&mut tx, 0), flows_of(&mut tx, 1)), (2, 2));
    assert_eq!(tx.steerer(1).flow_table().stats.gateway_evictions, 0);
    assert_eq!(tx.steerer(0).flow_table().stats.gateway_evictions, 101);
    // published per device at the next flow expiry
    tx.handle_timeout(2_000 * MS);
    let l = tx.shared().peers()[0].limits.get();
    assert_eq!((l.sender_flows, l.sender.gateway_evictions), (2, 101));
    assert_eq!(
        tx.shared().peers()[1].limits.get().sender.gateway_evictions,
        0
    );
}

/// With two send workers the cap is still one count over both: flows made by
/// either worker add up, and the device with the most loses one whichever
/// worker sends the packet over the cap.
#[test]
fn the_gateway_flow_cap_is_one_count_over_all_send_workers() {
    let mut w = send_workers(4, 2);
    for sport in 1..=3 {
        send(&mut w[0], sport as u64 * MS, 2, sport);
    }
    send(&mut w[1], 10 * MS, 3, 1);
    assert_eq!((w[0].flows(), w[1].flows()), (4, 4));
    // worker 1 makes device .3's second flow: 5 > 4, device .2 (3) loses one
    send(&mut w[1], 12 * MS, 3, 2);
    assert_eq!((flows_of(&mut w[0], 0), flows_of(&mut w[1], 1)), (2, 2));
    // device .2 cycling flows through either worker evicts only its own
    for sport in 100..110 {
        send(
            &mut w[usize::from(sport % 2)],
            20 * MS + u64::from(sport),
            2,
            sport,
        );
    }
    assert_eq!((flows_of(&mut w[1], 0), flows_of(&mut w[0], 1)), (2, 2));
    assert_eq!(w[0].steerer(1).flow_table().stats.gateway_evictions, 0);
    assert_eq!(w[1].steerer(0).flow_table().stats.gateway_evictions, 11);
}

#[test]
fn the_gateway_flow_cap_follows_peers_removed_and_added_live() {
    let mut tx = gateway(4);
    for sport in 1..=3 {
        send(&mut tx, sport as u64 * MS, 2, sport);
    }
    send(&mut tx, 10 * MS, 3, 1);
    assert_eq!(tx.flows(), 4);
    // device .2 replaced in its slot by .4: its 3 flows leave the count, the
    // new peer starts at none
    let dev4 = PeerConfig {
        name: "dev4".into(),
        token: 3,
        tunnel_addr: Some("198.19.0.4".parse().unwrap()),
        endpoints: [
            Some("198.18.1.4:5000".parse().unwrap()),
            Some("198.18.2.4:5001".parse().unwrap()),
        ],
    };
    tx.shared().change_peers(&[(0, Some(dev4))]).unwrap();
    assert_eq!((flows_of(&mut tx, 0), flows_of(&mut tx, 1)), (0, 1));
    // so .3 has room for 3 more (4 in all) without an eviction
    for sport in 2..=4 {
        send(&mut tx, 20 * MS + u64::from(sport), 3, sport);
    }
    assert_eq!((flows_of(&mut tx, 0), flows_of(&mut tx, 1)), (0, 4));
    assert_eq!(tx.steerer(1).flow_table().stats.gateway_evictions, 0);
    // .4's first flow takes the total to 5: .3, with the most, loses one
    send(&mut tx, 30 * MS, 4, 1);
    assert_eq!((flows_of(&mut tx, 0), flows_of(&mut tx, 1)), (1, 3));
    assert_eq!(tx.steerer(1).flow_table().stats.gateway_evictions, 1);
    // .4 removed: its flow leaves the count, .3 grows back to 4 freely
    tx.shared().change_peers(&[(0, None)]).unwrap();
    send(&mut tx, 40 * MS, 3, 5);
    assert_eq!(tx.flows(), 4);
    assert_eq!(tx.steerer(1).flow_table().stats.gateway_evictions, 1);
}
