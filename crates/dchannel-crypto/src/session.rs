//! One established session: a key per direction, a send counter and a
//! receive anti-replay window per channel, and its age and volume for rekeying.
//!
//! [`Session::seal`] and [`Session::open`] work on whole transport datagrams in
//! place (layout in [`crate::format`]); they allocate nothing.

use crate::aead::{Cipher, TransportKey};
use crate::format::{field, read_u64, PREFIX_LEN, TAG_LEN, TYPE_TRANSPORT};
use crate::replay::ReplayWindow;
use crate::{Channel, CryptoDrop, Nanos};

/// An established session with one peer.
#[derive(Debug)]
pub struct Session {
    /// Index the peer puts in datagrams for us (we chose it).
    pub local_index: u32,
    /// Index we put in datagrams for the peer (it chose it).
    pub remote_index: u32,
    /// When the handshake completed.
    pub created: Nanos,
    /// Whether this side sent the initiation.
    pub initiator: bool,
    send: TransportKey,
    recv: TransportKey,
    next_counter: [u64; 2],
    windows: [ReplayWindow; 2],
}

impl Session {
    /// A session from the two raw keys of the handshake split (wiped afterwards).
    pub fn new(
        cipher: Cipher,
        send_key: &mut [u8; 32],
        recv_key: &mut [u8; 32],
        local_index: u32,
        remote_index: u32,
        created: Nanos,
        initiator: bool,
    ) -> Session {
        Session {
            local_index,
            remote_index,
            created,
            initiator,
            send: TransportKey::new(cipher, send_key),
            recv: TransportKey::new(cipher, recv_key),
            next_counter: [0; 2],
            windows: [ReplayWindow::default(), ReplayWindow::default()],
        }
    }

    /// The transport cipher.
    pub fn cipher(&self) -> Cipher {
        self.send.cipher()
    }

    /// The counter the next datagram on `channel` will carry.
    pub fn next_counter(&self, channel: Channel) -> u64 {
        self.next_counter[channel.index()]
    }

    /// The larger of the two channels' send counters (for rekey-by-volume).
    pub fn max_sent(&self) -> u64 {
        self.next_counter[0].max(self.next_counter[1])
    }

    /// Seals `buf[..PREFIX_LEN + header_len + payload_len + TAG_LEN]` in place:
    /// writes the prefix, encrypts the payload (the bytes after the header) and
    /// appends the tag. An empty header and payload make a keepalive. The
    /// caller has checked the length and the counter limit.
    pub fn seal(
        &mut self,
        channel: Channel,
        buf: &mut [u8],
        header_len: usize,
        payload_len: usize,
    ) -> usize {
        let counter = self.next_counter[channel.index()];
        self.next_counter[channel.index()] += 1;
        buf[field::TYPE] = TYPE_TRANSPORT;
        buf[field::RECEIVER_INDEX].copy_from_slice(&self.remote_index.to_be_bytes());
        buf[field::COUNTER].copy_from_slice(&counter.to_be_bytes());
        let ad_end = PREFIX_LEN + header_len;
        let end = ad_end + payload_len;
        let (ad, rest) = buf.split_at_mut(ad_end);
        let (data, tail) = rest.split_at_mut(payload_len);
        self.send
            .seal(channel, counter, ad, data, &mut tail[..TAG_LEN]);
        end + TAG_LEN
    }

    /// Authenticates and decrypts a transport datagram in place (the caller has
    /// matched the index and checked the length). `header_len` is 0 for a
    /// keepalive. On success the plaintext payload is
    /// `dgram[PREFIX_LEN + header_len .. len - TAG_LEN]`.
    pub fn open(
        &mut self,
        channel: Channel,
        dgram: &mut [u8],
        header_len: usize,
        reject_after_messages: u64,
    ) -> Result<(), CryptoDrop> {
        let counter = read_u64(dgram, field::COUNTER);
        if counter >= reject_after_messages {
            return Err(CryptoDrop::CounterLimit);
        }
        let w = &mut self.windows[channel.index()];
        w.check(counter)?;
        let (ad, data) = dgram.split_at_mut(PREFIX_LEN + header_len);
        self.recv.open(channel, counter, ad, data)?;
        if !w.update(counter) {
            return Err(CryptoDrop::Replay);
        }
        Ok(())
    }
}

/// A pair of sessions made from the same keys, as the two ends see them (tests).
#[cfg(test)]
pub(crate) fn pair(cipher: Cipher) -> (Session, Session) {
    let a = Session::new(cipher, &mut [1; 32], &mut [2; 32], 10, 20, 0, true);
    let b = Session::new(cipher, &mut [2; 32], &mut [1; 32], 20, 10, 0, false);
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_per_channel_counters() {
        let (mut a, mut b) = pair(Cipher::Aes256Gcm);
        let mut buf = vec![0u8; 64];
        buf[PREFIX_LEN..PREFIX_LEN + 4].copy_from_slice(b"HDR!");
        buf[PREFIX_LEN + 4..PREFIX_LEN + 9].copy_from_slice(b"hello");
        let n = a.seal(Channel::Llc, &mut buf, 4, 5);
        assert_eq!(n, PREFIX_LEN + 4 + 5 + TAG_LEN);
        assert_eq!(&buf[..5], &[0x20, 0, 0, 0, 20]);
        assert_eq!(read_u64(&buf, field::COUNTER), 0);
        assert_eq!(&buf[PREFIX_LEN..PREFIX_LEN + 4], b"HDR!"); // header in clear
        assert_ne!(&buf[PREFIX_LEN + 4..PREFIX_LEN + 9], b"hello");
        let mut copy = buf[..n].to_vec();
        b.open(Channel::Llc, &mut copy, 4, u64::MAX).unwrap();
        assert_eq!(&copy[PREFIX_LEN + 4..PREFIX_LEN + 9], b"hello");
        // the other channel's counter space is separate
        assert_eq!(a.next_counter(Channel::Llc), 1);
        assert_eq!(a.next_counter(Channel::Hbc), 0);
        let mut copy = buf[..n].to_vec();
        assert_eq!(
            b.open(Channel::Llc, &mut copy, 4, u64::MAX),
            Err(CryptoDrop::Replay)
        );
    }
}
