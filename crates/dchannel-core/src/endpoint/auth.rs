//! The authenticity seam: who may send us datagrams and how ours are
//! finished. The endpoint calls [`DatagramAuth::open`] on every received
//! datagram before it reads anything else of it, and [`DatagramAuth::seal`]
//! on every datagram it builds (data and probes).
//!
//! A datagram as the endpoint builds it in a buffer:
//!
//! ```text
//! [ headroom() | dchannel header (16) | body | tailroom() ]
//! ```
//!
//! [`TokenAuth`] is protocol version 1 (lab use only, `--insecure`): no
//! headroom, no tailroom, the header's 64-bit auth field carries the client's
//! token, which stops strangers and misconfiguration but not an on-path
//! attacker (docs/wire.md). The AEAD implementation (`dchannel_crypto::endpoint`,
//! issue 14) writes its 13-byte prefix (type, receiver index, counter) into the
//! headroom, encrypts the body in place with prefix and header as associated
//! data and appends its 16-byte tag; it also has datagrams of its own
//! (handshake messages, keepalives), which come out of
//! [`DatagramAuth::poll_transmit`] and go in through `open` like any other
//! ([`Opened::Control`]), and timers (retries, rekeys) that the receive half
//! drives with its own. The halves run on two threads, so each gets its own
//! clone: an implementation with session keys shares them between its clones
//! (e.g. behind an `Arc`).

use super::{ConfigError, DropReason, PeerConfig};
use crate::wire::{Header, HEADER_LEN};
use crate::{Channel, Nanos};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::Range;

/// An authenticated datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// A dchannel datagram (data or probe): who sent it, its header and where
    /// its (plaintext) body is.
    Datagram {
        /// Index of the configured peer that sent it.
        peer: usize,
        /// Its decoded dchannel header.
        header: Header,
        /// Byte range of the body within the datagram (after in-place decryption).
        body: Range<usize>,
    },
    /// A datagram of the authentication layer itself (handshake message,
    /// keepalive), consumed; any answer comes out of
    /// [`DatagramAuth::poll_transmit`].
    Control {
        /// The configured peer it came from.
        peer: usize,
    },
}

/// A datagram of the authentication layer to send: `buf[..len]` on `channel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthTransmit {
    /// The peer it is for; `None`: an answer to a source not (yet)
    /// authenticated as a peer (a cookie reply), `to` is then set.
    pub peer: Option<usize>,
    /// The channel to send it on.
    pub channel: Channel,
    /// Destination when it answers a datagram (its source); `None`: the
    /// peer's endpoint on `channel` as the endpoint knows it.
    pub to: Option<SocketAddr>,
    /// Bytes written.
    pub len: usize,
}

/// A kind of datagram an authentication layer can accept, told by its first
/// byte and its length alone. The driver compiles the list into a kernel
/// socket filter (the agent's `prefilter.rs`), so that a datagram of no such
/// shape is dropped before the agent ever reads it: garbage costs a flooded
/// gateway no system call. Passing the shape proves nothing; `open` decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Bits of the first byte that must equal `first`'s.
    pub mask: u8,
    /// The first byte, under `mask`.
    pub first: u8,
    /// Shortest datagram of this kind (bytes).
    pub min_len: usize,
    /// Longest datagram of this kind (bytes).
    pub max_len: usize,
}

impl Shape {
    /// Any datagram of at least one byte.
    pub const ANY: Shape = Shape {
        mask: 0,
        first: 0,
        min_len: 1,
        max_len: u16::MAX as usize,
    };

    /// Whether `datagram` has this shape.
    pub fn matches(&self, datagram: &[u8]) -> bool {
        (self.min_len..=self.max_len).contains(&datagram.len())
            && datagram
                .first()
                .is_some_and(|b| b & self.mask == self.first & self.mask)
    }
}

/// Where a received datagram came from: the channel whose socket it arrived
/// on and the address that sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// The channel it arrived on.
    pub channel: Channel,
    /// The address it was sent from.
    pub addr: SocketAddr,
}

/// A datagram the endpoint has built and hands to [`DatagramAuth::seal`]:
/// to whom, on which channel, its header and how long its body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing {
    /// Index of the configured peer it goes to.
    pub peer: usize,
    /// The channel it goes on.
    pub channel: Channel,
    /// Its dchannel header; the seal sets the auth field.
    pub header: Header,
    /// Bytes of body after the header.
    pub body_len: usize,
}

impl Outgoing {
    /// Probe `id` to `peer` on `channel`, its body already encoded after the
    /// header room (the wire's probe header and probe body length).
    pub fn probe(peer: usize, id: u32, channel: Channel) -> Outgoing {
        Outgoing {
            peer,
            channel,
            header: crate::wire::probe_header(id, channel),
            body_len: crate::wire::PROBE_BODY_LEN,
        }
    }
}

/// Authenticates received datagrams and finishes outgoing ones.
pub trait DatagramAuth: Send {
    /// The shapes of every datagram [`open`](Self::open) can accept (a
    /// superset: one that fits none is surely refused). Default: anything.
    fn shapes(&self) -> Vec<Shape> {
        vec![Shape::ANY]
    }

    /// Bytes [`seal`](Self::seal) writes in front of the dchannel header (0 for tokens).
    fn headroom(&self) -> usize;

    /// Bytes [`seal`](Self::seal) appends after the body (an AEAD tag; 0 for tokens).
    fn tailroom(&self) -> usize;

