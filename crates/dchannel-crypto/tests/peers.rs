//! Behaviour of the [`Peers`] table with synthetic time: handshakes, transport,
//! drops with their reasons, anti-replay windows, rekeying, flood bounds.

mod common;

use common::{dev_addr, gw_addr, pair_with, take_all, Pair};
use dchannel_crypto::format::{field, INITIATION_LEN, KEEPALIVE_LEN, PREFIX_LEN, TAG_LEN};
use dchannel_crypto::mac;
use dchannel_crypto::peers::Stats;
use dchannel_crypto::ratelimit::RateLimit;
use dchannel_crypto::replay::WINDOW;
use dchannel_crypto::{
    Channel, Config, CryptoDrop, Limits, Nanos, Opened, PeerId, Peers, PrivateKey, PublicKey,
    SealError, Transmit, SECOND,
};
use std::net::SocketAddr;

const H: usize = 16;
const MS: Nanos = 1_000_000;

fn pair() -> Pair {
    pair_with(Config::default())
}

/// Takes the one datagram `from` has queued and opens it at `to` as coming
/// from `addr` on the channel it was queued for.
fn deliver_one(
    from: &mut Peers,
    to: &mut Peers,
    now: Nanos,
    addr: SocketAddr,
) -> (Transmit, Result<Opened, CryptoDrop>) {
    let queued = take_all(from);
    assert_eq!(queued.len(), 1);
    let (t, mut m) = queued.into_iter().next().unwrap();
    (t, to.open(now, t.channel, addr, &mut m))
}

/// The first initiation a fresh table with key `from` sends to the gateway
/// whose public key is `to`.
fn initiation(from: PrivateKey, to: PublicKey) -> Vec<u8> {
    let mut s = Peers::new(from, Config::default());
    let g = s.add_peer(to, "gw", true).unwrap();
    s.connect(0, g);
    s.handle_timeout(0);
    take_all(&mut s)[0].1.clone()
}

/// Runs the handshake at `now` and delivers the keepalive: both sides can send.
fn establish(p: &mut Pair, now: Nanos) {
    p.dev.connect(now, p.gw_id);
    p.dev.handle_timeout(now);
    let (t, opened) = deliver_one(&mut p.dev, &mut p.gw, now, dev_addr());
    assert_eq!(t.len, 146); // 1 + 4 + 109 + 16 + 16 (docs/wire.md)
    assert_eq!(
        opened,
        Ok(Opened::Handshake {
            peer: p.dev_id,
            established: false
        })
    );
    let (rt, opened) = deliver_one(&mut p.gw, &mut p.dev, now, gw_addr());
    assert_eq!(
        (rt.channel, rt.to, rt.len),
        (t.channel, Some(dev_addr()), 73) // 1 + 4 + 52 + 16
    );
    assert_eq!(
        opened,
        Ok(Opened::Handshake {
            peer: p.gw_id,
            established: true
        })
    );
    let (kt, opened) = deliver_one(&mut p.dev, &mut p.gw, now, dev_addr());
    assert_eq!(kt.len, KEEPALIVE_LEN);
    assert_eq!(opened, Ok(Opened::Keepalive { peer: p.dev_id }));
}

/// Seals `payload` with header `hdr` (16 bytes) from `from` to `peer`.
fn seal(
    from: &mut Peers,
    now: Nanos,
    peer: PeerId,
    ch: Channel,
    hdr: u8,
    payload: &[u8],
) -> Result<Vec<u8>, SealError> {
    let mut buf = vec![0u8; PREFIX_LEN + H + payload.len() + TAG_LEN];
    buf[PREFIX_LEN..PREFIX_LEN + H].fill(hdr);
    buf[PREFIX_LEN + H..PREFIX_LEN + H + payload.len()].copy_from_slice(payload);
    let n = from.seal(now, peer, ch, &mut buf, payload.len())?;
    assert_eq!(n, buf.len());
    Ok(buf)
}

/// Opens and returns (header, payload).
fn open(
    to: &mut Peers,
    now: Nanos,
    ch: Channel,
    from: SocketAddr,
    d: &[u8],
) -> Result<(Vec<u8>, Vec<u8>), CryptoDrop> {
    let mut b = d.to_vec();
    match to.open(now, ch, from, &mut b)? {
        Opened::Data {
            header, payload, ..
        } => Ok((b[header].to_vec(), b[payload].to_vec())),
        o => panic!("expected data, got {o:?}"),
    }
}

