//! `realtime`: steering for WebRTC (issue 40). What it can see of a WebRTC session:
//! one UDP 5-tuple multiplexes STUN, DTLS and SRTP/SRTCP, told apart by the first
//! byte of the datagram (RFC 7983 §7); SRTP encrypts payloads, not RTP headers
//! (RFC 3711 §3.1). Rules, first match wins (`size` = wire bytes, `queue` = the
//! virtual LLC queue, `gap` = `(hbc_owd - llc_owd) * band_llc`, the bytes the LLC
//! can queue before a packet put on it arrives later than on the HBC):
//!
//! ```text
//! not WebRTC (below; also UDP port 53 (DNS) or 443 (QUIC), fragments) -> dchannel (Algorithm 1)
//! STUN (0-3 + magic cookie), DTLS content type 20-22     -> LLC `rt_setup` (small, rare, session setup)
//! no RTT estimates yet                                   -> HBC `no_estimate`
//! RTCP (RTP version 2, 2nd byte & 0x7f in 64-95)         -> LLC `rt_rtcp`  iff queue + size < gap
//! other DTLS record (data channel), IP length <= SMALL   -> LLC `rt_input` iff queue + size < gap
//!                  `realtime-dup`: and a copy on the other channel (duplicate)
//!                                   larger (bulk data)   -> HBC `rt_input`
//! RTP: per stream (flow, SSRC) a frame = packets with one timestamp (RFC 3550 §5.1)
//!   first packet of a frame: expected = max(wire bytes of the stream's previous frame, size)
//!     small frame (expected <= SMALL + overhead: one small packet, e.g. audio)
//!                            -> the LLC iff queue + expected < gap
//!     larger frame           -> the LLC iff queue + expected < FRAME_SHARE * gap
//!   later packets: the frame's channel; an LLC frame larger than expected moves its
//!                  remaining packets to the HBC from the first with queue + size >= gap
//!                                                        -> `rt_media` on either channel
//! every WebRTC packet: unordered (the receiver's reorder buffer does not hold it)
//! ```
//!
//! Why per frame: a video frame is decoded when its last packet arrives, so LLC bytes
//! spent on the head of a frame whose tail goes on the HBC buy nothing (the argument
//! of `burst`; sending the first K packets of every frame on the LLC would be that).
//! A frame that fits is delivered at the LLC's delay; small delta frames fit, large
//! and key frames go on the HBC. The previous frame of the stream is the prediction
//! (the encoder's rate changes slowly; a key frame is mispredicted once).
//! Audio needs no rule of its own: an Opus frame is one small packet (20 ms), a
//! small frame, as is a retransmission (RTX: its own SSRC, one packet per original
//! timestamp). Why `FRAME_SHARE`: larger (video) frames may fill only part of the
//! queue the gap allows, so that RTCP, input events and audio arriving behind a
//! frame still beat the HBC.
//! Why unordered: the receiver's reorder buffer holds an LLC packet until its flow's
//! earlier packets arrive, and all of a session's media share one flow; audio, RTCP or
//! a small frame on the LLC would wait for the previous frame's tail on the HBC. RTP
//! receivers reorder in their jitter buffer (RFC 3550 §8/§A.1 sequence numbers), DTLS
//! and SCTP by their own record and TSN numbers, so nothing is lost by passing them on.
//! Why `realtime-dup` duplicates inputs: an input event is the one packet whose delay
//! the user sees in full (input-to-display), and the rule's channel rests on delay
//! estimates (the HBC's window minimum) that a varying HBC (MM-D, LB-D) or a queue the
//! virtual one does not see can prove wrong; sent on both, it arrives at the faster
//! channel's delay, for a copy of 137 wire bytes per event (60-120 a second: at most
//! 0.13 Mbit/s of the LLC's 2). The copy is charged to the virtual LLC queue like any
//! LLC packet (crate::steer); the receiver delivers the first copy and drops the second
//! (crate::dedupe, before the reorder buffer). Media is not duplicated: the LLC cannot
//! carry a second copy of the video, and RTCP and audio ride behind its frames already.

use super::{Ctx, DChannel, Decision, Outcome, Policy};
use crate::flow_table::FlowState;
use crate::packet::PacketInfo;
use crate::Channel;

