//! The handshake DoS defence with synthetic time (docs/wire.md "Handshake
//! floods"; WireGuard §5.4.4–5.4.7): mac1 checked before anything is spent,
//! cookie replies only under load, mac2 bound to the source address, the
//! cookie secret replaced after 120 s.

mod common;

use common::{dev_addr, gw_addr, pair_with, take_all, Pair};
use dchannel_crypto::cookie::COOKIE_LIFETIME;
use dchannel_crypto::format::{field, COOKIE_REPLY_LEN, INITIATION_LEN};
use dchannel_crypto::ratelimit::RateLimit;
use dchannel_crypto::{mac, Channel, Config, CryptoDrop, Nanos, Opened, Peers, PrivateKey, SECOND};
use std::net::SocketAddr;

/// A gateway whose global bucket (and load meter) holds 10 initiations and
/// never refills: it is under load from the 6th initiation past mac1 on, for
/// good.
fn finite_budget() -> Config {
    Config {
        rate_limit: RateLimit {
            global_burst: 10,
            global_per_s: 0,
            ..RateLimit::default()
        },
        ..Config::default()
    }
}

/// The device's next initiation (it starts a handshake at `now`).
fn initiation(p: &mut Pair, now: Nanos) -> Vec<u8> {
    p.dev.connect(now, p.gw_id);
    p.dev.handle_timeout(now);
    let out = take_all(&mut p.dev);
    assert_eq!(out.len(), 1);
    out[0].1.clone()
}

/// `n` initiations with a valid mac1 and garbage inside, each from its own
/// address: each that gets past the limits costs a DH (and fails there).
fn keyed_junk(gw: &mut Peers, now: Nanos, n: u32) {
    let key = mac::mac1_key(&gw.public_key());
    for i in 0..n {
        let mut j = vec![0x21u8; INITIATION_LEN];
        j[1..]
            .iter_mut()
            .enumerate()
            .for_each(|(k, b)| *b = k as u8);
        mac::write(&key, &mut j, field::INIT_MAC1);
        let from = SocketAddr::from(([10, 9, (i >> 8) as u8, i as u8], 7));
        let _ = gw.open(now, Channel::Llc, from, &mut j);
    }
}

/// The limiter's state: (sources tracked, global nano-tokens).
fn limiter(gw: &Peers) -> (usize, u64) {
    let l = gw.limiter();
    (l.sources(), l.global_nano_tokens())
}

#[test]
fn bad_mac1_is_dropped_and_counted_before_any_token_state_or_dh() {
    let mut p = pair_with(Config::default());
    let before = limiter(&p.gw);
    assert_eq!(
        before,
        (0, 2000 * SECOND),
        "a full global bucket, no source"
    );
    let genuine = initiation(&mut p, 0);
    // mac1 keyed by another gateway's public key
    let mut wrong_key = genuine.clone();
    let other = mac::mac1_key(&PrivateKey::generate().public_key());
    mac::write(&other, &mut wrong_key, field::INIT_MAC1);
    let mut cases = vec![wrong_key];
    // any one byte flipped: in the Noise message, in the clear index, in mac1
    for at in [0x40, 2, field::INIT_MAC1.start, field::INIT_MAC1.end - 1] {
        let mut m = genuine.clone();
        m[at] ^= 0x01;
        cases.push(m);
    }
    // random bytes of the initiation's type and size (a junk flood's datagram)
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut junk = vec![0u8; INITIATION_LEN];
    for b in junk.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    junk[0] = 0x21;
    cases.push(junk);
    for (i, m) in cases.iter().enumerate() {
        for k in 0..1000u32 {
            let from = SocketAddr::from(([10, 1, (k >> 8) as u8, k as u8], 9));
            assert_eq!(
                p.gw.open(0, Channel::Llc, from, &mut m.clone()),
                Err(CryptoDrop::BadMac1),
                "case {i}"
            );
        }
    }
    let c = p.gw.drops();
    assert_eq!(c.get(CryptoDrop::BadMac1), 6 * 1000);
    assert_eq!(c.total(), 6 * 1000, "no other reason: no DH was tried");
    // no token spent, no source tracked, no answer, no state
    assert_eq!(limiter(&p.gw), before);
    assert!(take_all(&mut p.gw).is_empty());
    assert_eq!(p.gw.stats().answered, 0);
    // the genuine one still goes through, spending one token from its source
    assert!(matches!(
        p.gw.open(0, Channel::Llc, dev_addr(), &mut genuine.clone()),
        Ok(Opened::Handshake { .. })
    ));
    assert_eq!(limiter(&p.gw), (1, 1999 * SECOND));
    // a response with a flipped mac1 byte is dropped by the device the same way
    let resp = take_all(&mut p.gw);
    let mut bad = resp[0].1.clone();
    bad[field::RESP_MAC1.start] ^= 0x80;
    assert_eq!(
        p.dev.open(0, Channel::Llc, gw_addr(), &mut bad),
        Err(CryptoDrop::BadMac1)
    );
    assert!(p.dev.peer(p.gw_id).unwrap().handshake_pending());
}

