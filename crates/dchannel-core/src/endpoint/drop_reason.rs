//! Why a datagram or a packet was dropped: the one table of the agent's
//! `malformed` counters (`malformed.<name>` in the stats JSON,
//! `dchannel_malformed_total{reason="<name>"}` in Prometheus), so a drop is
//! never silent. The endpoint returns most of them; the driver counts the
//! I/O ones (`unparsable_inner`, `send_error`, `tun_write_error`,
//! `bad_offload`, and `truncated` for a datagram that filled its buffer).

use crate::wire::WireError;

counter_table! {
    /// Why a datagram (receive half) or an inner packet (send half, driver)
    /// was dropped, or, for `unparsable_inner`, sent without flow state.
    pub enum DropReason {
        /// Shorter than the header or the probe body, filled the receive buffer, or no room to seal
        Truncated,
        /// Header version is not the one this agent speaks
        UnknownVersion,
        /// Header type is neither data nor probe
        UnknownType,
        /// Probe with an unknown kind or channel byte
        BadProbe,
        /// Data datagram without an inner packet
        EmptyData,
        /// Token of no configured peer (version 1, --insecure)
        BadToken,
        /// Refused by the encryption layer (per reason in crypto.drops)
        Unauthentic,
        /// No session with the peer yet or any more (handshake pending)
        NoSession,
        /// Authentic, but not from the peer's endpoint on that channel
        ForeignSource,
        /// Inner source is not the sending client's tunnel address
        SpoofedSource,
        /// Inner packet is not IPv4/IPv6 where its source must be checked
        BadInner,
        /// Inner packet the parser could not read (sent on the HBC, no flow)
        UnparsableInner,
        /// Inner destination is no configured client (gateway)
        NoClient,
        /// No endpoint known for the peer on either channel yet (gateway)
        NoEndpoint,
        /// The socket refused a datagram
        SendError,
        /// The TUN refused a packet
        TunWriteError,
        /// TUN read whose virtio_net_hdr or super-packet could not be cut into packets
        BadOffload,
        /// Inner destination the gateway does not forward to (egress.rs: its own addresses, loopback, link-local, metadata; --egress-allow/--egress-deny)
        EgressDenied,
        /// Authentic, but its peer is served by another receive worker (the kernel's steering failed)
        OtherWorker,
    }
}

impl From<WireError> for DropReason {
    /// The counter of a datagram the wire decoder refused.
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated { .. } => DropReason::Truncated,
            WireError::UnknownVersion(_) => DropReason::UnknownVersion,
            WireError::UnknownType(_) => DropReason::UnknownType,
            WireError::BadProbe { .. } => DropReason::BadProbe,
            WireError::EmptyData => DropReason::EmptyData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_published_counters_and_unique() {
        // the `malformed` keys the lab, docs and dashboards read
        let names = DropReason::ALL.map(DropReason::name);
        assert_eq!(
            names,
            [
                "truncated",
                "unknown_version",
                "unknown_type",
                "bad_probe",
                "empty_data",
                "bad_token",
                "unauthentic",
                "no_session",
                "foreign_source",
                "spoofed_source",
                "bad_inner",
                "unparsable_inner",
                "no_client",
                "no_endpoint",
                "send_error",
                "tun_write_error",
                "bad_offload",
                "egress_denied",
                "other_worker",
            ]
        );
        assert_eq!(
            DropReason::BadToken.help(),
            "Token of no configured peer (version 1, --insecure)"
        );
        assert_eq!(
            DropReason::from(WireError::BadProbe {
                kind: 9,
                channel: 0
            }),
            DropReason::BadProbe
        );
    }
}