/// Largest "small" packet (IP bytes): a data-channel input event or SCTP
/// acknowledgement (a few dozen bytes of message behind SCTP's 28 bytes of header
/// and DATA chunk, RFC 4960 §3, DTLS's 13-byte header, AEAD nonce and tag, RFC 6347
/// §4.1, RFC 5288 §3, and 28 bytes of UDP/IPv4), or an audio frame (Opus, 20 ms).
/// Measured (aiortc 1.16 on loopback, `testdata/webrtc/`): a 44-byte input event is
/// 137 bytes, an SCTP SACK 93, Opus frames of noise 219..427; video packets are
/// 1368 and bulk data-channel records fill packets as large.
pub const SMALL: usize = 500;
/// Share of `gap` a video frame may fill of the LLC queue (module docs).
pub const FRAME_SHARE: f64 = 0.5;
/// RTP streams remembered per sender (a session has a handful per direction:
/// audio, video, their retransmissions); the least recently seen one is forgotten.
pub const MAX_STREAMS: usize = 64;

/// A WebRTC datagram, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// STUN (ICE checks, consent freshness) or a DTLS handshake, ChangeCipherSpec
    /// or alert record.
    Setup,
    /// RTCP (SR, RR, SDES, BYE, APP, transport and payload-specific feedback).
    Rtcp,
    /// Another DTLS record: application data, i.e. SCTP, the data channel
    /// (RFC 8261); DTLS 1.3's encrypted records (RFC 9147 §4) too.
    DataChannel,
    /// RTP (SRTP): the stream and the frame the packet belongs to.
    Rtp {
        /// Synchronization source: the stream.
        ssrc: u32,
        /// Sampling instant of the payload: packets of one frame share it.
        timestamp: u32,
    },
}

/// The WebRTC kind of a UDP payload, or None (RFC 7983 §7 ranges of the first byte).
pub fn classify(payload: &[u8]) -> Option<Kind> {
    let be32 = |at: usize| u32::from_be_bytes(payload[at..at + 4].try_into().unwrap());
    match *payload.first()? {
        // STUN: 20-byte header, magic cookie 0x2112A442 at bytes 4-7 (RFC 5389 §6)
        0..=3 if payload.len() >= 20 && be32(4) == 0x2112_A442 => Some(Kind::Setup),
        // DTLS record header: content type first (RFC 6347 §4.1; TLS 1.2 §6.2.1:
        // 20 change_cipher_spec, 21 alert, 22 handshake, 23 application_data)
        20..=22 => Some(Kind::Setup),
        23..=63 => Some(Kind::DataChannel),
        // RTP/RTCP version 2 (RFC 3550 §5.1, §6.4.1); RTCP packet types 192-223 show
        // as 64-95 once the marker bit is masked off (RFC 5761 §4): SR 200 .. APP 204
        // are 72-76, RTPFB 205 and PSFB 206 (RFC 4585 §6.1) 77 and 78.
        128..=191 if payload.len() >= 8 && (64..=95).contains(&(payload[1] & 0x7f)) => {
            Some(Kind::Rtcp)
        }
        128..=191 if payload.len() >= 12 => Some(Kind::Rtp {
            ssrc: be32(8),
            timestamp: be32(4),
        }),
        _ => None,
    }
}

/// The frame accounting of one RTP stream.
#[derive(Clone, Copy, Debug)]
struct Stream {
    flow: u16,
    ssrc: u32,
    /// Timestamp of the current frame.
    timestamp: u32,
    /// Wire bytes of the current frame so far, and of the stream's previous frame.
    so_far: usize,
    previous: usize,
    /// The current frame's channel is the LLC.
    on_llc: bool,
    /// When the stream was last seen (a decision count: recency only).
    last_seen: u64,
}

/// `realtime`: the rules of the module docs; `dchannel` with weight `alpha` for
/// everything else.
pub struct Realtime {
    fallback: DChannel,
    alpha: f64,
    /// `realtime-dup`: inputs go on both channels.
    duplicate_inputs: bool,
    streams: Vec<Stream>,
    decisions: u64,
}

impl Realtime {
    /// WebRTC rules, Algorithm 1 with weight `alpha` for other traffic.
    pub fn new(alpha: f64) -> Realtime {
        Realtime {
            fallback: DChannel::new(alpha),
            alpha,
            duplicate_inputs: false,
            streams: Vec::new(),
            decisions: 0,
        }
    }

    /// `realtime-dup`: the rules of `realtime`, and every input event (a small
    /// data-channel record, once the estimates exist) also goes on the other
    /// channel ([`Decision::duplicate`]).
    pub fn duplicating_inputs(alpha: f64) -> Realtime {
        Realtime {
            duplicate_inputs: true,
            ..Realtime::new(alpha)
        }
    }