#[test]
fn cookie_replies_only_under_load() {
    let mut p = pair_with(finite_budget());
    // not under load: the initiation is answered with a response at once
    let mut m = initiation(&mut p, 0);
    assert!(p.gw.open(0, Channel::Llc, dev_addr(), &mut m).is_ok());
    let out = take_all(&mut p.gw);
    assert_eq!((out.len(), out[0].1[0]), (1, 0x22));
    assert_eq!(p.gw.drops().get(CryptoDrop::CookieReplied), 0);
    // 4 more DH (junk): 5 of the 10 tokens left, and 5 on the load meter
    // (it counts every initiation past mac1)
    keyed_junk(&mut p.gw, 0, 4);
    assert_eq!(p.gw.drops().get(CryptoDrop::HandshakeInvalid), 4);
    assert_eq!(p.gw.limiter().global_nano_tokens(), 5 * SECOND);
    assert!(!p.gw.limiter().under_load(0));
    // the next initiation leaves 4 on the meter: under load. The device's
    // (no cookie yet) gets a cookie reply only: no token, no DH, to its
    // source, on its channel
    let mut m = initiation(&mut p, SECOND);
    let ch = Channel::Llc;
    assert_eq!(
        p.gw.open(SECOND, ch, dev_addr(), &mut m),
        Err(CryptoDrop::CookieReplied)
    );
    assert_eq!(p.gw.limiter().global_nano_tokens(), 5 * SECOND);
    assert!(p.gw.limiter().under_load(SECOND));
    let out = take_all(&mut p.gw);
    assert_eq!(out.len(), 1);
    let (t, reply) = &out[0];
    assert_eq!(
        (t.peer, t.channel, t.to, t.len, reply[0]),
        (None, ch, Some(dev_addr()), COOKIE_REPLY_LEN, 0x23)
    );
    // its receiver index is the initiation's clear sender index
    assert_eq!(
        reply[field::RECEIVER_INDEX],
        m[field::INIT_SENDER_INDEX],
        "names the initiation"
    );
    assert_eq!(p.gw.stats().answered, 1);
}

