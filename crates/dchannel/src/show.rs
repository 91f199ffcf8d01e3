//! `dchannel show`: a one-screen status of a running agent (like `wg show`),
//! read from its Prometheus metrics (metrics.rs, stats.rs): per channel
//! up/down, time since last reply, RTT, bytes and packets each way, drops;
//! sessions, peers and handshake counters. `--json` for scripts.
//!
//! At a gateway, then one block per device, read from its control socket
//! (control.rs): key, tunnel address, latest handshake, drops, and per
//! channel its endpoint, RTT and bytes and packets each way. Per-device
//! numbers come over the socket, not the metrics: a gateway serves thousands
//! of devices, and a Prometheus series per device, channel and counter would
//! multiply its series by that many (and put device endpoints on a TCP port).

use crate::cli::ShowArgs;
use crate::control;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// How long `show` waits for the agent (connect, and then each read/write).
const TIMEOUT: Duration = Duration::from_secs(2);

/// The channels in display order, as the metrics label them.
const CHANNELS: [&str; 2] = ["hbc", "llc"];

/// One sample of the Prometheus text: `dchannel_<name>{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name without its `dchannel_` prefix.
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the Prometheus text format as metrics.rs writes it: comments and
/// other metrics than `dchannel_*` are skipped, as are malformed lines.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let rest = line.trim().strip_prefix("dchannel_")?;
    let (series, value) = rest.rsplit_once(' ')?;
    let value = match value {
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    let (name, labels) = match series.split_once('{') {
        Some((name, l)) => (name, parse_labels(l.strip_suffix('}')?)?),
        None => (series, BTreeMap::new()),
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// `a="x",b="y"`, values with the text format's escapes (`\\`, `\"`, `\n`:
/// metrics.rs `escape_label`), for a device name may hold commas and quotes.
fn parse_labels(s: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while !rest.is_empty() {
        let (k, after) = rest.split_once("=\"")?;
        let mut v = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => v.push(match chars.next()?.1 {
                    'n' => '\n',
                    c => c,
                }),
                (_, c) => v.push(c),
            }
        };
        out.insert(k.to_string(), v);
        rest = &after[end + 1..];
        if !rest.is_empty() {
            rest = rest.strip_prefix(',')?;
        }
    }
    Some(out)
}

/// The value of metric `name` whose labels include every pair of `want`.
fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && want
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

/// The per-channel counters shown, in order: (JSON key, metric name).
const COUNTERS: [(&str, &str); 6] = [
    ("tx_bytes", "tx_bytes_total"),
    ("tx_packets", "tx_packets_total"),
    ("rx_bytes", "rx_bytes_total"),
    ("rx_packets", "rx_packets_total"),
    ("kernel_drops", "kernel_drops_total"),
    ("downs", "channel_downs_total"),
];

/// The status as `--json` prints it (and the text view is written from).
pub fn summary(samples: &[Sample]) -> Value {
    let role = samples
        .iter()
        .find_map(|s| s.labels.get("role").cloned())
        .unwrap_or_default();
    let mut peers: Vec<String> = Vec::new();
    for s in samples.iter().filter(|s| s.name == "channel_up") {
        if let Some(p) = s.labels.get("peer") {
            if !peers.contains(p) {
                peers.push(p.clone());
            }
        }
    }
    let num = |v: Option<f64>| {
        v.filter(|v| v.is_finite())
            .map_or(Value::Null, |v| json!(v))
    };
    let count = |v: Option<f64>| v.map_or(Value::Null, |v| json!(v as u64));
    let mut channels = Map::new();
    for ch in CHANNELS {
        let mut c = Map::new();
        for (key, metric) in COUNTERS {
            c.insert(
                key.into(),
                count(value(samples, metric, &[("channel", ch)])),
            );
        }
        let per_peer: Vec<Value> = peers
            .iter()
            .map(|p| {
                let at = [("peer", p.as_str()), ("channel", ch)];
                let up = value(samples, "channel_up", &at).map(|v| v > 0.0);
                json!({
                    "peer": p,
                    "up": up,
                    "silence_s": num(value(samples, "channel_silence_seconds", &at)),
                    // NaN (a channel reported down) and no estimate yet: null
                    "rtt_ms": num(value(samples, "rtt_ms", &at)),
                })
            })
            .collect();
        c.insert("peers".into(), Value::Array(per_peer));
        channels.insert(ch.into(), Value::Object(c));
    }
    let handshakes: Map<String, Value> = samples
        .iter()
        .filter(|s| s.name == "handshakes_total")
        .filter_map(|s| Some((s.labels.get("event")?.clone(), json!(s.value as u64))))
        .collect();
    json!({
        "role": role,
        "sessions": count(value(samples, "sessions", &[])),
        "peers": count(value(samples, "peers", &[])),
        "session_age_s": num(session_age(samples)),
        "handshakes": handshakes,
        "channels": channels,
    })
}