    /// The stream (`flow`, `ssrc`), remembered from now on (forgetting the least
    /// recently seen one when `MAX_STREAMS` are); a new one starts a frame at
    /// `timestamp`.
    fn stream(&mut self, flow: u16, ssrc: u32, timestamp: u32) -> &mut Stream {
        self.decisions += 1;
        let fresh = Stream {
            flow,
            ssrc,
            timestamp: timestamp.wrapping_sub(1), // differs: its first packet starts a frame
            so_far: 0,
            previous: 0,
            on_llc: false,
            last_seen: self.decisions,
        };
        let known = self
            .streams
            .iter()
            .position(|s| (s.flow, s.ssrc) == (flow, ssrc));
        let i = match known {
            Some(i) => i,
            None if self.streams.len() < MAX_STREAMS => {
                self.streams.push(fresh);
                self.streams.len() - 1
            }
            None => {
                let oldest = (0..self.streams.len()).min_by_key(|&i| self.streams[i].last_seen);
                let oldest = oldest.expect("MAX_STREAMS > 0");
                self.streams[oldest] = fresh;
                oldest
            }
        };
        self.streams[i].last_seen = self.decisions;
        &mut self.streams[i]
    }

    /// The RTP packet of `size` wire bytes of stream (`flow`, `ssrc`) at `timestamp`:
    /// whether its frame's channel is the LLC, given the LLC's `room`; frames of at
    /// most `small` wire bytes are small.
    fn media(&mut self, rtp: (u16, u32, u32), size: usize, small: usize, room: Room) -> bool {
        let (flow, ssrc, timestamp) = rtp;
        let s = self.stream(flow, ssrc, timestamp);
        if s.timestamp != timestamp {
            if s.so_far > 0 {
                s.previous = s.so_far;
            }
            (s.timestamp, s.so_far) = (timestamp, 0);
            let expected = s.previous.max(size);
            let share = if expected <= small { 1.0 } else { FRAME_SHARE };
            s.on_llc = room.queue + (expected as f64) < share * room.gap;
        } else if s.on_llc && !room.fits(size) {
            s.on_llc = false; // larger than expected: the rest is faster on the HBC
        }
        s.so_far += size;
        s.on_llc
    }
}

/// The LLC queue and the bytes it may hold before the LLC is slower than the HBC.
#[derive(Clone, Copy, Debug)]
struct Room {
    queue: f64,
    gap: f64,
}

impl Room {
    fn of(ctx: &Ctx) -> Option<Room> {
        let gap = ctx.hbc_owd? as f64 - ctx.llc_owd? as f64;
        Some(Room {
            queue: ctx.llc_queue,
            gap: gap * ctx.llc_rate,
        })
    }

    /// A packet of `size` bytes put on the LLC arrives before it would on the HBC.
    fn fits(&self, size: usize) -> bool {
        self.queue + (size as f64) < self.gap
    }
}

/// The WebRTC kind of `pkt`, or None when it is not taken for WebRTC.
fn webrtc(pkt: &PacketInfo, raw: &[u8]) -> Option<Kind> {
    let other_udp = [53, crate::quic::PORT];
    if !pkt.is_udp() || pkt.fragment || [pkt.sport, pkt.dport].iter().any(|p| other_udp.contains(p))
    {
        return None;
    }
    classify(pkt.payload(raw))
}

impl Policy for Realtime {
    fn spec(&self) -> String {
        let name = if self.duplicate_inputs {
            "realtime-dup"
        } else {
            "realtime"
        };
        format!("{name}:alpha={}", self.alpha)
    }