#[test]
fn handshake_completes_and_data_flows_both_ways_on_both_channels() {
    let mut p = pair();
    // before the handshake: the gateway cannot send, the device asks for one
    assert_eq!(
        seal(&mut p.gw, 0, p.dev_id, Channel::Hbc, 1, b"x"),
        Err(SealError::NoSession)
    );
    assert!(take_all(&mut p.gw).is_empty());
    assert_eq!(
        seal(&mut p.dev, 0, p.gw_id, Channel::Hbc, 1, b"x"),
        Err(SealError::NoSession)
    );
    assert_eq!(p.dev.poll_timeout(), Some(0));
    p.dev.handle_timeout(0);
    let init = take_all(&mut p.dev);
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].0.channel, Channel::Llc); // first attempt on the LLC
    assert_eq!(init[0].0.to, None);
    let mut m = init[0].1.clone();
    p.gw.open(1, Channel::Llc, dev_addr(), &mut m).unwrap();
    let resp = take_all(&mut p.gw);
    let mut rm = resp[0].1.clone();
    assert_eq!(
        p.dev.open(2, Channel::Llc, gw_addr(), &mut rm),
        Ok(Opened::Handshake {
            peer: p.gw_id,
            established: true
        })
    );
    // the device can send at once; the gateway waits for key confirmation
    let up = seal(&mut p.dev, 3, p.gw_id, Channel::Hbc, 0xaa, b"uplink").unwrap();
    assert_eq!(
        seal(&mut p.gw, 3, p.dev_id, Channel::Hbc, 1, b"x"),
        Err(SealError::NoSession)
    );
    assert_eq!(
        open(&mut p.gw, 4, Channel::Hbc, dev_addr(), &up),
        Ok((vec![0xaa; H], b"uplink".to_vec()))
    );
    // the header travels in clear, the payload does not
    assert_eq!(&up[PREFIX_LEN..PREFIX_LEN + H], &[0xaa; H]);
    assert!(!up.windows(6).any(|w| w == b"uplink"));
    for ch in Channel::ALL {
        let down = seal(&mut p.gw, 5, p.dev_id, ch, 0xbb, b"downlink").unwrap();
        assert_eq!(
            open(&mut p.dev, 6, ch, gw_addr(), &down),
            Ok((vec![0xbb; H], b"downlink".to_vec()))
        );
    }
    // the keepalive queued with the response still authenticates (counter 0 on LLC)
    let ka = take_all(&mut p.dev);
    assert_eq!(ka.len(), 1);
    let mut km = ka[0].1.clone();
    assert_eq!(
        p.gw.open(7, Channel::Llc, dev_addr(), &mut km),
        Ok(Opened::Keepalive { peer: p.dev_id })
    );
    assert_eq!(p.gw.drops().total(), 0);
    assert_eq!(p.dev.drops().total(), 0);
    assert_eq!(
        p.dev.stats(),
        Stats {
            initiations_sent: 1,
            completed_as_initiator: 1,
            ..Stats::default()
        }
    );
    assert_eq!(p.gw.stats().answered, 1);
}

#[test]
fn chacha_and_aes_sessions_interoperate_as_proposed() {
    for cipher in [
        dchannel_crypto::Cipher::ChaCha20Poly1305,
        dchannel_crypto::Cipher::Aes256Gcm,
    ] {
        // the gateway's own preference does not matter: the initiator picks
        let mut p = pair_with(Config {
            cipher,
            ..Config::default()
        });
        establish(&mut p, 0);
        let d = seal(&mut p.dev, 1, p.gw_id, Channel::Llc, 1, b"ping").unwrap();
        assert_eq!(
            open(&mut p.gw, 1, Channel::Llc, dev_addr(), &d).unwrap().1,
            b"ping"
        );
    }
}

