//! The AEAD layer inside the agent's endpoint, both ends driven with
//! synthetic time: handshake over either channel (through the receive
//! half's `poll_transmit` and timers), probes held until a session exists,
//! data sealed so that no plaintext crosses the wire, replayed / forged /
//! moved / plaintext datagrams dropped silently and counted, rekeying by time
//! with datagrams in flight; with two devices, neither can send with the
//! other's inner address nor move the other's endpoint.

use dchannel_core::endpoint::{
    self, Arrival, Config, DropReason, PeerConfig, ProbeTransmit, ReceiveHalf, Received, Role,
    SendHalf,
};
use dchannel_core::packet::build;
use dchannel_core::policy::parse_spec;
use dchannel_core::{Channel, Nanos, MS};
use dchannel_crypto::devices::Device;
use dchannel_crypto::endpoint::AeadAuth;
use dchannel_crypto::format::{
    field, PREFIX_LEN, TAG_LEN, TYPE_INITIATION, TYPE_RESPONSE, TYPE_TRANSPORT,
};
use dchannel_crypto::{CryptoDrop, DropCounts, PrivateKey, SECOND};
use std::net::SocketAddr;

type Tx = SendHalf<AeadAuth>;
type Rx = ReceiveHalf<Vec<u8>, AeadAuth>;

const UE: [u8; 4] = [198, 19, 0, 2];
const SERVER: [u8; 4] = [198, 18, 3, 2];
const MARKER: &[u8] = b"PLAINTEXT-MARKER-7f3a";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Outer addresses per channel: the gateway's and the device's.
fn gw(ch: Channel) -> SocketAddr {
    [addr("198.18.1.1:4000"), addr("198.18.2.1:4001")][ch.index()]
}
fn ue(ch: Channel) -> SocketAddr {
    [addr("198.18.1.2:50000"), addr("198.18.2.2:50001")][ch.index()]
}

struct Side {
    tx: Tx,
    rx: Rx,
    auth: AeadAuth,
}

fn side(role: Role, peers: Vec<PeerConfig>, auth: AeadAuth) -> Side {
    side_with(role, peers, auth, "all-hbc")
}

/// [`side`] steering with `policy`; RTTs pinned at 40 ms (HBC) and 10 ms (LLC),
/// used once the probes measured them.
fn side_with(role: Role, peers: Vec<PeerConfig>, auth: AeadAuth, policy: &'static str) -> Side {
    let mut cfg = Config::new(role);
    cfg.reorder = None;
    cfg.rtt.pin = [Some(40 * MS), Some(10 * MS)];
    let (tx, rx) = endpoint::new(cfg, peers, auth.clone(), move || {
        parse_spec(policy, 0.75).unwrap()
    })
    .unwrap();
    Side { tx, rx, auth }
}

/// A client with `key` whose gateway has `gateway`'s public key (at gw()).
fn client_side(key: PrivateKey, gateway: &PrivateKey, crypto: dchannel_crypto::Config) -> Side {
    client_side_with(key, gateway, crypto, "all-hbc")
}

/// [`client_side`] steering with `policy`.
fn client_side_with(
    key: PrivateKey,
    gateway: &PrivateKey,
    crypto: dchannel_crypto::Config,
    policy: &'static str,
) -> Side {
    side_with(
        Role::Client,
        vec![PeerConfig {
            name: "gateway".into(),
            token: 0,
            tunnel_addr: None,
            endpoints: [Some(gw(Channel::Hbc)), Some(gw(Channel::Llc))],
        }],
        AeadAuth::client(key, gateway.public_key(), crypto),
        policy,
    )
}

/// A client and a gateway with fresh keys (the gateway's device list has the client).
fn pair(crypto: dchannel_crypto::Config) -> (Side, Side) {
    pair_with(crypto, "all-hbc")
}

