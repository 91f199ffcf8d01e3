//! The rule: a responder under load admits an initiation only if its `mac2`
//! proves the sender receives datagrams at the source address it claims;
//! otherwise it answers with a cookie reply and spends nothing else on it
//! (WireGuard, Donenfeld, NDSS 2017, §5.4.7).
//!
//! ```text
//! cookie       = MAC(R_secret, source IP address || source UDP port)   R_secret: random, replaced every 120 s
//! cookie reply = 0x23 | receiver index | nonce (24, random) | XChaCha20-Poly1305(key = HASH("cookie--" || responder's public key),
//!                                                                            nonce, cookie, associated data = the initiation's mac1)
//! mac2         = MAC(cookie, msg[..mac2 offset])        (16 zero bytes without a fresh cookie)
//! ```
//!
//! Why: mac1 ([`crate::mac`]) stops senders who do not know the gateway's
//! public key, but every device knows it, and so may an attacker. Such a
//! sender can spoof any source address, so per-address rate limits alone
//! cannot tell its junk from a genuine device's rekey. A cookie is
//! only readable at the source address it was sent to: once the responder is
//! under load, initiations from spoofed sources get nothing but a 61-byte
//! reply (smaller than the 146-byte initiation: no amplification) that nobody
//! reads, while a genuine device retries at once with mac2 and is admitted
//! (then rate-limited per address, which now is its own). The reply is bound
//! to the initiation's mac1, so only someone who saw that initiation (and knows
//! the responder's public key) can forge one.
//!
//! [`CookieChecker`] is the responder's half (the mac1 and mac2 checks, the
//! secret, the replies); [`Cookie`] is what an initiator keeps from a reply.

use crate::format::field::{
    COOKIE_NONCE, COOKIE_SEALED, INIT_MAC1, INIT_MAC2, INIT_SENDER_INDEX, RECEIVER_INDEX,
    RESP_MAC1, TYPE,
};
use crate::format::{
    COOKIE_REPLY_LEN, INITIATION_LEN, MAC_LEN, RESPONSE_LEN, TYPE_COOKIE_REPLY, TYPE_INITIATION,
};
use crate::keys::PublicKey;
use crate::mac::{self, Mac};
use crate::ratelimit::Limiter;
use crate::{CryptoDrop, Nanos, SECOND};
use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Mutex;

/// How long a cookie secret lives at the responder, and how long an initiator
/// uses a cookie it received (WireGuard's `Cookie-Refresh-Time`, 120 s).
pub const COOKIE_LIFETIME: Nanos = 120 * SECOND;