/// The age of the one session (the client's); none with several peers.
fn session_age(samples: &[Sample]) -> Option<f64> {
    let mut ages = samples.iter().filter(|s| s.name == "session_age_seconds");
    match (ages.next(), ages.next()) {
        (Some(a), None) => Some(a.value),
        _ => None,
    }
}

/// The one-screen text view of a [`summary`].
pub fn render(s: &Value) -> String {
    let mut out = String::new();
    let opt = |v: &Value| match v {
        Value::Null => "-".to_string(),
        v => v.to_string(),
    };
    let _ = write!(out, "role: {}", s["role"].as_str().unwrap_or("?"));
    let _ = write!(
        out,
        "  sessions: {}/{}",
        opt(&s["sessions"]),
        opt(&s["peers"])
    );
    if let Some(age) = s["session_age_s"].as_f64() {
        let _ = write!(out, "  session age: {age:.1} s");
    }
    out.push('\n');
    if let Some(h) = s["handshakes"].as_object().filter(|h| !h.is_empty()) {
        let list: Vec<String> = h.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "handshakes: {}", list.join(", "));
    }
    for ch in CHANNELS {
        let c = &s["channels"][ch];
        let _ = writeln!(out, "\nchannel {}", ch.to_uppercase());
        let _ = writeln!(
            out,
            "  tx: {} bytes, {} packets   rx: {} bytes, {} packets",
            opt(&c["tx_bytes"]),
            opt(&c["tx_packets"]),
            opt(&c["rx_bytes"]),
            opt(&c["rx_packets"]),
        );
        let _ = writeln!(
            out,
            "  kernel drops: {}   times down: {}",
            opt(&c["kernel_drops"]),
            opt(&c["downs"])
        );
        for p in c["peers"].as_array().into_iter().flatten() {
            let state = match p["up"].as_bool() {
                Some(true) => "up",
                Some(false) => "DOWN",
                None => "?",
            };
            let silence = p["silence_s"]
                .as_f64()
                .map_or("never".into(), |v| format!("{v:.1} s ago"));
            let rtt = p["rtt_ms"]
                .as_f64()
                .filter(|_| state == "up")
                .map_or("down".into(), |v| format!("{v:.2} ms"));
            let _ = writeln!(
                out,
                "  peer {}: {state}, last heard {silence}, rtt {rtt}",
                p["peer"].as_str().unwrap_or("?")
            );
        }
    }
    out
}

