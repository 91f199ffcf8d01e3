//! The crypto state kept for one peer: up to three sessions and at most one
//! handshake in flight, so handshake state per peer is bounded whatever arrives.
//!
//! - `current`: the session we send on.
//! - `previous`: the session `current` replaced, kept receive-only for
//!   [`Limits::previous_grace`] so datagrams sealed before the rekey and still
//!   in flight (the HBC may lag the LLC by 100+ ms) are not lost.
//! - `next`: a session this side answered as responder, not yet confirmed; it
//!   becomes `current` when the first datagram sealed with it arrives (key
//!   confirmation, as in WireGuard).
//!
//! [`Peer::deadline`] is the next time something is due for this peer; the
//! table ([`crate::Peers`]) acts on it.

use crate::cookie::Cookie;
use crate::handshake::InFlight;
use crate::keys::PublicKey;
use crate::peers::Limits;
use crate::session::Session;
use crate::{Channel, Nanos};

/// A handshake this side initiated and retransmits until answered.
#[derive(Debug)]
pub(crate) struct Pending {
    pub hs: InFlight,
    /// When the first attempt of this handshake round went out.
    pub first_sent: Nanos,
    /// When the latest attempt went out.
    pub last_sent: Nanos,
    /// Channel of the latest attempt (retries alternate).
    pub channel: Channel,
}

/// One peer of the table.
#[derive(Debug)]
pub struct Peer {
    /// Its static public key.
    pub public_key: PublicKey,
    /// Its name (from the device file, or any label).
    pub name: String,
    /// Whether this side starts handshakes with it (the device does; the
    /// gateway only answers).
    pub initiates: bool,
    pub(crate) current: Option<Box<Session>>,
    pub(crate) previous: Option<(Box<Session>, Nanos)>,
    pub(crate) next: Option<Box<Session>>,
    pub(crate) pending: Option<Box<Pending>>,
    /// A handshake is wanted (no usable session, or time/volume to rekey).
    pub(crate) want_handshake: bool,
    /// Largest initiation stamp accepted from this peer.
    pub(crate) last_stamp: u64,
    /// Earliest deadline this peer has in the timer heap.
    pub(crate) scheduled: Option<Nanos>,
    /// When a datagram from this peer last authenticated (transport or
    /// handshake response); `Limits::stale_after` counts from it.
    pub(crate) last_heard: Option<Nanos>,
    /// Cookies from the peer's cookie replies, per channel (index =
    /// `Channel`): each channel sends from its own address, and a cookie
    /// proves one address. Boxed: only an initiator ever gets one, and a
    /// gateway holds thousands of peers.
    cookies: Option<Box<[Option<Cookie>; 2]>>,
    /// The slot of a removed peer ([`crate::Peers::remove_peer`]), free for reuse.
    pub(crate) removed: bool,
}

impl Peer {
    pub(crate) fn new(public_key: PublicKey, name: String, initiates: bool) -> Peer {
        Peer {
            public_key,
            name,
            initiates,
            current: None,
            previous: None,
            next: None,
            pending: None,
            want_handshake: false,
            last_heard: None,
            removed: false,
            last_stamp: 0,
            scheduled: None,
            cookies: None,
        }
    }

    /// The cookie for initiations on `channel`, if one came.
    pub(crate) fn cookie(&self, channel: Channel) -> Option<&Cookie> {
        self.cookies.as_ref()?[channel.index()].as_ref()
    }

    /// Keeps `cookie` for `channel`; returns the one it replaces.
    pub(crate) fn set_cookie(&mut self, channel: Channel, cookie: Cookie) -> Option<Cookie> {
        self.cookies.get_or_insert_default()[channel.index()].replace(cookie)
    }

    /// Whether a session to send on exists (it may still be about to expire).
    pub fn has_session(&self) -> bool {
        self.current.is_some()
    }

    /// Whether a handshake this side started is awaiting its response.
    pub fn handshake_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// When the current session was established.
    pub fn session_created(&self) -> Option<Nanos> {
        self.current.as_ref().map(|s| s.created)
    }

    /// The next time something is due: retransmit, give up, rekey, expire.
    pub fn deadline(&self, l: &Limits) -> Option<Nanos> {
        let mut d: Option<Nanos> = None;
        let mut at = |t: Nanos| d = Some(d.map_or(t, |x| x.min(t)));
        if let Some(p) = &self.pending {
            at(p.last_sent + l.rekey_timeout);
        } else if self.initiates {
            if self.want_handshake {
                at(0);
            }
            if let Some(s) = &self.current {
                at(s.created + l.rekey_after_time);
            }
        }
        if let Some(s) = &self.current {
            at(s.created + l.reject_after_time);
        }
        if let Some((_, retire)) = &self.previous {
            at(*retire);
        }
        if let Some(s) = &self.next {
            at(s.created + l.reject_after_time);
        }
        d
    }
}