/// The MAC input that names a source: its IP address octets, then its port
/// (big-endian).
fn source_bytes(from: SocketAddr, out: &mut [u8; 18]) -> &[u8] {
    let n = match from.ip() {
        std::net::IpAddr::V4(ip) => {
            out[..4].copy_from_slice(&ip.octets());
            4
        }
        std::net::IpAddr::V6(ip) => {
            out[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    out[n..n + 2].copy_from_slice(&from.port().to_be_bytes());
    &out[..n + 2]
}

/// The responder's half: checks mac1 and mac2 of the handshake messages it
/// receives and writes cookie replies.
pub struct CookieChecker {
    /// Key of the mac1 of every handshake message sent to us.
    mac1_key: [u8; 32],
    /// Encrypts our cookie replies.
    reply: XChaCha20Poly1305,
    /// The current secret and when it was drawn (drawn at first use), under
    /// its own mutex: a gateway's workers check handshakes at once, and the
    /// lock is held for the secret's copy (or redraw) only, never during
    /// Diffie-Hellman work.
    secret: Mutex<Option<([u8; 32], Nanos)>>,
}

impl CookieChecker {
    /// The checker of the side whose static public key is `local`.
    pub fn new(local: &PublicKey) -> CookieChecker {
        CookieChecker {
            mac1_key: mac::mac1_key(local),
            reply: XChaCha20Poly1305::new(&mac::cookie_key(local).into()),
            secret: Mutex::new(None),
        }
    }

    /// Whether `msg[at]` is a valid mac1 for us (one BLAKE2s, nothing else).
    pub fn mac1_ok(&self, msg: &[u8], at: Range<usize>) -> bool {
        mac::verify(&self.mac1_key, msg, at)
    }

    /// The first check of a handshake message (initiation or response, told
    /// by its type byte): its exact length, then its mac1. Costs one BLAKE2s
    /// at most and changes nothing.
    pub fn check_mac1(&self, msg: &[u8]) -> Result<(), CryptoDrop> {
        let (len, at) = if msg.first() == Some(&TYPE_INITIATION) {
            (INITIATION_LEN, INIT_MAC1)
        } else {
            (RESPONSE_LEN, RESP_MAC1)
        };
        if msg.len() != len {
            return Err(if msg.len() < len {
                CryptoDrop::Truncated
            } else {
                CryptoDrop::HandshakeInvalid
            });
        }
        if !self.mac1_ok(msg, at) {
            return Err(CryptoDrop::BadMac1);
        }
        Ok(())
    }

    /// The admission of an initiation whose mac1 passed, before any state or
    /// Diffie-Hellman: counted on the load meter ([`Limiter::offer`]); under
    /// load it needs a valid
    /// mac2 for its source, else the cookie reply is written to
    /// `reply[..COOKIE_REPLY_LEN]` and `Err(CookieReplied)` returned (send
    /// it to `from`); then a token from the limiter (`Err(RateLimited)`).
    pub fn admit(
        &self,
        now: Nanos,
        from: SocketAddr,
        initiation: &[u8],
        limiter: &mut Limiter,
        reply: &mut [u8],
    ) -> Result<(), CryptoDrop> {
        if limiter.offer(now) {
            let cookie = self.cookie(now, from);
            if !mac::verify(&cookie, initiation, INIT_MAC2) {
                self.seal_reply(cookie, initiation, reply);
                return Err(CryptoDrop::CookieReplied);
            }
        }
        if !limiter.allow(now, from.ip()) {
            return Err(CryptoDrop::RateLimited);
        }
        Ok(())
    }

    /// The cookie of source `from` at `now`: MAC(secret, address || port),
    /// the secret replaced once it is [`COOKIE_LIFETIME`] old.
    pub fn cookie(&self, now: Nanos, from: SocketAddr) -> Mac {
        let secret = {
            // poisoned: another worker panicked; the secret is still whole
            let mut held = self.secret.lock().unwrap_or_else(|e| e.into_inner());
            match *held {
                Some((s, born)) if now < born + COOKIE_LIFETIME => s,
                _ => {
                    let mut s = [0u8; 32];
                    getrandom::fill(&mut s).expect("operating system random generator");
                    *held = Some((s, now));
                    s
                }
            }
        };
        let mut buf = [0u8; 18];
        mac::mac(&secret, source_bytes(from, &mut buf))
    }

    /// Whether the initiation `msg` carries a valid mac2 for source `from`.
    pub fn mac2_ok(&self, now: Nanos, from: SocketAddr, msg: &[u8], at: Range<usize>) -> bool {
        let cookie = self.cookie(now, from);
        mac::verify(&cookie, msg, at)
    }

    /// Writes the cookie reply to the initiation `initiation` (mac1 already
    /// verified) from `from` into `out[..COOKIE_REPLY_LEN]`.
    pub fn write_reply(&self, now: Nanos, from: SocketAddr, initiation: &[u8], out: &mut [u8]) {
        let cookie = self.cookie(now, from);
        self.seal_reply(cookie, initiation, out);
    }

    /// Writes the cookie reply carrying `cookie` to `initiation`.
    fn seal_reply(&self, cookie: Mac, initiation: &[u8], out: &mut [u8]) {
        debug_assert_eq!(initiation.len(), INITIATION_LEN);
        out[TYPE] = TYPE_COOKIE_REPLY;
        out[RECEIVER_INDEX].copy_from_slice(&initiation[INIT_SENDER_INDEX]);
        getrandom::fill(&mut out[COOKIE_NONCE]).expect("operating system random generator");
        let nonce = *XNonce::from_slice(&out[COOKIE_NONCE]);
        let sealed = &mut out[COOKIE_SEALED];
        sealed[..MAC_LEN].copy_from_slice(&cookie);
        let tag = self
            .reply
            .encrypt_in_place_detached(&nonce, &initiation[INIT_MAC1], &mut sealed[..MAC_LEN])
            .expect("16 bytes are within XChaCha20-Poly1305's limits");
        sealed[MAC_LEN..].copy_from_slice(&tag);
    }
}

/// A cookie an initiator received, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cookie {
    value: Mac,
    received: Nanos,
}

impl Cookie {
    /// Reads the cookie reply `reply` from `responder`, which answers the
    /// initiation whose mac1 was `mac1_sent`.
    pub fn open_reply(
        responder: &PublicKey,
        reply: &[u8],
        mac1_sent: &Mac,
        now: Nanos,
    ) -> Result<Cookie, CryptoDrop> {
        if reply.len() != COOKIE_REPLY_LEN {
            return Err(if reply.len() < COOKIE_REPLY_LEN {
                CryptoDrop::Truncated
            } else {
                CryptoDrop::HandshakeInvalid
            });
        }
        let key = mac::cookie_key(responder);
        let nonce = XNonce::from_slice(&reply[COOKIE_NONCE]);
        let sealed = &reply[COOKIE_SEALED];
        let mut value: Mac = sealed[..MAC_LEN].try_into().expect("16 bytes");
        XChaCha20Poly1305::new(&key.into())
            .decrypt_in_place_detached(
                nonce,
                mac1_sent,
                &mut value,
                Tag::from_slice(&sealed[MAC_LEN..]),
            )
            .map_err(|_| CryptoDrop::HandshakeInvalid)?;
        Ok(Cookie {
            value,
            received: now,
        })
    }

    /// Whether `other` carries the same cookie (received at any time).
    pub fn same_value(&self, other: &Cookie) -> bool {
        self.value == other.value
    }

    /// Whether it is still to be used (received less than
    /// [`COOKIE_LIFETIME`] ago).
    pub fn fresh(&self, now: Nanos) -> bool {
        now < self.received + COOKIE_LIFETIME
    }

    /// Writes mac2 = MAC(cookie, `msg[..at.start]`) to `msg[at]` if `cookie`
    /// is fresh, else zeros.
    pub fn write_mac2(cookie: Option<&Cookie>, now: Nanos, msg: &mut [u8], at: Range<usize>) {
        match cookie.filter(|c| c.fresh(now)) {
            Some(c) => {
                mac::write(&c.value, msg, at);
            }
            None => msg[at].fill(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrivateKey;

    fn initiation(responder: &PublicKey, sender_index: u32) -> ([u8; INITIATION_LEN], Mac) {
        let mut m = [0x42u8; INITIATION_LEN];
        m[INIT_SENDER_INDEX].copy_from_slice(&sender_index.to_be_bytes());
        let mac1 = mac::write(&mac::mac1_key(responder), &mut m, INIT_MAC1);
        (m, mac1)
    }

    #[test]
    fn the_reply_carries_the_sources_cookie_to_the_initiator_only() {
        let gw = PrivateKey::from_bytes([3; 32]).public_key();
        let checker = CookieChecker::new(&gw);
        let (mut init, mac1) = initiation(&gw, 0xdead_beef);
        assert!(checker.mac1_ok(&init, INIT_MAC1));
        let from: SocketAddr = "198.18.0.2:4000".parse().unwrap();
        let mut reply = [0u8; COOKIE_REPLY_LEN];
        checker.write_reply(5, from, &init, &mut reply);
        assert_eq!(reply[TYPE], TYPE_COOKIE_REPLY);
        assert_eq!(reply[RECEIVER_INDEX], 0xdead_beefu32.to_be_bytes());
        let c = Cookie::open_reply(&gw, &reply, &mac1, 6).unwrap();
        assert_eq!(c.value, checker.cookie(6, from), "MAC(secret, source)");
        // bound to the initiation's mac1 and to the responder's key
        let other = PrivateKey::from_bytes([4; 32]).public_key();
        assert_eq!(
            Cookie::open_reply(&gw, &reply, &[0; MAC_LEN], 6),
            Err(CryptoDrop::HandshakeInvalid)
        );
        assert_eq!(
            Cookie::open_reply(&other, &reply, &mac1, 6),
            Err(CryptoDrop::HandshakeInvalid)
        );
        // mac2 with it passes for that source only, zero mac2 never
        Cookie::write_mac2(Some(&c), 7, &mut init, INIT_MAC2);
        assert!(checker.mac2_ok(7, from, &init, INIT_MAC2));
        let other_port: SocketAddr = "198.18.0.2:4001".parse().unwrap();
        let other_ip: SocketAddr = "198.18.0.3:4000".parse().unwrap();
        assert!(!checker.mac2_ok(7, other_port, &init, INIT_MAC2));
        assert!(!checker.mac2_ok(7, other_ip, &init, INIT_MAC2));
        Cookie::write_mac2(None, 7, &mut init, INIT_MAC2);
        assert_eq!(init[INIT_MAC2], [0; MAC_LEN]);
        assert!(!checker.mac2_ok(7, from, &init, INIT_MAC2));
        // an initiator stops using a cookie 120 s after it came
        Cookie::write_mac2(Some(&c), 6 + COOKIE_LIFETIME, &mut init, INIT_MAC2);
        assert_eq!(init[INIT_MAC2], [0; MAC_LEN]);
    }

    #[test]
    fn the_secret_is_replaced_after_120_s() {
        let checker = CookieChecker::new(&PublicKey([1; 32]));
        let from: SocketAddr = "[2001:db8::1]:9".parse().unwrap();
        let c0 = checker.cookie(10, from);
        assert_eq!(checker.cookie(10 + COOKIE_LIFETIME - 1, from), c0);
        let c1 = checker.cookie(10 + COOKIE_LIFETIME, from);
        assert_ne!(c1, c0, "a new secret gives a new cookie");
        assert_eq!(checker.cookie(10 + 2 * COOKIE_LIFETIME - 1, from), c1);
    }

    #[test]
    fn cut_and_long_replies_are_refused() {
        let gw = PublicKey([1; 32]);
        let r = [0u8; COOKIE_REPLY_LEN + 1];
        assert_eq!(
            Cookie::open_reply(&gw, &r[..COOKIE_REPLY_LEN - 1], &[0; 16], 0),
            Err(CryptoDrop::Truncated)
        );
        assert_eq!(
            Cookie::open_reply(&gw, &r, &[0; 16], 0),
            Err(CryptoDrop::HandshakeInvalid)
        );
    }
}