/// [`pair`], both steering with `policy`.
fn pair_with(crypto: dchannel_crypto::Config, policy: &'static str) -> (Side, Side) {
    let (ue_key, gw_key) = (PrivateKey::generate(), PrivateKey::generate());
    let device = Device {
        name: "phone-1".into(),
        public_key: ue_key.public_key(),
        address: Some(UE.into()),
    };
    let client = client_side_with(ue_key, &gw_key, crypto, policy);
    let gateway = side_with(
        Role::Gateway,
        vec![PeerConfig {
            name: "phone-1".into(),
            token: 0,
            tunnel_addr: device.address,
            endpoints: [None, None],
        }],
        AeadAuth::gateway(gw_key, &[device], crypto).unwrap(),
        policy,
    );
    (client, gateway)
}

/// Everything `from` wants to send at `now`, as (transmit, bytes).
fn outgoing(from: &mut Rx, now: Nanos) -> Vec<(ProbeTransmit, Vec<u8>)> {
    let mut buf = vec![0u8; from.probe_buf_len()];
    let mut out = Vec::new();
    while let Some(t) = from.poll_transmit(now, &mut buf) {
        out.push((t, buf[..t.len].to_vec()));
    }
    out
}

/// Delivers datagrams sent by the side whose addresses are `src` to `to`.
fn deliver(
    to: &mut Rx,
    now: Nanos,
    src: fn(Channel) -> SocketAddr,
    dgs: Vec<(ProbeTransmit, Vec<u8>)>,
) -> Vec<Received<Vec<u8>>> {
    dgs.into_iter()
        .map(|(t, b)| to.handle_datagram(now, t.channel, src(t.channel), b))
        .collect()
}

/// Runs timers and exchanges datagrams until both sides are quiet.
fn settle(c: &mut Side, g: &mut Side, now: Nanos) {
    settle_from(c, g, now, ue)
}

/// [`settle`] for a client whose outer addresses are `src`.
fn settle_from(c: &mut Side, g: &mut Side, now: Nanos, src: fn(Channel) -> SocketAddr) {
    for _ in 0..8 {
        c.rx.handle_timeout(now);
        g.rx.handle_timeout(now);
        let up = outgoing(&mut c.rx, now);
        let down = outgoing(&mut g.rx, now);
        if up.is_empty() && down.is_empty() {
            return;
        }
        deliver(&mut g.rx, now, src, up);
        deliver(&mut c.rx, now, gw, down);
    }
    panic!("still exchanging after 8 rounds");
}

/// One inner packet through a send half: (channel, datagram).
fn seal(tx: &mut Tx, now: Nanos, pkt: &[u8]) -> Result<(Channel, Vec<u8>), DropReason> {
    let h = tx.headroom();
    let mut buf = vec![0u8; h + pkt.len() + tx.tailroom()];
    buf[h..h + pkt.len()].copy_from_slice(pkt);
    let t = tx.handle_tun(now, &mut buf, pkt.len())?;
    buf.truncate(t.len);
    Ok((t.channel, buf))
}

