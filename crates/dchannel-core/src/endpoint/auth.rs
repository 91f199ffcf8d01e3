//! The authenticity seam: who may send us datagrams and how ours are
//! finished. The endpoint calls [`DatagramAuth::open`] on every received
//! datagram right after decoding the 16-byte header and before reading its
//! body, and [`DatagramAuth::seal`] on every datagram it builds (data and
//! probes).
//!
//! [`TokenAuth`] is protocol version 1: the header's 64-bit auth field carries
//! the client's token, which stops strangers and misconfiguration but not an
//! on-path attacker (docs/wire.md). An AEAD implementation (issue 14: Noise IK
//! handshake, ChaCha20-Poly1305 per datagram) implements the same trait:
//! `seal` encrypts `buf[HEADER_LEN..HEADER_LEN + body_len]` in place with the
//! header as associated data and appends its tag ([`DatagramAuth::tailroom`]
//! bytes, which the drivers reserve); `open` checks the tag and the replay
//! window, decrypts in place and returns the plaintext's range. The halves run
//! on two threads, so each gets its own clone: an implementation with session
//! keys shares them between its clones (e.g. behind an `Arc`).

use super::{ConfigError, DropReason, PeerConfig};
use crate::wire::{Header, HEADER_LEN};
use crate::{Channel, Nanos};
use std::collections::HashMap;
use std::ops::Range;

/// An authenticated datagram: who sent it and where its (plaintext) body is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// Index of the configured peer that sent it.
    pub peer: usize,
    /// Byte range of the body within the datagram (after in-place decryption).
    pub body: Range<usize>,
}

/// Authenticates received datagrams and finishes outgoing ones.
pub trait DatagramAuth: Send {
    /// Bytes [`seal`](Self::seal) appends after the body (an AEAD tag); 0 for tokens.
    fn tailroom(&self) -> usize;

    /// Finishes the datagram in `buf` for `peer`: writes `header` (with its
    /// auth field set) into `buf[..HEADER_LEN]`; the body is
    /// `buf[HEADER_LEN..HEADER_LEN + body_len]`, followed by at least
    /// [`tailroom`](Self::tailroom) spare bytes. Returns the datagram's length.
    fn seal(
        &mut self,
        now: Nanos,
        peer: usize,
        header: Header,
        buf: &mut [u8],
        body_len: usize,
    ) -> usize;

    /// Decides whether `datagram` (whole; its header already decoded as
    /// `header`), received on `channel`, is authentic, and which peer sent it.
    /// May rewrite the body in place (decryption). An `Err` is counted under
    /// its reason and never answered.
    fn open(
        &mut self,
        now: Nanos,
        channel: Channel,
        header: &Header,
        datagram: &mut [u8],
    ) -> Result<Opened, DropReason>;
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
    fn tailroom(&self) -> usize {
        0
    }

    fn seal(
        &mut self,
        _: Nanos,
        peer: usize,
        header: Header,
        buf: &mut [u8],
        body_len: usize,
    ) -> usize {
        Header {
            token: self.tokens[peer],
            ..header
        }
        .encode(&mut buf[..HEADER_LEN]);
        HEADER_LEN + body_len
    }

    fn open(
        &mut self,
        _: Nanos,
        _: Channel,
        header: &Header,
        datagram: &mut [u8],
    ) -> Result<Opened, DropReason> {
        // One peer (every client, small gateways): a compare, no hashing.
        let peer = if self.tokens.len() == 1 {
            (self.tokens[0] == header.token).then_some(0)
        } else {
            self.by_token.get(&header.token).copied()
        };
        match peer {
            Some(peer) => Ok(Opened {
                peer,
                body: HEADER_LEN..datagram.len(),
            }),
            None => Err(DropReason::BadToken),
        }
    }
}