    fn decide(
        &mut self,
        pkt: &PacketInfo,
        raw: &[u8],
        flow: &mut FlowState,
        ctx: &Ctx,
    ) -> Decision {
        let Some(kind) = webrtc(pkt, raw) else {
            return self.fallback.decide(pkt, raw, flow, ctx);
        };
        let size = pkt.ip_len + ctx.overhead;
        let room = Room::of(ctx);
        let mut d = match (kind, room) {
            (Kind::Setup, _) => Decision::new(Channel::Llc, Outcome::RtSetup),
            (_, None) => Decision::new(Channel::Hbc, Outcome::NoEstimate),
            (Kind::Rtcp, Some(r)) => {
                Decision::llc_if(r.fits(size), Outcome::RtRtcp, Outcome::RtRtcp)
            }
            (Kind::DataChannel, Some(r)) => {
                let small = pkt.ip_len <= SMALL;
                let mut d =
                    Decision::llc_if(small && r.fits(size), Outcome::RtInput, Outcome::RtInput);
                d.duplicate = small && self.duplicate_inputs;
                d
            }
            (Kind::Rtp { ssrc, timestamp }, Some(r)) => {
                let small = SMALL + ctx.overhead;
                let llc = self.media((flow.id, ssrc, timestamp), size, small, r);
                Decision::llc_if(llc, Outcome::RtMedia, Outcome::RtMedia)
            }
        };
        d.unordered = true;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use crate::packet::{self, build};
    use crate::steer::{ChannelView, SteerConfig, Steerer};
    use crate::{Direction, Nanos, MS};

    // Test setting (NSDI'23 §4.1, as in dchannel.rs): LLC 250 B/ms, one-way delays
    // HBC 20 ms / LLC 5 ms, no overhead: gap = 15 ms * 250 B/ms = 3750 bytes; a
    // larger frame may fill the queue up to FRAME_SHARE * gap = 1875 bytes.

    /// A UDP datagram of the session (device 40000 -> server 50000) with `payload`.
    fn dg(payload: &[u8]) -> Pkt {
        let raw = build::udp4([198, 19, 0, 2], [198, 18, 0, 1], 40000, 50000, payload);
        (packet::parse(&raw).unwrap(), raw)
    }

    /// STUN Binding request (RFC 5389 §6): type 0x0001, length 0, magic cookie,
    /// 96-bit transaction id.
    fn stun() -> Vec<u8> {
        let mut p = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
        p.extend_from_slice(&[7; 12]);
        p
    }

    /// A DTLS 1.2 record (RFC 6347 §4.1): content type, version {254, 253}, epoch,
    /// 48-bit sequence number, length, then `body` bytes.
    fn dtls(content_type: u8, body: usize) -> Vec<u8> {
        let mut p = vec![content_type, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 9];
        p.extend_from_slice(&(body as u16).to_be_bytes());
        p.resize(13 + body, 0xab);
        p
    }

    /// An RTCP header (RFC 3550 §6.4.1): V=2, count/FMT `count`, packet type `pt`,
    /// length in 32-bit words minus one, sender SSRC; `words` words in all.
    fn rtcp(count: u8, pt: u8, words: u16) -> Vec<u8> {
        let mut p = vec![0x80 | count, pt];
        p.extend_from_slice(&(words - 1).to_be_bytes());
        p.extend_from_slice(&0x1111_1111u32.to_be_bytes());
        p.resize(4 * words as usize, 0);
        p
    }

    /// An SRTP packet (RFC 3550 §5.1 header in clear, RFC 3711 §3.1): V=2, marker,
    /// payload type, sequence number, timestamp, SSRC, then `payload` bytes.
    fn rtp(marker: bool, pt: u8, ts: u32, ssrc: u32, payload: usize) -> Vec<u8> {
        let mut p = vec![0x80, (marker as u8) << 7 | pt, 0, 1];
        p.extend_from_slice(&ts.to_be_bytes());
        p.extend_from_slice(&ssrc.to_be_bytes());
        p.resize(12 + payload, 0xcd);
        p
    }

    #[test]
    fn classifies_by_the_first_byte_rfc7983() {
        let video = Kind::Rtp {
            ssrc: 0xaabb_ccdd,
            timestamp: 90_000,
        };
        for (payload, want) in [
            (stun(), Some(Kind::Setup)),
            (dtls(22, 100), Some(Kind::Setup)), // handshake
            (dtls(20, 1), Some(Kind::Setup)),   // ChangeCipherSpec
            (dtls(21, 2), Some(Kind::Setup)),   // alert
            (dtls(23, 80), Some(Kind::DataChannel)),
            (vec![0x2f, 0, 1, 0, 40], Some(Kind::DataChannel)), // DTLS 1.3 unified header
            (rtcp(0, 200, 7), Some(Kind::Rtcp)),                // SR
            (rtcp(1, 201, 8), Some(Kind::Rtcp)),                // RR, one report block
            (rtcp(15, 205, 5), Some(Kind::Rtcp)), // RTPFB FMT 15: transport-wide CC feedback
            (rtcp(1, 206, 3), Some(Kind::Rtcp)),  // PSFB FMT 1: PLI
            (rtp(true, 96, 90_000, 0xaabb_ccdd, 1100), Some(video)), // VP8, marker set
            (rtp(false, 96, 90_000, 0xaabb_ccdd, 1100), Some(video)),
            (
                rtp(false, 111, 4, 5, 90),
                Some(Kind::Rtp {
                    ssrc: 5,
                    timestamp: 4,
                }),
            ), // Opus
            (stun()[..19].to_vec(), None), // shorter than a STUN header
            ([&[0, 1, 0, 0, 1, 2, 3, 4][..], &[0; 12]].concat(), None), // no magic cookie
            (vec![64, 0, 0, 4, 1, 2, 3, 4], None), // TURN ChannelData (64-79)
            (vec![0x80, 96, 0, 1, 0, 0, 0, 0, 0, 0, 0], None), // 11 bytes: no full RTP header
            (vec![0x40; 40], None),        // QUIC short header
            (vec![0xc0; 40], None),        // QUIC long header
            (vec![], None),
        ] {
            assert_eq!(classify(&payload), want, "{payload:02x?}");
        }
    }

    fn realtime() -> Realtime {
        Realtime::new(0.75)
    }

    fn at(queue: f64) -> Ctx {
        let mut c = ctx(100 * MS, Direction::Downlink);
        c.llc_queue = queue;
        c
    }

    fn run(p: &mut Realtime, pr: &Pkt, c: &Ctx) -> (Channel, Outcome, bool) {
        let d = decide(p, pr, c);
        (d.channel, d.outcome, d.unordered)
    }

    #[test]
    fn setup_goes_on_the_llc_even_without_estimates_or_room() {
        let mut full = at(1e6);
        full.hbc_owd = None;
        for payload in [stun(), dtls(22, 1000)] {
            let want = (Channel::Llc, Outcome::RtSetup, true);
            assert_eq!(run(&mut realtime(), &dg(&payload), &full), want);
        }
        // anything else waits for the estimates, on the HBC
        let want = (Channel::Hbc, Outcome::NoEstimate, true);
        assert_eq!(run(&mut realtime(), &dg(&rtcp(1, 201, 8)), &full), want);
    }

    #[test]
    fn rtcp_and_input_take_the_llc_while_they_beat_the_hbc() {
        let mut p = realtime();
        // RR: 32 bytes + 28 of UDP/IP = 60; 3689 + 60 = 3749 < 3750 -> LLC; 3690 -> HBC
        let rr = dg(&rtcp(1, 201, 8));
        assert_eq!(rr.0.ip_len, 60);
        assert_eq!(
            run(&mut p, &rr, &at(3689.0)),
            (Channel::Llc, Outcome::RtRtcp, true)
        );
        assert_eq!(
            run(&mut p, &rr, &at(3690.0)),
            (Channel::Hbc, Outcome::RtRtcp, true)
        );
        // a data-channel record of SMALL (500) IP bytes is an input, LLC while
        // queue + 500 < 3750; of 501 bytes it is bulk data
        let input = dg(&dtls(23, SMALL - 28 - 13));
        let bulk = dg(&dtls(23, SMALL - 28 - 13 + 1));
        assert_eq!(input.0.ip_len, SMALL);
        assert_eq!(
            run(&mut p, &input, &at(3249.0)),
            (Channel::Llc, Outcome::RtInput, true)
        );
        assert_eq!(
            run(&mut p, &input, &at(3250.0)),
            (Channel::Hbc, Outcome::RtInput, true)
        );
        assert_eq!(
            run(&mut p, &bulk, &at(0.0)),
            (Channel::Hbc, Outcome::RtInput, true)
        );
    }

    #[test]
    fn realtime_dup_copies_inputs_and_nothing_else() {
        // The channel of each packet is realtime's (the test above); an input event
        // (a data-channel record of <= SMALL IP bytes) also goes on the other channel.
        let (mut plain, mut dup) = (realtime(), Realtime::duplicating_inputs(0.75));
        let input = dg(&dtls(23, SMALL - 28 - 13));
        let bulk = dg(&dtls(23, SMALL - 28 - 13 + 1));
        let mut none = at(0.0);
        none.llc_owd = None;
        for (pr, c, channel, copy) in [
            (&input, at(3249.0), Channel::Llc, true), // fits: LLC, copy on the HBC
            (&input, at(3250.0), Channel::Hbc, true), // does not: HBC, copy on the LLC
            (&bulk, at(0.0), Channel::Hbc, false),
            (&input, none, Channel::Hbc, false), // no estimates: realtime's HBC alone
            (&dg(&rtcp(1, 201, 8)), at(0.0), Channel::Llc, false),
            (&dg(&stun()), at(0.0), Channel::Llc, false),
            (
                &dg(&rtp(false, 111, 960, 9, 110)),
                at(0.0),
                Channel::Llc,
                false,
            ),
            (&udp(5000, 6000, 100), at(0.0), Channel::Llc, false), // Algorithm 1
        ] {
            let (d, p) = (decide(&mut dup, pr, &c), decide(&mut plain, pr, &c));
            assert_eq!((d.channel, d.duplicate), (channel, copy), "{:?}", pr.0);
            assert_eq!(
                (p.channel, p.outcome, p.duplicate),
                (d.channel, d.outcome, false)
            );
        }
        assert_eq!(dup.spec(), "realtime-dup:alpha=0.75");
    }

    #[test]
    fn other_traffic_is_algorithm_1() {
        // dchannel alpha 0.75 with 2000 queued bytes: 140 B -> LLC, 145 B -> HBC
        // (dchannel.rs, alpha_075_threshold_is_2143_bytes), whatever the first byte.
        let mut p = realtime();
        for port in [53, 443] {
            let mut raw = udp(port, 40000, 145).1;
            raw[28] = 0x80; // would read as RTP/RTCP
            let d = decide(&mut p, &(packet::parse(&raw).unwrap(), raw), &at(2000.0));
            assert_eq!(
                (d.channel, d.outcome, d.unordered),
                (Channel::Hbc, Outcome::Reward, false)
            );
        }
        let d = decide(&mut p, &tcp(0x10, b""), &at(2000.0));
        assert_eq!((d.channel, d.unordered), (Channel::Llc, false));
        let d = decide(&mut p, &udp(5000, 6000, 145), &at(2000.0));
        assert_eq!((d.channel, d.outcome), (Channel::Hbc, Outcome::Reward));
    }

    /// A steerer with `realtime` (no overhead, LLC 2 Mbit/s = 250 B/ms) and the
    /// channel view of the test setting.
    fn steerer() -> (Steerer, ChannelView) {
        let cfg = SteerConfig {
            overhead: 0,
            ..SteerConfig::default()
        };
        let s = Steerer::new(cfg, super::super::parse_spec("realtime", 0.75).unwrap());
        (s, ChannelView::up(Some(20 * MS), Some(5 * MS)))
    }

    /// The channels of the packets `(at, payload)`, steered in order.
    fn steer_all(s: &mut Steerer, v: &ChannelView, pkts: &[(Nanos, Vec<u8>)]) -> String {
        let mut out = String::new();
        for (at, payload) in pkts {
            let x = s.steer(*at, &dg(payload).1, v);
            assert!(x.decision.unordered);
            out.push(if x.channel == Channel::Llc { 'L' } else { 'H' });
        }
        out
    }

    #[test]
    fn video_frames_go_whole_on_the_llc_when_they_fit() {
        // Video at one frame per 16 ms (60 fps), packets of 600 IP bytes; the LLC
        // queue drains 4000 bytes between frames, so each frame starts at an empty
        // queue. A frame takes the LLC iff its expected size (the previous frame's)
        // is below 1875 bytes.
        let (mut s, v) = steerer();
        let frame = |k: u32, n: usize| -> Vec<(Nanos, Vec<u8>)> {
            let ts = 1000 + 1500 * k; // 90 kHz clock, 60 fps
            (0..n)
                .map(|i| (16 * MS * k as Nanos, rtp(i + 1 == n, 96, ts, 7, 600 - 40)))
                .collect()
        };
        // frame 0 (no previous: expected 600) and frame 1 (expected 1800): LLC;
        // frame 1 is 4 packets (2400 bytes), so frame 2 (expected 2400) goes on the
        // HBC, and frame 3, expected from frame 2's 1200 bytes, on the LLC again.
        assert_eq!(steer_all(&mut s, &v, &frame(0, 3)), "LLL");
        assert_eq!(steer_all(&mut s, &v, &frame(1, 4)), "LLLL");
        assert_eq!(steer_all(&mut s, &v, &frame(2, 2)), "HH");
        assert_eq!(steer_all(&mut s, &v, &frame(3, 7)), "LLLLLLH");
        // frame 3 expected 1200 bytes, took 7 * 600: its 7th packet would have met
        // 3600 queued bytes (3600 + 600 >= 3750): HBC, and the rest of the frame too.
        let late = (16 * MS * 3 + 4 * MS, rtp(true, 96, 1000 + 1500 * 3, 7, 560));
        assert_eq!(steer_all(&mut s, &v, &[late]), "H");
        // Per-channel counters match the decisions: 2 + 1 + 1 on the HBC, 3 + 4 + 6 LLC.
        assert_eq!(s.counts()[Outcome::RtMedia as usize], [4, 13]);
    }

    #[test]
    fn audio_and_feedback_keep_the_llc_behind_a_video_frame() {
        // A video frame of 3 x 600 bytes has filled the queue to 1800 bytes; the next
        // video frame (expected 1800: 1800 + 1800 >= 1875) goes on the HBC, but audio
        // (a small frame: 1800 + 150 < 3750), RTCP and an input event take the LLC.
        let (mut s, v) = steerer();
        let video: Vec<_> = (0..3).map(|i| (0, rtp(i == 2, 96, 3000, 7, 560))).collect();
        assert_eq!(steer_all(&mut s, &v, &video), "LLL");
        let opus = |ts: u32| rtp(false, 111, ts, 9, 150 - 40);
        let rest = [
            (0, rtp(false, 96, 4500, 7, 560)),
            (0, opus(960)),
            (0, rtcp(15, 205, 5)),
            (0, dtls(23, 40)),
            (0, opus(1920)),
        ];
        assert_eq!(steer_all(&mut s, &v, &rest), "HLLLL");
        let c = s.counts();
        assert_eq!(c[Outcome::RtMedia as usize], [1, 5]);
        assert_eq!(c[Outcome::RtRtcp as usize], [0, 1]);
        assert_eq!(c[Outcome::RtInput as usize], [0, 1]);
        assert!((s.llc_queue(0) - (1800.0 + 150.0 + 48.0 + 81.0 + 150.0)).abs() < 1e-6);
    }

    #[test]
    fn streams_are_forgotten_least_recently_seen_first() {
        // MAX_STREAMS + 1 streams of one 1000-byte frame each: the first one is
        // forgotten. With 1000 bytes queued, a remembered stream's next frame is
        // expected at 1000 bytes (2000 >= 1875: HBC); the forgotten one's at its
        // first packet's 600 (1600 < 1875: LLC).
        let mut p = realtime();
        let c = at(1000.0);
        let mut f = flow();
        let mut go = |ssrc: u32, ts: u32, len: usize| {
            let pr = dg(&rtp(false, 96, ts, ssrc, len - 40));
            p.decide(&pr.0, &pr.1, &mut f, &c).channel
        };
        for ssrc in 0..=MAX_STREAMS as u32 {
            go(ssrc, 1, 1000);
        }
        assert_eq!(go(MAX_STREAMS as u32, 2, 600), Channel::Hbc, "remembered");
        assert_eq!(go(0, 2, 600), Channel::Llc, "forgotten");
    }
}

/// Real WebRTC packets: an aiortc 1.16 session on loopback (audio, 640x480 VP8 video
/// at 30 fps, a data channel sending 60 input events a second), captured by
/// `testdata/webrtc/capture.py`; SRTP/SRTCP/DTLS payloads are ciphertext.
#[cfg(test)]
mod vectors {
    use super::*;
    use crate::packet;
    use crate::quic::vectors::hex;
    use crate::steer::{ChannelView, SteerConfig, Steerer};
    use crate::MS;