#[test]
fn replayed_truncated_forged_and_misdirected_datagrams_are_dropped_silently() {
    let mut p = pair();
    establish(&mut p, 0);
    let d = seal(&mut p.dev, 1, p.gw_id, Channel::Hbc, 7, b"payload").unwrap();
    open(&mut p.gw, 1, Channel::Hbc, dev_addr(), &d).unwrap();
    // replay
    assert_eq!(
        open(&mut p.gw, 2, Channel::Hbc, dev_addr(), &d),
        Err(CryptoDrop::Replay)
    );
    // truncated: shorter than prefix + header + tag, and empty
    assert_eq!(
        open(
            &mut p.gw,
            2,
            Channel::Hbc,
            dev_addr(),
            &d[..PREFIX_LEN + H + TAG_LEN - 1]
        ),
        Err(CryptoDrop::Truncated)
    );
    assert_eq!(
        open(&mut p.gw, 2, Channel::Hbc, dev_addr(), &[]),
        Err(CryptoDrop::Truncated)
    );
    // cut off the end of a fresh datagram: tag no longer verifies
    let d2 = seal(&mut p.dev, 2, p.gw_id, Channel::Hbc, 7, b"payload").unwrap();
    assert_eq!(
        open(&mut p.gw, 2, Channel::Hbc, dev_addr(), &d2[..d2.len() - 1]),
        Err(CryptoDrop::AuthFailed)
    );
    // forged: flip a bit in the payload, the header (associated data), the counter
    for at in [d2.len() - TAG_LEN - 1, PREFIX_LEN + 3, 6] {
        let mut f = d2.clone();
        f[at] ^= 0x01;
        assert_eq!(
            open(&mut p.gw, 3, Channel::Hbc, dev_addr(), &f),
            Err(CryptoDrop::AuthFailed),
            "bit flipped at {at}"
        );
    }
    // the genuine one still opens after the forgeries (they did not move the window)
    open(&mut p.gw, 3, Channel::Hbc, dev_addr(), &d2).unwrap();
    // moved to the other channel: the nonce differs
    let d3 = seal(&mut p.dev, 3, p.gw_id, Channel::Hbc, 7, b"payload").unwrap();
    assert_eq!(
        open(&mut p.gw, 3, Channel::Llc, dev_addr(), &d3),
        Err(CryptoDrop::AuthFailed)
    );
    // wrong key: a second device's datagram pointed at the first device's session
    let other = PrivateKey::generate();
    let dev2 = Peers::new(other.clone(), Config::default());
    let gw2 = dev2.add_peer(p.gw.public_key(), "gw", true).unwrap();
    let dev2_id = p.gw.add_peer(other.public_key(), "phone2", false).unwrap();
    let mut p2 = Pair {
        dev: dev2,
        gw: std::mem::replace(
            &mut p.gw,
            Peers::new(PrivateKey::generate(), Config::default()),
        ),
        gw_id: gw2,
        dev_id: dev2_id,
        dev_key: other,
    };
    establish(&mut p2, 4);
    for _ in 0..10 {
        // move its counter past those the first device's window has seen
        seal(&mut p2.dev, 4, p2.gw_id, Channel::Hbc, 7, b"payload").unwrap();
    }
    let mut wrong = seal(&mut p2.dev, 4, p2.gw_id, Channel::Hbc, 7, b"payload").unwrap();
    wrong[1..5].copy_from_slice(&d3[1..5]); // the first device's receiver index
    assert_eq!(
        open(&mut p2.gw, 4, Channel::Hbc, dev_addr(), &wrong),
        Err(CryptoDrop::AuthFailed)
    );
    // unknown index, unknown type
    let mut unknown = d3.clone();
    unknown[1] ^= 0xff;
    assert_eq!(
        open(&mut p2.gw, 4, Channel::Hbc, dev_addr(), &unknown),
        Err(CryptoDrop::UnknownIndex)
    );
    let mut ty = d3.clone();
    ty[0] = 0x10;
    assert_eq!(
        open(&mut p2.gw, 4, Channel::Hbc, dev_addr(), &ty),
        Err(CryptoDrop::UnknownType)
    );
    // the genuine datagram of the first device is still accepted (the window of
    // its HBC counter space was not moved by the failures)
    open(&mut p2.gw, 5, Channel::Hbc, dev_addr(), &d3).unwrap();
    let c = p2.gw.drops();
    assert_eq!(c.get(CryptoDrop::Replay), 1);
    assert_eq!(c.get(CryptoDrop::Truncated), 2);
    assert_eq!(c.get(CryptoDrop::AuthFailed), 6);
    assert_eq!(c.get(CryptoDrop::UnknownIndex), 1);
    assert_eq!(c.get(CryptoDrop::UnknownType), 1);
    assert_eq!(c.total(), 11);
    // nothing was ever answered
    assert!(take_all(&mut p2.gw).is_empty());
}

#[test]
fn handshake_failures_have_their_reasons() {
    let mut p = pair();
    // an initiation from a key the gateway does not know
    let mut m = initiation(PrivateKey::generate(), p.gw.public_key());
    assert_eq!(
        p.gw.open(0, Channel::Llc, dev_addr(), &mut m),
        Err(CryptoDrop::UnknownPeer)
    );
    // an initiation for another gateway key: its mac1 is not ours
    let mut m = initiation(p.dev_key.clone(), PrivateKey::generate().public_key());
    assert_eq!(
        p.gw.open(0, Channel::Llc, dev_addr(), &mut m.clone()),
        Err(CryptoDrop::BadMac1)
    );
    // ... and with a mac1 for us, Noise refuses it
    let ours = mac::mac1_key(&p.gw.public_key());
    mac::write(&ours, &mut m, field::INIT_MAC1);
    assert_eq!(
        p.gw.open(0, Channel::Llc, dev_addr(), &mut m),
        Err(CryptoDrop::HandshakeInvalid)
    );
    // a replayed initiation
    p.dev.connect(0, p.gw_id);
    p.dev.handle_timeout(0);
    let init = take_all(&mut p.dev)[0].1.clone();
    p.gw.open(1, Channel::Llc, dev_addr(), &mut init.clone())
        .unwrap();
    let resp = take_all(&mut p.gw);
    assert_eq!(resp.len(), 1);
    assert_eq!(
        p.gw.open(2, Channel::Hbc, dev_addr(), &mut init.clone()),
        Err(CryptoDrop::HandshakeReplay)
    );
    // a response nobody asked for (its mac1 is the device's: the gateway
    // refuses it at once; with a mac1 for the gateway, for want of an
    // initiation), a truncated and an oversized one
    let mut r = resp[0].1.clone();
    assert_eq!(
        p.gw.open(2, Channel::Llc, dev_addr(), &mut r.clone()),
        Err(CryptoDrop::BadMac1)
    );
    let mut for_gw = r.clone();
    mac::write(&ours, &mut for_gw, field::RESP_MAC1);
    assert_eq!(
        p.gw.open(2, Channel::Llc, dev_addr(), &mut for_gw),
        Err(CryptoDrop::UnexpectedResponse)
    );
    assert_eq!(
        p.dev
            .open(2, Channel::Llc, gw_addr(), &mut r[..40].to_vec()),
        Err(CryptoDrop::HandshakeInvalid).or(Err(CryptoDrop::Truncated))
    );
    let mut long = r.clone();
    long.push(0);
    assert_eq!(
        p.dev.open(2, Channel::Llc, gw_addr(), &mut long),
        Err(CryptoDrop::HandshakeInvalid)
    );
    // the genuine response still completes the handshake
    assert!(matches!(
        p.dev.open(3, Channel::Llc, gw_addr(), &mut r),
        Ok(Opened::Handshake {
            established: true,
            ..
        })
    ));
    assert!(take_all(&mut p.gw).is_empty());
}