/// GETs the agent's metrics text at `addr` (a plain HTTP/1.1 request; the
/// endpoint answers any path and closes the connection).
pub fn fetch(addr: SocketAddr) -> Result<String> {
    let mut c = TcpStream::connect_timeout(&addr, TIMEOUT)
        .with_context(|| format!("connecting to the metrics address {addr} (is the agent running with --metrics-addr {addr}?)"))?;
    c.set_read_timeout(Some(TIMEOUT))?;
    c.set_write_timeout(Some(TIMEOUT))?;
    // One write: the endpoint reads the request once and closes, so a request
    // split over several segments would leave unread bytes and reset the
    // connection before its answer is read.
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    c.write_all(req.as_bytes())?;
    let mut resp = String::new();
    c.read_to_string(&mut resp)
        .with_context(|| format!("reading the metrics from {addr}"))?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("{addr}: not an HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("{addr}: {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}

/// The devices of the gateway at `socket` (`--socket`), or at the default
/// socket if there is one; `None` without a gateway (e.g. on the device).
fn devices(socket: Option<&Path>) -> Result<Option<Value>> {
    let (path, asked) = match socket {
        Some(p) => (p.to_path_buf(), true),
        None => (control::default_path("dch0"), false),
    };
    if !asked && !path.exists() {
        return Ok(None);
    }
    match control::request(&path, &json!({"op": "show"})) {
        Ok(v) => Ok(Some(v["devices"].clone())),
        Err(e) if asked => Err(e),
        Err(_) => Ok(None),
    }
}

/// `dchannel show`: prints the status of the agent whose metrics are at
/// `a.metrics`, and the devices of the gateway's control socket.
pub fn show(a: &ShowArgs) -> Result<()> {
    let devices = devices(a.socket.socket.as_deref())?;
    let mut s = match (fetch(a.metrics), &devices) {
        (Ok(text), _) => summary(&parse(&text)),
        (Err(e), None) => return Err(e),
        // a gateway without --metrics-addr: its devices only
        (Err(_), Some(_)) => json!({}),
    };
    if let Some(d) = devices {
        s["devices"] = d;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        if s.get("role").is_some() {
            print!("{}", render(&s));
        }
        for d in s["devices"].as_array().into_iter().flatten() {
            print!("\n{}", render_device(d));
        }
    }
    Ok(())
}

/// One device of a gateway's control socket, like a peer of `wg show`.
pub fn render_device(d: &Value) -> String {
    let mut out = String::new();
    let opt = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let _ = writeln!(
        out,
        "device {}: address {}, key {}",
        opt(&d["name"]),
        opt(&d["address"]),
        opt(&d["public_key"])
    );
    let handshake = d["latest_handshake_s"]
        .as_f64()
        .map_or("none".into(), |v| format!("{v:.1} s ago"));
    let _ = writeln!(
        out,
        "  latest handshake: {handshake}   drops: {}",
        opt(&d["drops"])
    );
    for ch in CHANNELS {
        let c = &d["channels"][ch];
        let rtt = c["rtt_ms"]
            .as_f64()
            .filter(|_| c["up"] == true)
            .map_or("down".into(), |v| format!("{v:.2} ms"));
        let _ = writeln!(
            out,
            "  {}: endpoint {}, rtt {rtt}   rx: {} bytes, {} packets   tx: {} bytes, {} packets",
            ch.to_uppercase(),
            c["endpoint"].as_str().unwrap_or("(none)"),
            opt(&c["rx_bytes"]),
            opt(&c["rx_packets"]),
            opt(&c["tx_bytes"]),
            opt(&c["tx_packets"]),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's metrics as metrics.rs serves them (shortened: HELP/TYPE of
    /// a few metrics, the rest as written), HBC up, LLC reported down.
    const CLIENT: &str = r#"# HELP dchannel_tx_packets_total Data datagrams sent
# TYPE dchannel_tx_packets_total counter
dchannel_tx_packets_total{role="client",channel="hbc"} 120
dchannel_tx_packets_total{role="client",channel="llc"} 7
dchannel_tx_bytes_total{role="client",channel="hbc"} 150000
dchannel_tx_bytes_total{role="client",channel="llc"} 980
dchannel_rx_packets_total{role="client",channel="hbc"} 300
dchannel_rx_packets_total{role="client",channel="llc"} 2
dchannel_rx_bytes_total{role="client",channel="hbc"} 420000
dchannel_rx_bytes_total{role="client",channel="llc"} 160
dchannel_kernel_drops_total{role="client",channel="hbc"} 0
dchannel_kernel_drops_total{role="client",channel="llc"} 3
dchannel_channel_downs_total{role="client",channel="hbc"} 0
dchannel_channel_downs_total{role="client",channel="llc"} 1
dchannel_handshakes_total{role="client",event="initiations_sent"} 2
dchannel_handshakes_total{role="client",event="completed_as_initiator"} 1
# TYPE dchannel_sessions gauge
dchannel_sessions{role="client"} 1
dchannel_peers{role="client"} 1
dchannel_session_age_seconds{role="client",peer="gateway"} 42.5
dchannel_rtt_ms{role="client",peer="gateway",channel="hbc"} 20.25
dchannel_rtt_ms{role="client",peer="gateway",channel="llc"} NaN
dchannel_channel_up{role="client",peer="gateway",channel="hbc"} 1
dchannel_channel_up{role="client",peer="gateway",channel="llc"} 0
dchannel_channel_silence_seconds{role="client",peer="gateway",channel="hbc"} 0.1
dchannel_channel_silence_seconds{role="client",peer="gateway",channel="llc"} 6.5
dchannel_flows{role="client"} 4
"#;

    #[test]
    fn parses_names_labels_and_values() {
        let s = parse(CLIENT);
        // 24 sample lines (12 counters, 2 handshakes, 3 gauges, 6 per peer, flows); comments skipped
        assert_eq!(s.len(), 24);
        assert_eq!(s[0].name, "tx_packets_total");
        assert_eq!(s[0].labels["role"], "client");
        assert_eq!(s[0].labels["channel"], "hbc");
        assert_eq!(s[0].value, 120.0);
        assert!(value(&s, "rtt_ms", &[("channel", "llc")]).unwrap().is_nan());
        assert_eq!(value(&s, "sessions", &[]), Some(1.0));
        assert_eq!(parse("other_metric 1\ndchannel_x{broken 1\n"), vec![]);
    }

    #[test]
    fn label_values_are_unescaped() {
        // A device named `lab "A", \ 2` as metrics.rs writes it.
        let s =
            parse(r#"dchannel_channel_up{role="gateway",peer="lab \"A\", \\ 2",channel="hbc"} 1"#);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].labels["peer"], r#"lab "A", \ 2"#);
        assert_eq!(s[0].labels["channel"], "hbc");
        assert_eq!(
            parse_labels(r#"a="x\ny""#).unwrap()["a"],
            "x\ny",
            "\\n is a newline"
        );
        for bad in [r#"a="x"#, r#"a="x"b="y""#, r#"a=x"#] {
            assert_eq!(parse_labels(bad), None, "{bad}");
        }
    }

    #[test]
    fn summary_holds_every_shown_value() {
        let j = summary(&parse(CLIENT));
        assert_eq!(j["role"], "client");
        assert_eq!(j["sessions"], 1);
        assert_eq!(j["peers"], 1);
        assert_eq!(j["session_age_s"], 42.5);
        assert_eq!(j["handshakes"]["initiations_sent"], 2);
        assert_eq!(j["handshakes"]["completed_as_initiator"], 1);
        let hbc = &j["channels"]["hbc"];
        assert_eq!(hbc["tx_bytes"], 150000);
        assert_eq!(hbc["tx_packets"], 120);
        assert_eq!(hbc["rx_bytes"], 420000);
        assert_eq!(hbc["rx_packets"], 300);
        assert_eq!(hbc["peers"][0]["peer"], "gateway");
        assert_eq!(hbc["peers"][0]["up"], true);
        assert_eq!(hbc["peers"][0]["rtt_ms"], 20.25);
        let llc = &j["channels"]["llc"];
        assert_eq!(llc["kernel_drops"], 3);
        assert_eq!(llc["downs"], 1);
        assert_eq!(llc["peers"][0]["up"], false);
        assert_eq!(llc["peers"][0]["silence_s"], 6.5);
        // NaN: the channel is down, it has no RTT
        assert_eq!(llc["peers"][0]["rtt_ms"], Value::Null);
    }

    #[test]
    fn text_view_is_one_screen() {
        let text = render(&summary(&parse(CLIENT)));
        let expected = "\
role: client  sessions: 1/1  session age: 42.5 s
handshakes: completed_as_initiator 1, initiations_sent 2

channel HBC
  tx: 150000 bytes, 120 packets   rx: 420000 bytes, 300 packets
  kernel drops: 0   times down: 0
  peer gateway: up, last heard 0.1 s ago, rtt 20.25 ms

channel LLC
  tx: 980 bytes, 7 packets   rx: 160 bytes, 2 packets
  kernel drops: 3   times down: 1
  peer gateway: DOWN, last heard 6.5 s ago, rtt down
";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_device_is_one_block_like_a_wg_peer() {
        let d = json!({
            "name": "phone-1",
            "public_key": "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=",
            "address": "198.19.0.2",
            "latest_handshake_s": 12.34,
            "drops": 3,
            "channels": {
                "hbc": {"endpoint": "203.0.113.7:40000", "up": true, "rtt_ms": 21.5,
                        "rx_bytes": 1200, "rx_packets": 10, "tx_bytes": 150000, "tx_packets": 100},
                "llc": {"endpoint": null, "up": false, "rtt_ms": null,
                        "rx_bytes": 0, "rx_packets": 0, "tx_bytes": 0, "tx_packets": 0},
            },
        });
        let expected = "\
device phone-1: address 198.19.0.2, key hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=
  latest handshake: 12.3 s ago   drops: 3
  HBC: endpoint 203.0.113.7:40000, rtt 21.50 ms   rx: 1200 bytes, 10 packets   tx: 150000 bytes, 100 packets
  LLC: endpoint (none), rtt down   rx: 0 bytes, 0 packets   tx: 0 bytes, 0 packets
";
        assert_eq!(render_device(&d), expected);
    }

    #[test]
    fn insecure_agent_without_crypto_metrics_shows_dashes() {
        let text = "dchannel_tx_bytes_total{role=\"gateway\",channel=\"hbc\"} 5\n";
        let j = summary(&parse(text));
        assert_eq!(j["sessions"], Value::Null);
        assert_eq!(j["channels"]["hbc"]["tx_bytes"], 5);
        assert_eq!(j["channels"]["llc"]["tx_bytes"], Value::Null);
        assert!(render(&j).starts_with("role: gateway  sessions: -/-\n\nchannel HBC\n"));
    }
}