#[test]
fn under_load_a_valid_mac2_is_admitted_and_the_same_mac2_from_another_address_is_not() {
    let mut p = pair_with(finite_budget());
    keyed_junk(&mut p.gw, 0, 5); // 5 of 10 left: the next one is under load
    let t = SECOND;
    let mut m = initiation(&mut p, t);
    assert_eq!(
        p.gw.open(t, Channel::Llc, dev_addr(), &mut m),
        Err(CryptoDrop::CookieReplied)
    );
    let reply = take_all(&mut p.gw).remove(0).1;
    // the device keeps the cookie and at once sends the initiation again,
    // on the channel the cookie came on, now with mac2
    let sent = p.dev.stats().initiations_sent;
    assert_eq!(
        p.dev.open(t, Channel::Llc, gw_addr(), &mut reply.clone()),
        Ok(Opened::Handshake {
            peer: p.gw_id,
            established: false
        })
    );
    assert_eq!(p.dev.stats().initiations_sent, sent + 1);
    let out = take_all(&mut p.dev);
    assert_eq!(out.len(), 1);
    let (tx, retry) = &out[0];
    assert_eq!(tx.channel, Channel::Llc);
    assert_ne!(retry[field::INIT_MAC2], [0u8; 16], "mac2 set");
    // the same cookie reply again names no initiation in flight any more
    assert_eq!(
        p.dev.open(t, Channel::Llc, gw_addr(), &mut reply.clone()),
        Err(CryptoDrop::UnexpectedResponse)
    );
    // the retry's mac2 is refused from any other address (another port of
    // the same host, another host): a cookie reply, no token, no DH
    let tokens = p.gw.limiter().global_nano_tokens();
    for other in ["198.18.0.2:4001", "198.18.0.3:4000"] {
        assert_eq!(
            p.gw.open(t, Channel::Llc, other.parse().unwrap(), &mut retry.clone()),
            Err(CryptoDrop::CookieReplied),
            "{other}"
        );
    }
    assert_eq!(p.gw.limiter().global_nano_tokens(), tokens);
    assert_eq!(take_all(&mut p.gw).len(), 2);
    // from the device's address it is admitted: one token, a response
    assert_eq!(
        p.gw.open(t, Channel::Llc, dev_addr(), &mut retry.clone()),
        Ok(Opened::Handshake {
            peer: p.dev_id,
            established: false
        })
    );
    assert_eq!(p.gw.limiter().global_nano_tokens(), tokens - SECOND);
    let resp = take_all(&mut p.gw).remove(0).1;
    assert!(matches!(
        p.dev.open(t, Channel::Llc, gw_addr(), &mut resp.clone()),
        Ok(Opened::Handshake {
            established: true,
            ..
        })
    ));
    // replayed from the device's address it passes mac2 and is refused by
    // its stamp (a DH was spent: the replay costs a token)
    assert_eq!(
        p.gw.open(t, Channel::Llc, dev_addr(), &mut retry.clone()),
        Err(CryptoDrop::HandshakeReplay)
    );
}

#[test]
fn the_cookie_secret_is_replaced_after_120_s() {
    let mut p = pair_with(finite_budget());
    keyed_junk(&mut p.gw, 0, 5);
    // the first cookie is made at t0: the secret is drawn then
    let t0 = 5 * SECOND;
    let mut m = initiation(&mut p, t0);
    let _ = p.gw.open(t0, Channel::Llc, dev_addr(), &mut m);
    let reply = take_all(&mut p.gw).remove(0).1;
    p.dev
        .open(t0, Channel::Llc, gw_addr(), &mut reply.clone())
        .unwrap();
    let retry = take_all(&mut p.dev).remove(0).1;
    // mac2 made with that secret passes until t0 + 120 s (the stamp is then
    // what refuses the second copy: mac2 came first and passed) ...
    assert!(p
        .gw
        .open(t0, Channel::Llc, dev_addr(), &mut retry.clone())
        .is_ok());
    let _ = take_all(&mut p.gw);
    let last = t0 + COOKIE_LIFETIME - 1;
    assert_eq!(
        p.gw.open(last, Channel::Llc, dev_addr(), &mut retry.clone()),
        Err(CryptoDrop::HandshakeReplay)
    );
    // ... and not from t0 + 120 s on: a new secret, a new cookie reply
    assert_eq!(
        p.gw.open(
            t0 + COOKIE_LIFETIME,
            Channel::Llc,
            dev_addr(),
            &mut retry.clone()
        ),
        Err(CryptoDrop::CookieReplied)
    );
    let fresh = take_all(&mut p.gw).remove(0).1;
    assert_eq!(fresh.len(), COOKIE_REPLY_LEN);
    // the device, whose cookie (received at t0) it still deems fresh, sees
    // a new one and retries at once with it: admitted
    let t1 = t0 + COOKIE_LIFETIME;
    p.dev
        .open(t1, Channel::Llc, gw_addr(), &mut fresh.clone())
        .unwrap();
    let mut again = take_all(&mut p.dev).remove(0).1;
    assert_ne!(again[field::INIT_MAC2], retry[field::INIT_MAC2]);
    assert!(matches!(
        p.gw.open(t1, Channel::Llc, dev_addr(), &mut again),
        Ok(Opened::Handshake { .. })
    ));
    assert_eq!(
        COOKIE_LIFETIME,
        120 * SECOND,
        "WireGuard's Cookie-Refresh-Time"
    );
}