#[test]
fn window_accepts_reordering_within_a_channel_and_any_lag_between_channels() {
    let mut p = pair();
    establish(&mut p, 0);
    // 3000 HBC datagrams held back while 20,000 go over the LLC (the HBC lags
    // by far more than a window: per-channel counters make that irrelevant)
    let hbc: Vec<_> = (0..3000)
        .map(|i| seal(&mut p.dev, 1, p.gw_id, Channel::Hbc, 0, &[i as u8; 20]).unwrap())
        .collect();
    for _ in 0..20_000 {
        let d = seal(&mut p.dev, 1, p.gw_id, Channel::Llc, 0, b"llc").unwrap();
        open(&mut p.gw, 1, Channel::Llc, dev_addr(), &d).unwrap();
    }
    // HBC arrives reversed: all within its own window
    for d in hbc.iter().rev() {
        open(&mut p.gw, 2, Channel::Hbc, dev_addr(), d).unwrap();
    }
    // a counter more than WINDOW behind the newest is refused as too old
    let old = seal(&mut p.dev, 3, p.gw_id, Channel::Llc, 0, b"old").unwrap();
    for _ in 0..WINDOW + 1 {
        seal(&mut p.dev, 3, p.gw_id, Channel::Llc, 0, b"x").unwrap();
    }
    let newest = seal(&mut p.dev, 3, p.gw_id, Channel::Llc, 0, b"new").unwrap();
    open(&mut p.gw, 3, Channel::Llc, dev_addr(), &newest).unwrap();
    assert_eq!(
        open(&mut p.gw, 3, Channel::Llc, dev_addr(), &old),
        Err(CryptoDrop::TooOld)
    );
    assert_eq!(p.gw.drops().total(), 1);
}