    /// The packets of `testdata/webrtc/<name>.hex`, one per line: parsed, and bytes.
    fn get(name: &str) -> Vec<(PacketInfo, Vec<u8>)> {
        macro_rules! files {
            ($($name:literal),*) => {
                [$(($name, include_str!(concat!("../../testdata/webrtc/", $name, ".hex")))),*]
            };
        }
        let all = files!(
            "stun-request",
            "dtls-client-hello",
            "dtls-change-cipher-spec",
            "datachannel-input",
            "datachannel-ack",
            "rtcp-sr",
            "rtcp-rr",
            "rtcp-psfb",
            "rtp-audio",
            "video-frame",
            "video-next-frame"
        );
        let text = all.iter().find(|f| f.0 == name).unwrap().1;
        text.lines()
            .map(|l| {
                let raw = hex(l);
                (packet::parse(&raw).unwrap(), raw)
            })
            .collect()
    }

    #[test]
    fn captured_packets_classify() {
        let audio = Kind::Rtp {
            ssrc: 0x0e4e_867e,
            timestamp: 0x31b0_3f96,
        };
        let video = Kind::Rtp {
            ssrc: 0x966d_c9c7,
            timestamp: 0x62bb_94b5,
        };
        for (name, kind, ip_len) in [
            ("stun-request", Kind::Setup, 116),
            ("dtls-client-hello", Kind::Setup, 808),
            ("dtls-change-cipher-spec", Kind::Setup, 103),
            ("datachannel-input", Kind::DataChannel, 137),
            ("datachannel-ack", Kind::DataChannel, 93),
            ("rtcp-sr", Kind::Rtcp, 124),
            ("rtcp-rr", Kind::Rtcp, 80),
            // PSFB (206) FMT 15, REMB: 78 after masking, outside SR..APP's 72-76
            ("rtcp-psfb", Kind::Rtcp, 72),
            ("rtp-audio", audio, 222), // PT 96 with the marker bit: second byte 0xe0
        ] {
            let (p, raw) = &get(name)[0];
            assert_eq!(p.ip_len, ip_len, "{name}");
            assert_eq!(classify(p.payload(raw)), Some(kind), "{name}");
        }
        // one video frame: 26 packets of 1368 bytes and the last (marker set) of 570
        let frame = get("video-frame");
        let lens: Vec<_> = frame.iter().map(|(p, _)| p.ip_len).collect();
        assert_eq!(lens, [[1368; 26].as_slice(), &[570]].concat());
        for (i, (p, raw)) in frame.iter().enumerate() {
            assert_eq!(classify(p.payload(raw)), Some(video));
            assert_eq!(
                p.payload(raw)[1] >> 7,
                (i == 26) as u8,
                "marker bit, packet {i}"
            );
        }
    }

