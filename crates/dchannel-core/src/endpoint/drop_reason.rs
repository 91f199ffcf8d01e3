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
        Truncated = "truncated": "Shorter than the header or the probe body, filled the receive buffer, or no room to seal",
        UnknownVersion = "unknown_version": "Header version is not the one this agent speaks",
        UnknownType = "unknown_type": "Header type is neither data nor probe",
        BadProbe = "bad_probe": "Probe with an unknown kind or channel byte",
        EmptyData = "empty_data": "Data datagram without an inner packet",
        BadToken = "bad_token": "Token of no configured peer (version 1, --insecure)",
        Unauthentic = "unauthentic": "Refused by the encryption layer (per reason in crypto.drops)",
        NoSession = "no_session": "No session with the peer yet or any more (handshake pending)",
        ForeignSource = "foreign_source": "Authentic, but not from the peer's endpoint on that channel",
        SpoofedSource = "spoofed_source": "Inner source is not the sending client's tunnel address",
        BadInner = "bad_inner": "Inner packet is not IPv4/IPv6 where its source must be checked",
        UnparsableInner = "unparsable_inner": "Inner packet the parser could not read (sent on the HBC, no flow)",
        NoClient = "no_client": "Inner destination is no configured client (gateway)",
        NoEndpoint = "no_endpoint": "No endpoint known for the peer on either channel yet (gateway)",
        SendError = "send_error": "The socket refused a datagram",
        TunWriteError = "tun_write_error": "The TUN refused a packet",
        BadOffload = "bad_offload": "TUN read whose virtio_net_hdr or super-packet could not be cut into packets",
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
        let names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), DropReason::COUNT);
        // the `malformed` keys the lab and docs read
        for key in [
            "truncated",
            "bad_token",
            "unauthentic",
            "no_session",
            "bad_offload",
        ] {
            assert!(names.contains(&key), "{key}");
        }
        assert_eq!(
            DropReason::from(WireError::BadProbe {
                kind: 9,
                channel: 0
            }),
            DropReason::BadProbe
        );
    }
}