#[test]
fn rekey_by_time_keeps_the_old_session_for_datagrams_in_flight() {
    let mut p = pair();
    establish(&mut p, 0);
    let l = Limits::default();
    // the retransmit timer of the finished handshake may still wake the driver
    // once (early wake-ups are allowed); nothing happens then
    if let Some(t) = p.dev.poll_timeout().filter(|&t| t < l.rekey_after_time) {
        p.dev.handle_timeout(t);
        assert!(take_all(&mut p.dev).is_empty());
    }
    assert_eq!(p.dev.poll_timeout(), Some(l.rekey_after_time));
    // datagrams sealed just before the rekey, still in flight afterwards
    let t0 = l.rekey_after_time - MS;
    let up_old = seal(&mut p.dev, t0, p.gw_id, Channel::Hbc, 1, b"old-up").unwrap();
    let down_old = seal(&mut p.gw, t0, p.dev_id, Channel::Hbc, 1, b"old-down").unwrap();
    assert!(take_all(&mut p.dev).is_empty());
    p.dev.handle_timeout(l.rekey_after_time - 1);
    assert!(take_all(&mut p.dev).is_empty());
    let t1 = l.rekey_after_time;
    p.dev.handle_timeout(t1);
    let init = take_all(&mut p.dev);
    assert_eq!(init.len(), 1);
    assert!(p.dev.peer(p.gw_id).unwrap().handshake_pending());
    // the old session still carries traffic while the handshake is in flight
    let mid = seal(&mut p.dev, t1, p.gw_id, Channel::Llc, 2, b"mid").unwrap();
    open(&mut p.gw, t1, Channel::Llc, dev_addr(), &mid).unwrap();
    p.gw.open(t1, init[0].0.channel, dev_addr(), &mut init[0].1.clone())
        .unwrap();
    let mut resp = take_all(&mut p.gw)[0].1.clone();
    p.dev
        .open(t1 + MS, Channel::Llc, gw_addr(), &mut resp)
        .unwrap();
    assert_eq!(
        p.dev.peer(p.gw_id).unwrap().session_created(),
        Some(t1 + MS)
    );
    // the gateway keeps sending on the old session until the new one is confirmed
    let down_mid = seal(&mut p.gw, t1 + MS, p.dev_id, Channel::Hbc, 3, b"mid-down").unwrap();
    open(&mut p.dev, t1 + MS, Channel::Hbc, gw_addr(), &down_mid).unwrap();
    let new_up = seal(&mut p.dev, t1 + 2 * MS, p.gw_id, Channel::Hbc, 4, b"new-up").unwrap();
    assert_ne!(new_up[1..5], up_old[1..5]); // another session index
    open(&mut p.gw, t1 + 2 * MS, Channel::Hbc, dev_addr(), &new_up).unwrap();
    // in-flight datagrams of the old session arrive 100 ms late: still accepted
    let late = t1 + 100 * MS;
    assert_eq!(
        open(&mut p.gw, late, Channel::Hbc, dev_addr(), &up_old)
            .unwrap()
            .1,
        b"old-up"
    );
    assert_eq!(
        open(&mut p.dev, late, Channel::Hbc, gw_addr(), &down_old)
            .unwrap()
            .1,
        b"old-down"
    );
    // after the grace period the old session is gone
    let after = t1 + 2 * MS + l.previous_grace;
    let stale = {
        // the gateway's old session can no longer be used either: it sends on the new one
        let d = seal(&mut p.gw, after, p.dev_id, Channel::Hbc, 5, b"new-down").unwrap();
        assert_ne!(d[1..5], down_old[1..5]);
        d
    };
    open(&mut p.dev, after, Channel::Hbc, gw_addr(), &stale).unwrap();
    // past the grace period the old session opens nothing, timer or not
    let mut late_again = up_old.clone();
    late_again[5..13].copy_from_slice(&98u64.to_be_bytes());
    assert_eq!(
        open(&mut p.gw, after, Channel::Hbc, dev_addr(), &late_again),
        Err(CryptoDrop::UnknownIndex)
    );
    p.gw.handle_timeout(after);
    p.dev.handle_timeout(after);
    let mut again = up_old.clone();
    again[5..13].copy_from_slice(&99u64.to_be_bytes()); // any counter: the index is unknown now
    assert_eq!(
        open(&mut p.gw, after, Channel::Hbc, dev_addr(), &again),
        Err(CryptoDrop::UnknownIndex)
    );
}

#[test]
fn rekey_by_volume_and_reject_after_limits() {
    let limits = Limits {
        rekey_after_messages: 100,
        reject_after_messages: 150,
        ..Limits::default()
    };
    let mut p = pair_with(Config {
        limits,
        ..Config::default()
    });
    establish(&mut p, 0);
    for i in 0..100 {
        seal(&mut p.dev, MS, p.gw_id, Channel::Hbc, 0, b"v").unwrap();
        // the 100th datagram (counter 99) is the last below the limit
        let due = p.dev.poll_timeout() == Some(MS);
        assert_eq!(due, i == 99, "after {} datagrams", i + 1);
    }
    p.dev.handle_timeout(MS);
    let init = take_all(&mut p.dev);
    assert_eq!(init.len(), 1, "volume rekey starts a handshake");
    assert_eq!(init[0].1[0], 0x21);
    // without an answer: the session carries on up to the hard limit, then stops
    for _ in 100..150 {
        seal(&mut p.dev, MS, p.gw_id, Channel::Hbc, 0, b"v").unwrap();
    }
    assert_eq!(
        seal(&mut p.dev, MS, p.gw_id, Channel::Hbc, 0, b"v"),
        Err(SealError::NoSession)
    );
    // the other channel's counter space is not exhausted
    seal(&mut p.dev, MS, p.gw_id, Channel::Llc, 0, b"v").unwrap();
    // a counter at the limit is refused by the receiver
    let mut d = seal(&mut p.dev, MS, p.gw_id, Channel::Llc, 0, b"v").unwrap();
    d[5..13].copy_from_slice(&150u64.to_be_bytes());
    assert_eq!(
        open(&mut p.gw, MS, Channel::Llc, dev_addr(), &d),
        Err(CryptoDrop::CounterLimit)
    );
}