fn uplink() -> Vec<u8> {
    build::udp4(UE, SERVER, 40000, 5001, MARKER)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether `dg` has one of the shapes `auth` declares (what the agent's
/// kernel prefilter lets through).
fn fits(auth: &AeadAuth, dg: &[u8]) -> bool {
    use dchannel_core::endpoint::DatagramAuth;
    auth.shapes().iter().any(|s| s.matches(dg))
}

fn dropped(r: Received<Vec<u8>>) -> DropReason {
    match r {
        Received::Dropped { reason, .. } => reason,
        other => panic!("expected a drop, got {other:?}"),
    }
}

/// Asserts that `r` is an `unauthentic` drop which the encryption layer
/// counted once, under `reason`; `seen` is the layer's counts before it.
fn refused(auth: &AeadAuth, seen: &mut DropCounts, r: Received<Vec<u8>>, reason: CryptoDrop) {
    assert_eq!(dropped(r), DropReason::Unauthentic);
    let now = auth.drops();
    assert_eq!(
        now.get(reason),
        seen.get(reason) + 1,
        "counted under {reason}"
    );
    assert_eq!(now.total(), seen.total() + 1, "counted once");
    *seen = now;
}

#[test]
fn handshake_on_the_llc_then_probes_then_sealed_data() {
    let (mut c, mut g) = pair(Default::default());
    // before any session: the data packet is dropped, no probe leaves, only
    // the initiation (on the LLC, the default first channel)
    assert_eq!(
        seal(&mut c.tx, 0, &uplink()).unwrap_err(),
        DropReason::NoSession
    );
    c.rx.handle_timeout(0);
    let init = outgoing(&mut c.rx, 0);
    assert_eq!(init.len(), 1, "the initiation only, no probes yet");
    let (t, b) = &init[0];
    assert_eq!(
        (t.channel, t.destination, b[0]),
        (Channel::Llc, gw(Channel::Llc), TYPE_INITIATION)
    );
    assert!(
        fits(&g.auth, b),
        "the initiation passes the gateway's prefilter"
    );
    let init_bytes = b.clone();
    assert!(matches!(
        deliver(&mut g.rx, MS, ue, init).pop().unwrap(),
        Received::Control { peer: 0, .. }
    ));
    let resp = outgoing(&mut g.rx, MS);
    assert_eq!(resp.len(), 1);
    assert_eq!(
        (resp[0].0.destination, resp[0].1[0]),
        (ue(Channel::Llc), TYPE_RESPONSE)
    );
    assert!(
        fits(&c.auth, &resp[0].1),
        "the response passes the client's"
    );
    deliver(&mut c.rx, 2 * MS, gw, resp);
    assert!(c.auth.has_session(0));
    // the client confirms with a keepalive, then its first probe round goes
    c.rx.handle_timeout(2 * MS);
    let out = outgoing(&mut c.rx, 2 * MS);
    let lens: Vec<usize> = out.iter().map(|(t, _)| t.len).collect();
    // keepalive: prefix + tag; D-SYN: prefix + header 16 + body 2 + tag
    assert_eq!(lens, vec![PREFIX_LEN + TAG_LEN, 47, 47]);
    assert!(out
        .iter()
        .all(|(_, b)| b[0] == TYPE_TRANSPORT && fits(&g.auth, b)));
    for r in deliver(&mut g.rx, 3 * MS, ue, out).into_iter().skip(1) {
        assert!(matches!(r, Received::Probe { peer: 0, .. }), "{r:?}");
    }
    assert!(g.auth.has_session(0));
    settle(&mut c, &mut g, 4 * MS);

    // data: sealed, no plaintext on the wire, delivered byte-exact
    let pkt = uplink();
    let (ch, dg) = seal(&mut c.tx, 5 * MS, &pkt).unwrap();
    assert_eq!(dg.len(), PREFIX_LEN + 16 + pkt.len() + TAG_LEN);
    assert!(!contains(&dg, MARKER));
    assert!(fits(&g.auth, &dg));
    // ... and what cannot be a datagram of this layer does not fit: a
    // version-1 (plaintext) header, a cut keepalive, an initiation one byte
    // short, an unknown type, nothing.
    let mut plain = dg.clone();
    plain[0] = 0x10;
    for bad in [
        &plain[..],
        &dg[..PREFIX_LEN + TAG_LEN - 1],
        &init_bytes[..init_bytes.len() - 1],
        &[0x23; 64][..],
        &[][..],
    ] {
        assert!(!fits(&g.auth, bad), "{:02x?}", &bad[..bad.len().min(4)]);
    }
    assert!(matches!(
        g.rx.handle_datagram(5 * MS, ch, ue(ch), dg),
        Received::Data(Arrival { peer: 0, .. })
    ));
    let got: Vec<Vec<u8>> = g.rx.deliveries().map(|d| d.packet().to_vec()).collect();
    assert_eq!(got, vec![pkt]);
    // and back: the gateway learned the client's endpoints from authentic datagrams
    let down = build::udp4(SERVER, UE, 5001, 40000, MARKER);
    let (ch, dg) = seal(&mut g.tx, 6 * MS, &down).unwrap();
    assert!(!contains(&dg, MARKER));
    c.rx.handle_datagram(6 * MS, ch, gw(ch), dg);
    let got: Vec<Vec<u8>> = c.rx.deliveries().map(|d| d.packet().to_vec()).collect();
    assert_eq!(got, vec![down]);
    assert_eq!(g.auth.drops().total() + c.auth.drops().total(), 0);
}

#[test]
fn handshake_completes_over_the_hbc_when_the_llc_loses_the_initiation() {
    let (mut c, mut g) = pair(Default::default());
    c.rx.handle_timeout(0);
    let lost = outgoing(&mut c.rx, 0);
    assert_eq!(lost[0].0.channel, Channel::Llc);
    // the retry is due after the rekey timeout (1 s) and takes the other channel
    c.rx.handle_timeout(SECOND - 1);
    assert!(
        outgoing(&mut c.rx, SECOND - 1).is_empty(),
        "nothing before 1 s"
    );
    assert!(c.rx.poll_timeout().unwrap() <= SECOND);
    c.rx.handle_timeout(SECOND);
    let retry = outgoing(&mut c.rx, SECOND);
    assert_eq!(retry.len(), 1);
    assert_eq!(
        (retry[0].0.channel, retry[0].1[0]),
        (Channel::Hbc, TYPE_INITIATION)
    );
    deliver(&mut g.rx, SECOND + MS, ue, retry);
    let resp = outgoing(&mut g.rx, SECOND + MS);
    assert_eq!(
        (resp[0].0.channel, resp[0].0.destination),
        (Channel::Hbc, ue(Channel::Hbc))
    );
    deliver(&mut c.rx, SECOND + 2 * MS, gw, resp);
    assert!(c.auth.has_session(0));
    settle(&mut c, &mut g, SECOND + 3 * MS);
    assert!(g.auth.has_session(0));
    assert_eq!(c.auth.stats().retries, 1);
    let (ch, dg) = seal(&mut c.tx, SECOND + 4 * MS, &uplink()).unwrap();
    assert!(matches!(
        g.rx.handle_datagram(SECOND + 4 * MS, ch, ue(ch), dg),
        Received::Data(_)
    ));
}

#[test]
fn replayed_forged_moved_and_plaintext_datagrams_are_dropped_silently_and_counted() {
    let (mut c, mut g) = pair(Default::default());
    settle(&mut c, &mut g, 0);
    let (ch, dg) = seal(&mut c.tx, MS, &uplink()).unwrap();
    assert!(matches!(
        g.rx.handle_datagram(MS, ch, ue(ch), dg.clone()),
        Received::Data(_)
    ));
    g.rx.deliveries().for_each(drop);
    let mut seen = g.auth.drops();
    // replayed
    let r = g.rx.handle_datagram(2 * MS, ch, ue(ch), dg.clone());
    refused(&g.auth, &mut seen, r, CryptoDrop::Replay);
    // forged: one bit of the ciphertext, of the clear header, of the tag of
    // datagrams not seen yet (a seen counter is refused before any decryption)
    for at in [PREFIX_LEN + 16 + 3, PREFIX_LEN + 2, dg.len() - 1] {
        let (_, mut f) = seal(&mut c.tx, 3 * MS, &uplink()).unwrap();
        f[at] ^= 0x01;
        let r = g.rx.handle_datagram(3 * MS, ch, ue(ch), f);
        refused(&g.auth, &mut seen, r, CryptoDrop::AuthFailed);
    }
    // moved to the other channel: the channel is part of the nonce
    let (ch2, dg2) = seal(&mut c.tx, 4 * MS, &uplink()).unwrap();
    let r =
        g.rx.handle_datagram(4 * MS, ch2.other(), ue(ch2.other()), dg2.clone());
    refused(&g.auth, &mut seen, r, CryptoDrop::AuthFailed);
    // the forgeries did not burn the counters: the genuine datagram still opens
    let r = g.rx.handle_datagram(4 * MS, ch2, ue(ch2), dg2);
    assert!(matches!(r, Received::Data(_)), "{r:?}");
    g.rx.deliveries().for_each(drop);
    // truncated
    let r = g.rx.handle_datagram(5 * MS, ch, ue(ch), dg[..20].to_vec());
    refused(&g.auth, &mut seen, r, CryptoDrop::Truncated);
    // a version-1 plaintext datagram (the --insecure format)
    let mut plain = vec![0x10, 0x01, 0, 1, 0, 0, 0, 9];
    plain.extend_from_slice(&[0; 8]);
    plain.extend_from_slice(&uplink());
    let r = g.rx.handle_datagram(6 * MS, ch, ue(ch), plain);
    refused(&g.auth, &mut seen, r, CryptoDrop::UnknownType);
    // nothing was answered, nothing delivered, every drop counted by reason
    g.rx.handle_timeout(7 * MS);
    assert!(outgoing(&mut g.rx, 7 * MS).is_empty());
    assert_eq!(g.rx.deliveries().count(), 0);
    let d = g.auth.drops();
    assert_eq!(
        (
            d.get(CryptoDrop::Replay),
            d.get(CryptoDrop::AuthFailed),
            d.get(CryptoDrop::Truncated),
            d.get(CryptoDrop::UnknownType)
        ),
        (1, 4, 1, 1)
    );
    assert_eq!(d.total(), 7);
    assert_eq!(CryptoDrop::Replay.name(), "replay");
}

#[test]
fn copies_on_both_channels_open_under_their_own_counters_and_one_is_delivered() {
    // realtime-dup: an input event (a DTLS application-data record, first byte 23,
    // of 137 IP bytes) goes on the LLC (pinned 40 / 10 ms RTTs: it fits the gap)
    // with a copy on the HBC. Each copy is sealed under its own channel's counter:
    // both open, neither is a replay; the duplicate filter drops the second.
    let (mut c, mut g) = pair_with(Default::default(), "realtime-dup");
    settle(&mut c, &mut g, 0);
    let mut rec = vec![23, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9, 0, 96];
    rec.resize(13 + 96, 0x5a);
    let input = build::udp4(UE, SERVER, 40000, 50000, &rec);
    let mut copy = vec![0u8; c.tx.headroom() + input.len() + c.tx.tailroom()];
    let mut seen = g.auth.drops();
    for (k, first) in [Channel::Hbc, Channel::Llc].into_iter().enumerate() {
        let now = (k as Nanos + 1) * MS;
        let (ch, dg) = seal(&mut c.tx, now, &input).unwrap();
        let t =
            c.tx.poll_copy(now, &mut copy)
                .expect("a copy on the other channel");
        assert_eq!((ch, t.channel), (Channel::Llc, Channel::Hbc));
        assert_ne!(dg, copy[..t.len], "two separately sealed datagrams");
        let mut copies = [(ch, dg), (t.channel, copy[..t.len].to_vec())];
        if copies[0].0 != first {
            copies.swap(0, 1);
        }
        let [(ch1, dg1), (ch2, dg2)] = copies;
        let r = g.rx.handle_datagram(now, ch1, ue(ch1), dg1);
        assert!(
            matches!(r, Received::Data(_)),
            "first copy, on {first}: {r:?}"
        );
        let r = g.rx.handle_datagram(now, ch2, ue(ch2), dg2);
        assert!(
            matches!(r, Received::Duplicate { .. }),
            "second copy: {r:?}"
        );
        let got: Vec<Vec<u8>> = g.rx.deliveries().map(|d| d.packet().to_vec()).collect();
        assert_eq!(got, vec![input.clone()]);
        assert_eq!(g.auth.drops(), seen, "no replay, no other refusal");
        seen = g.auth.drops();
    }
    assert_eq!(c.tx.copies(), 2);
}

#[test]
fn rekeys_by_time_and_datagrams_in_flight_still_open() {
    let (mut c, mut g) = pair(Default::default());
    settle(&mut c, &mut g, 0);
    let (_, first) = seal(&mut c.tx, MS, &uplink()).unwrap();
    let index = |d: &[u8]| d[1..5].to_vec();
    // 120 s later the client's timer starts a new handshake; a datagram
    // sealed just before it completes is still opened (previous session)
    let t = 120 * SECOND;
    assert!(c.rx.poll_timeout().unwrap() <= t);
    let (ch, in_flight) = seal(&mut c.tx, t, &uplink()).unwrap();
    assert_eq!(index(&in_flight), index(&first));
    settle(&mut c, &mut g, t);
    assert_eq!(c.auth.stats().completed_as_initiator, 2);
    let (ch2, after) = seal(&mut c.tx, t + MS, &uplink()).unwrap();
    assert_ne!(
        index(&after),
        index(&first),
        "a new session (index) after the rekey"
    );
    for (ch, d) in [(ch2, after), (ch, in_flight)] {
        let r = g.rx.handle_datagram(t + 2 * MS, ch, ue(ch), d);
        assert!(matches!(r, Received::Data(_)), "{r:?}");
    }
    assert_eq!(g.rx.deliveries().count(), 2);
    // past the grace period the old session is gone
    let (_, stale) = (ch, first);
    let mut seen = g.auth.drops();
    let r = g.rx.handle_datagram(t + 11 * SECOND, ch, ue(ch), stale);
    refused(&g.auth, &mut seen, r, CryptoDrop::UnknownIndex);
}

// ---- two encrypted devices ---------------------------------------------------
//
// The encrypted counterparts of dchannel-core's `--insecure` (token) tests
// `gateway_drops_spoofed_and_non_ip_inner_sources` and
// `gateway_learns_and_follows_client_endpoints`: an authenticated device can
// neither send with the other's inner address nor move the other's endpoint.

const UE_B: [u8; 4] = [198, 19, 0, 3];

/// Device B's outer addresses.
fn ue_b(ch: Channel) -> SocketAddr {
    [addr("198.18.1.6:50000"), addr("198.18.2.6:50001")][ch.index()]
}

/// Devices A (198.19.0.2) and B (198.19.0.3) and their gateway, each device
/// with a session.
fn two_devices() -> (Side, Side, Side) {
    let (a_key, b_key, gw_key) = (
        PrivateKey::generate(),
        PrivateKey::generate(),
        PrivateKey::generate(),
    );
    let devices =
        [("phone-a", &a_key, UE), ("phone-b", &b_key, UE_B)].map(|(name, k, ip)| Device {
            name: name.into(),
            public_key: k.public_key(),
            address: Some(ip.into()),
        });
    let (mut a, mut b) = (
        client_side(a_key, &gw_key, Default::default()),
        client_side(b_key, &gw_key, Default::default()),
    );
    let peers = devices
        .iter()
        .map(|d| PeerConfig {
            name: d.name.clone(),
            token: 0,
            tunnel_addr: d.address,
            endpoints: [None, None],
        })
        .collect();
    let mut g = side(
        Role::Gateway,
        peers,
        AeadAuth::gateway(gw_key, &devices, Default::default()).unwrap(),
    );
    settle_from(&mut a, &mut g, 0, ue);
    settle_from(&mut b, &mut g, 0, ue_b);
    assert!(g.auth.has_session(0) && g.auth.has_session(1));
    (a, b, g)
}

#[test]
fn an_encrypted_device_cannot_send_with_the_other_devices_inner_address() {
    let (mut a, mut b, mut g) = two_devices();
    g.rx.deliveries().for_each(drop);
    // A, sealed with A's own session, inner source B's address: authentic, refused.
    let forged = build::udp4(UE_B, SERVER, 40000, 5001, MARKER);
    let (ch, dg) = seal(&mut a.tx, MS, &forged).unwrap();
    assert_eq!(
        dropped(g.rx.handle_datagram(MS, ch, ue(ch), dg)),
        DropReason::SpoofedSource
    );
    // ... and B with A's.
    let (ch, dg) = seal(&mut b.tx, MS, &uplink()).unwrap();
    assert_eq!(
        dropped(g.rx.handle_datagram(MS, ch, ue_b(ch), dg)),
        DropReason::SpoofedSource
    );
    assert_eq!(g.rx.deliveries().count(), 0, "nothing forwarded");
    assert_eq!(g.auth.drops().total(), 0, "both were authentic");
    // Each with its own address: delivered, as the peer that sent it.
    let own_b = build::udp4(UE_B, SERVER, 40000, 5001, MARKER);
    for (side, src, pkt, peer) in [
        (&mut a, ue as fn(Channel) -> SocketAddr, uplink(), 0),
        (&mut b, ue_b, own_b, 1),
    ] {
        let (ch, dg) = seal(&mut side.tx, 2 * MS, &pkt).unwrap();
        let r = g.rx.handle_datagram(2 * MS, ch, src(ch), dg);
        assert!(
            matches!(r, Received::Data(Arrival { peer: p, .. }) if p == peer),
            "{r:?}"
        );
        let got: Vec<Vec<u8>> = g.rx.deliveries().map(|d| d.packet().to_vec()).collect();
        assert_eq!(got, vec![pkt]);
    }
}

#[test]
fn an_encrypted_device_cannot_move_the_other_devices_endpoint() {
    let (mut a, mut b, mut g) = two_devices();
    let endpoints =
        |g: &Side, peer: usize| Channel::ALL.map(|ch| g.rx.shared().peers()[peer].endpoint(ch));
    let a_learned = endpoints(&g, 0);
    assert_eq!(a_learned, Channel::ALL.map(|ch| Some(ue(ch))));
    let mut seen = g.auth.drops();
    // 1. B replays a datagram of A's (seen on the path) from B's address: a replay.
    let (ch, a_dg) = seal(&mut a.tx, MS, &uplink()).unwrap();
    assert!(matches!(
        g.rx.handle_datagram(MS, ch, ue(ch), a_dg.clone()),
        Received::Data(_)
    ));
    let r = g.rx.handle_datagram(2 * MS, ch, ue_b(ch), a_dg.clone());
    refused(&g.auth, &mut seen, r, CryptoDrop::Replay);
    // 2. B addresses its own datagram to A's session (A's receiver index in the
    //    prefix, field::RECEIVER_INDEX): B's key does not open under A's. (B's
    //    counter first moves past A's, so that A's replay window lets it through
    //    to the decryption.)
    for _ in 0..4 {
        seal(&mut b.tx, 3 * MS, &build::udp4(UE_B, SERVER, 1, 2, MARKER)).unwrap();
    }
    let (ch, mut b_dg) = seal(&mut b.tx, 3 * MS, &build::udp4(UE_B, SERVER, 1, 2, MARKER)).unwrap();
    b_dg[field::RECEIVER_INDEX].copy_from_slice(&a_dg[field::RECEIVER_INDEX]);
    let r = g.rx.handle_datagram(3 * MS, ch, ue_b(ch), b_dg);
    refused(&g.auth, &mut seen, r, CryptoDrop::AuthFailed);
    // 3. B's own authentic datagram from a new address moves B's endpoint only.
    let moved = addr("198.18.1.6:61000");
    let (ch, b_dg) = seal(&mut b.tx, 4 * MS, &build::udp4(UE_B, SERVER, 1, 2, MARKER)).unwrap();
    assert_eq!(ch, Channel::Hbc, "all-hbc");
    assert!(matches!(
        g.rx.handle_datagram(4 * MS, ch, moved, b_dg),
        Received::Data(_)
    ));
    assert_eq!(endpoints(&g, 1)[Channel::Hbc.index()], Some(moved));
    assert_eq!(endpoints(&g, 0), a_learned, "A's endpoints untouched");
    // Downlink still goes to each device where it is.
    for (dst, want) in [(UE, ue(Channel::Hbc)), (UE_B, moved)] {
        let pkt = build::udp4(SERVER, dst, 5001, 40000, MARKER);
        let h = g.tx.headroom();
        let mut buf = vec![0u8; h + pkt.len() + g.tx.tailroom()];
        buf[h..h + pkt.len()].copy_from_slice(&pkt);
        let t = g.tx.handle_tun(5 * MS, &mut buf, pkt.len()).unwrap();
        assert_eq!(t.destination, want, "downlink to {dst:?}");
    }
}