    /// Finishes the datagram `out` describes in `buf`: writes `out.header`
    /// (with its auth field set) at `buf[headroom..headroom + HEADER_LEN]`;
    /// the body is the `out.body_len` bytes after it, followed by at least
    /// [`tailroom`](Self::tailroom) spare bytes. Returns the datagram's
    /// length (it starts at `buf[0]`), or why it cannot be sent now (e.g.
    /// [`DropReason::NoSession`] while a handshake is under way).
    fn seal(&mut self, now: Nanos, out: Outgoing, buf: &mut [u8]) -> Result<usize, DropReason>;

    /// Decides whether `datagram` (whole), received from `source`, is
    /// authentic, and which peer sent it. May rewrite it in place
    /// (decryption). An `Err` is counted under its reason and never answered.
    fn open(
        &mut self,
        now: Nanos,
        source: Source,
        datagram: &mut [u8],
    ) -> Result<Opened, DropReason>;

    /// Whether datagrams to `peer` can be sealed now (a session exists). The
    /// receive half holds an initiator's probe rounds until then, so that
    /// the first probes are not lost to the handshake.
    fn can_seal(&self, _peer: usize) -> bool {
        true
    }

    /// The next datagram of the authentication layer itself, written to
    /// `buf` (at least [`max_transmit_len`](Self::max_transmit_len) bytes).
    fn poll_transmit(&mut self, _now: Nanos, _buf: &mut [u8]) -> Option<AuthTransmit> {
        None
    }

    /// Bytes of the largest datagram [`poll_transmit`](Self::poll_transmit) writes.
    fn max_transmit_len(&self) -> usize {
        0
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    fn poll_timeout(&self) -> Option<Nanos> {
        None
    }

    /// Does what is due at `now` (handshake retries, rekeys, session expiry).
    fn handle_timeout(&mut self, _now: Nanos) {}
}

/// Version 1: a per-client bearer token in the header's auth field.
#[derive(Clone, Debug)]
pub struct TokenAuth {
    /// Token per peer index.
    tokens: Vec<u64>,
    /// Peer index per token (only consulted with more than one peer).
    by_token: HashMap<u64, usize>,
}

impl TokenAuth {
    /// Token checks for `peers`; two peers may not share a token.
    pub fn new(peers: &[PeerConfig]) -> Result<TokenAuth, ConfigError> {
        let mut by_token = HashMap::new();
        for (i, p) in peers.iter().enumerate() {
            if by_token.insert(p.token, i).is_some() {
                return Err(ConfigError::DuplicateToken(p.name.clone()));
            }
        }
        Ok(TokenAuth {
            tokens: peers.iter().map(|p| p.token).collect(),
            by_token,
        })
    }
}

impl DatagramAuth for TokenAuth {
    /// A version-1 header (version in the first byte's high nibble) and
    /// whatever body follows it.
    fn shapes(&self) -> Vec<Shape> {
        vec![Shape {
            mask: 0xf0,
            first: crate::wire::VERSION << 4,
            min_len: HEADER_LEN,
            max_len: u16::MAX as usize,
        }]
    }

    fn headroom(&self) -> usize {
        0
    }

    fn tailroom(&self) -> usize {
        0
    }

    fn seal(&mut self, _: Nanos, out: Outgoing, buf: &mut [u8]) -> Result<usize, DropReason> {
        Header {
            token: self.tokens[out.peer],
            ..out.header
        }
        .encode(&mut buf[..HEADER_LEN]);
        Ok(HEADER_LEN + out.body_len)
    }

    fn open(&mut self, _: Nanos, _: Source, datagram: &mut [u8]) -> Result<Opened, DropReason> {
        let header = Header::decode(datagram)?;
        // One peer (every client, small gateways): a compare, no hashing.
        let peer = if self.tokens.len() == 1 {
            (self.tokens[0] == header.token).then_some(0)
        } else {
            self.by_token.get(&header.token).copied()
        };
        match peer {
            Some(peer) => Ok(Opened::Datagram {
                peer,
                header,
                body: HEADER_LEN..datagram.len(),
            }),
            None => Err(DropReason::BadToken),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MsgType;

    #[test]
    fn token_shapes_fit_sealed_datagrams_and_nothing_else() {
        let peers = [PeerConfig {
            name: "p".into(),
            token: 7,
            tunnel_addr: None,
            endpoints: [None, None],
        }];
        let mut auth = TokenAuth::new(&peers).unwrap();
        let mut buf = [0u8; HEADER_LEN + 2];
        let header = Header {
            msg_type: MsgType::Probe,
            flags: 0,
            flow_id: 0,
            seq: 1,
            token: 0,
        };
        let out = Outgoing {
            peer: 0,
            channel: Channel::Llc,
            header,
            body_len: 2,
        };
        let n = auth.seal(0, out, &mut buf).unwrap();
        let fits = |dg: &[u8]| auth.shapes().iter().any(|s| s.matches(dg));
        assert!(fits(&buf[..n]));
        assert!(
            fits(&buf[..HEADER_LEN]),
            "a bare header may still be refused by open"
        );
        assert!(!fits(&buf[..HEADER_LEN - 1]), "shorter than a header");
        let mut v2 = buf;
        v2[0] = 0x20 | (v2[0] & 0x0f); // an encrypted (version 2) type byte
        assert!(!fits(&v2));
        assert!(!fits(&[]));
        // The default of an authentication layer that says nothing: anything.
        assert!(Shape::ANY.matches(&[0xff]) && !Shape::ANY.matches(&[]));
    }
}