#[test]
fn sessions_expire_after_reject_time_without_rekey() {
    let mut p = pair();
    establish(&mut p, 0);
    let l = Limits::default();
    let d = seal(
        &mut p.dev,
        l.reject_after_time - 1,
        p.gw_id,
        Channel::Hbc,
        0,
        b"x",
    )
    .unwrap();
    // the device rekeys at 120 s; here every handshake datagram is lost
    let mut t = 0;
    while t < l.reject_after_time {
        t += 100 * MS;
        p.dev.handle_timeout(t);
        take_all(&mut p.dev);
    }
    assert_eq!(
        open(&mut p.gw, l.reject_after_time, Channel::Hbc, dev_addr(), &d),
        Err(CryptoDrop::Expired)
    );
    assert_eq!(
        seal(
            &mut p.gw,
            l.reject_after_time,
            p.dev_id,
            Channel::Hbc,
            0,
            b"x"
        ),
        Err(SealError::NoSession)
    );
    assert_eq!(
        seal(
            &mut p.dev,
            l.reject_after_time,
            p.gw_id,
            Channel::Hbc,
            0,
            b"x"
        ),
        Err(SealError::NoSession)
    );
    p.gw.handle_timeout(l.reject_after_time);
    assert_eq!(
        open(&mut p.gw, l.reject_after_time, Channel::Hbc, dev_addr(), &d),
        Err(CryptoDrop::UnknownIndex)
    );
    assert!(!p.dev.peer(p.gw_id).unwrap().has_session());
}

#[test]
fn lost_initiations_are_retried_on_alternating_channels_then_given_up() {
    let mut p = pair();
    let l = Limits::default();
    p.dev.connect(0, p.gw_id);
    let mut channels = Vec::new();
    let mut t = 0;
    while t <= l.rekey_attempt_time + 2 * SECOND {
        p.dev.handle_timeout(t);
        for (tx, _) in take_all(&mut p.dev) {
            channels.push((t, tx.channel));
        }
        t += 100 * MS;
    }
    // one attempt per rekey_timeout (1 s) for 90 s: 0 s, 1 s, ..., 89 s, then give up
    assert_eq!(channels.len(), 90, "{channels:?}");
    for (i, (at, ch)) in channels.iter().enumerate() {
        assert_eq!(*at, i as u64 * SECOND);
        let expect = if i % 2 == 0 {
            Channel::Llc
        } else {
            Channel::Hbc
        };
        assert_eq!(*ch, expect, "attempt {i}");
    }
    let s = p.dev.stats();
    assert_eq!((s.initiations_sent, s.retries, s.gave_up), (90, 89, 1));
    assert!(!p.dev.peer(p.gw_id).unwrap().handshake_pending());
    // the last attempt is answered over the HBC, the LLC being dead: a new
    // round (the next datagram to send) completes over the HBC
    assert_eq!(
        seal(&mut p.dev, t, p.gw_id, Channel::Hbc, 0, b"x"),
        Err(SealError::NoSession)
    );
    p.dev.handle_timeout(t);
    let init = take_all(&mut p.dev);
    assert_eq!(init[0].0.channel, Channel::Llc);
    // LLC dead: lost. Retry 1 s later over the HBC
    p.dev.handle_timeout(t + SECOND);
    let retry = take_all(&mut p.dev);
    assert_eq!(retry[0].0.channel, Channel::Hbc);
    p.gw.open(
        t + SECOND,
        Channel::Hbc,
        dev_addr(),
        &mut retry[0].1.clone(),
    )
    .unwrap();
    let mut resp = take_all(&mut p.gw);
    assert_eq!(resp[0].0.channel, Channel::Hbc);
    assert!(matches!(
        p.dev
            .open(t + SECOND, Channel::Hbc, gw_addr(), &mut resp[0].1),
        Ok(Opened::Handshake {
            established: true,
            ..
        })
    ));
}

#[test]
fn handshake_flood_is_bounded_by_rate_limits() {
    let mut p = pair();
    let rl = RateLimit::default();
    // Initiations of the right type and size, garbage inside, but with a
    // valid mac1: a sender who knows the gateway's public key. (Without it
    // they are dropped before anything is spent: tests/handshake_dos.rs.)
    let junk = {
        let mut j = vec![0x21u8; INITIATION_LEN];
        j[1..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = i as u8);
        mac::write(&mac::mac1_key(&p.gw.public_key()), &mut j, field::INIT_MAC1);
        j
    };
    // 10,000 from one address. The load meter (ratelimit.rs) counts every
    // one: after k it holds 2000 - k, below half the global burst from the
    // 1001st on. Until then the per-source bucket lets its burst (20) reach
    // the Diffie-Hellman code (which refuses them) and refuses the other 980
    // for free; from then on the gateway is under load and answers cookie
    // replies, spending no token and no DH.
    for _ in 0..10_000 {
        let _ = p.gw.open(0, Channel::Llc, dev_addr(), &mut junk.clone());
    }
    let c = p.gw.drops();
    assert_eq!(c.get(CryptoDrop::HandshakeInvalid), rl.per_source_burst);
    assert_eq!(c.get(CryptoDrop::RateLimited), 1000 - rl.per_source_burst);
    assert_eq!(c.get(CryptoDrop::CookieReplied), 9000);
    // no state; the only answers are cookie replies to the source (as many
    // as the queue holds: the agent drains it after every datagram)
    let out = take_all(&mut p.gw);
    assert_eq!(out.len(), 1024);
    assert_eq!(p.gw.stats().queue_overflow, 9000 - 1024);
    for (t, m) in &out {
        assert_eq!(
            (t.peer, t.to, m[0], m.len()),
            (None, Some(dev_addr()), 0x23, 61)
        );
    }
    // 10,000 sources: under load throughout, no DH at all
    for i in 0..10_000u32 {
        let from = SocketAddr::from(([10, 18, (i >> 8) as u8, i as u8], 1));
        let _ = p.gw.open(0, Channel::Llc, from, &mut junk.clone());
    }
    let c = p.gw.drops();
    assert_eq!(c.get(CryptoDrop::HandshakeInvalid), rl.per_source_burst);
    assert_eq!(c.get(CryptoDrop::CookieReplied), 19_000);
    let out = take_all(&mut p.gw);
    assert_eq!(out[0].0.to, Some(SocketAddr::from(([10, 18, 0, 0], 1))));
    assert!(!p.gw.peer(p.dev_id).unwrap().has_session());
    // the device gets through from its own address: a cookie reply first,
    // then at once the initiation again with mac2, admitted
    let dev_from: SocketAddr = "198.19.9.9:4000".parse().unwrap();
    let t = SECOND / 100;
    p.dev.connect(t, p.gw_id);
    p.dev.handle_timeout(t);
    let (_, r) = deliver_one(&mut p.dev, &mut p.gw, t, dev_from);
    assert_eq!(r, Err(CryptoDrop::CookieReplied));
    let (_, r) = deliver_one(&mut p.gw, &mut p.dev, t, gw_addr());
    assert_eq!(
        r,
        Ok(Opened::Handshake {
            peer: p.gw_id,
            established: false
        })
    );
    let (_, r) = deliver_one(&mut p.dev, &mut p.gw, t, dev_from);
    assert_eq!(
        r,
        Ok(Opened::Handshake {
            peer: p.dev_id,
            established: false
        })
    );
}