    #[test]
    fn captured_session_steers_and_counts() {
        // The test setting (gap 3750 bytes, frames up to 1875; no overhead).
        let cfg = SteerConfig {
            overhead: 0,
            ..SteerConfig::default()
        };
        let mut s = Steerer::new(cfg, super::super::parse_spec("realtime", 0.75).unwrap());
        let v = ChannelView::up(Some(20 * MS), Some(5 * MS));
        let mut run = |at: u64, name: &str| -> String {
            let pkts = get(name);
            let chans = pkts.iter().map(|(_, raw)| {
                let x = s.steer(at * MS, raw, &v);
                assert!(x.decision.unordered, "{name}");
                if x.channel == Channel::Llc {
                    'L'
                } else {
                    'H'
                }
            });
            chans.collect()
        };
        // setup, then inputs and feedback: all on the LLC (each < 3750 - queue)
        for name in [
            "stun-request",
            "dtls-client-hello",
            "dtls-change-cipher-spec",
        ] {
            assert_eq!(run(0, name), "L", "{name}");
        }
        for name in ["datachannel-input", "datachannel-ack", "rtcp-sr", "rtcp-rr"] {
            assert_eq!(run(10, name), "L", "{name}");
        }
        assert_eq!(run(10, "rtcp-psfb"), "L");
        assert_eq!(run(10, "rtp-audio"), "L");
        // The stream's first frame (no previous: expected 1368 < 1875) starts on the
        // LLC; its third packet would meet 2736 queued bytes (+ 1368 >= 3750): the rest
        // of the 36 KB frame goes on the HBC.
        assert_eq!(run(100, "video-frame"), format!("LL{}", "H".repeat(25)));
        // Behind it, audio (2736 + 222) and an input (2958 + 137) still beat the HBC.
        assert_eq!(run(100, "rtp-audio"), "L");
        assert_eq!(run(100, "datachannel-input"), "L");
        // The next frame is expected as large as this one (36138 bytes): HBC.
        assert_eq!(run(133, "video-next-frame"), "H");
        // The counters hold exactly these decisions, per channel [HBC, LLC].
        let c = s.counts();
        assert_eq!(c[Outcome::RtSetup as usize], [0, 3]);
        assert_eq!(c[Outcome::RtInput as usize], [0, 3]);
        assert_eq!(c[Outcome::RtRtcp as usize], [0, 3]);
        assert_eq!(c[Outcome::RtMedia as usize], [26, 4]);
        let total: u64 = c.iter().flatten().sum();
        assert_eq!(total, 3 + 3 + 3 + 30);
    }
}