#[test]
fn a_device_handshakes_again_once_its_restarted_gateway_goes_silent() {
    // stale_after 1.5 s (the agent: three 500 ms probe intervals)
    let cfg = Config {
        limits: Limits {
            stale_after: Some(1_500 * MS),
            ..Limits::default()
        },
        ..Config::default()
    };
    let dev_key = PrivateKey::generate();
    let gw_key = PrivateKey::generate();
    let dev = Peers::new(dev_key.clone(), cfg);
    let gw_id = dev.add_peer(gw_key.public_key(), "gateway", true).unwrap();
    let new_gw = |key: &PrivateKey| {
        let gw = Peers::new(key.clone(), cfg);
        let id = gw.add_peer(dev_key.public_key(), "phone", false).unwrap();
        (gw, id)
    };
    let (gw, dev_id) = new_gw(&gw_key);
    let mut p = Pair {
        dev,
        gw,
        gw_id,
        dev_id,
        dev_key: dev_key.clone(),
    };
    establish(&mut p, 0);
    // traffic both ways keeps the session fresh: no new handshake at 1.4 s
    let up = seal(&mut p.dev, 1_000 * MS, gw_id, Channel::Llc, 1, b"up").unwrap();
    open(&mut p.gw, 1_000 * MS, Channel::Llc, dev_addr(), &up).unwrap();
    let down = seal(&mut p.gw, 1_000 * MS, dev_id, Channel::Llc, 1, b"down").unwrap();
    open(&mut p.dev, 1_000 * MS, Channel::Llc, gw_addr(), &down).unwrap();
    seal(&mut p.dev, 2_400 * MS, gw_id, Channel::Llc, 2, b"up").unwrap();
    p.dev.handle_timeout(2_400 * MS);
    assert!(take_all(&mut p.dev).is_empty());
    // the gateway restarts: a fresh table with the same key knows no session
    let (mut gw, dev_id) = new_gw(&gw_key);
    let lost = seal(&mut p.dev, 2_450 * MS, gw_id, Channel::Llc, 3, b"lost").unwrap();
    assert_eq!(
        open(&mut gw, 2_450 * MS, Channel::Llc, dev_addr(), &lost),
        Err(CryptoDrop::UnknownIndex)
    );
    // 1.5 s after the device last heard the gateway (1.0 s), its next seal
    // starts a handshake; the restarted gateway answers it
    seal(&mut p.dev, 2_499 * MS, gw_id, Channel::Llc, 4, b"x").unwrap();
    p.dev.handle_timeout(2_499 * MS);
    assert!(take_all(&mut p.dev).is_empty(), "not before 2.5 s");
    seal(&mut p.dev, 2_500 * MS, gw_id, Channel::Llc, 5, b"x").unwrap();
    p.dev.handle_timeout(2_500 * MS);
    let init = take_all(&mut p.dev);
    assert_eq!(init.len(), 1, "one initiation");
    assert_eq!(p.dev.stats().stale, 1);
    let mut m = init[0].1.clone();
    gw.open(2_510 * MS, init[0].0.channel, dev_addr(), &mut m)
        .unwrap();
    let mut resp = take_all(&mut gw)[0].1.clone();
    p.dev
        .open(2_520 * MS, init[0].0.channel, gw_addr(), &mut resp)
        .unwrap();
    // the keepalive confirms it; data flows again both ways
    for (t, mut d) in take_all(&mut p.dev) {
        gw.open(2_530 * MS, t.channel, dev_addr(), &mut d).unwrap();
    }
    let up = seal(&mut p.dev, 2_540 * MS, gw_id, Channel::Hbc, 6, b"again").unwrap();
    assert_eq!(
        open(&mut gw, 2_540 * MS, Channel::Hbc, dev_addr(), &up)
            .unwrap()
            .1,
        b"again"
    );
    let down = seal(&mut gw, 2_540 * MS, dev_id, Channel::Hbc, 6, b"back").unwrap();
    assert_eq!(
        open(&mut p.dev, 2_550 * MS, Channel::Hbc, gw_addr(), &down)
            .unwrap()
            .1,
        b"back"
    );
    // without stale_after (the default) nothing would have happened
    assert_eq!(Limits::default().stale_after, None);
}

/// A removed peer's session is forgotten at once: its next transport
/// datagram is refused as `unknown_index` and its handshakes as
/// `unknown_peer`; the slot is reused by the next peer added, and another
/// peer's session is untouched.
#[test]
fn removed_peer_is_refused_at_once_and_its_slot_reused() {
    let mut p = pair();
    let other_key = PrivateKey::generate();
    let mut other = Peers::new(other_key.clone(), Config::default());
    let g2 = other.add_peer(p.gw.public_key(), "gateway", true).unwrap();
    let other_id =
        p.gw.add_peer(other_key.public_key(), "phone-2", false)
            .unwrap();
    assert_eq!(other_id, PeerId(1));
    for (dev, g) in [(&mut p.dev, p.gw_id), (&mut other, g2)] {
        dev.connect(0, g);
        dev.handle_timeout(0);
        let (_, r) = deliver_one(dev, &mut p.gw, 0, dev_addr());
        assert!(matches!(
            r,
            Ok(Opened::Handshake {
                established: false,
                ..
            })
        ));
        let (_, r) = deliver_one(&mut p.gw, dev, 0, gw_addr());
        assert!(matches!(
            r,
            Ok(Opened::Handshake {
                established: true,
                ..
            })
        ));
        let (_, r) = deliver_one(dev, &mut p.gw, 0, dev_addr()); // key confirmation
        assert!(matches!(r, Ok(Opened::Keepalive { .. })), "{r:?}");
    }
    assert_eq!(p.gw.len(), 2);
    assert_eq!(p.gw.remove_peer(p.dev_id), Some(p.dev_key.public_key()));
    assert_eq!(p.gw.remove_peer(p.dev_id), None, "already removed");
    assert_eq!(p.gw.len(), 1);
    assert!(p.gw.peer(p.dev_id).is_none());
    assert_eq!(p.gw.find(&p.dev_key.public_key()), None);
    let mut buf = vec![0u8; PREFIX_LEN + H + 10 + TAG_LEN];
    // the removed device still has its session and seals ...
    let n = p.dev.seal(MS, p.gw_id, Channel::Hbc, &mut buf, 10).unwrap();
    // ... but the gateway refuses the datagram, and counts it
    assert_eq!(
        p.gw.open(MS, Channel::Hbc, dev_addr(), &mut buf[..n]),
        Err(CryptoDrop::UnknownIndex)
    );
    assert_eq!(p.gw.drops().get(CryptoDrop::UnknownIndex), 1);
    // nothing is sealed for it any more: its id names no peer
    assert_eq!(
        p.gw.seal(MS, p.dev_id, Channel::Hbc, &mut buf, 10),
        Err(SealError::UnknownPeer)
    );
    // its new handshake: unknown key
    let init = initiation(p.dev_key.clone(), p.gw.public_key());
    let mut m = init.clone();
    assert_eq!(
        p.gw.open(2 * MS, Channel::Llc, dev_addr(), &mut m),
        Err(CryptoDrop::UnknownPeer)
    );
    // the other device's session goes on
    let n = other.seal(MS, g2, Channel::Llc, &mut buf, 10).unwrap();
    assert!(matches!(
        p.gw.open(MS, Channel::Llc, dev_addr(), &mut buf[..n]),
        Ok(Opened::Data { peer, .. }) if peer == other_id
    ));
    // re-added (re-keyed device, same key here): the freed slot, a fresh peer
    let again =
        p.gw.add_peer(p.dev_key.public_key(), "phone", false)
            .unwrap();
    assert_eq!(again, p.dev_id);
    assert!(!p.gw.peer(again).unwrap().has_session());
    assert_eq!(p.gw.len(), 2);
    assert!(p.gw.add_peer(other_key.public_key(), "dup", false).is_err());
    let mut m = init;
    assert!(matches!(
        p.gw.open(3 * MS, Channel::Llc, dev_addr(), &mut m),
        Ok(Opened::Handshake { peer, .. }) if peer == again
    ));
}
