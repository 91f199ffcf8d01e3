//! Command line of the `dchannel` agent (the testbed depends on these flags).

use clap::{Args, Parser, Subcommand, ValueEnum};
use dchannel_core::egress::Cidr;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "dchannel",
    version,
    about = "Per-packet steering of IP traffic between a high-bandwidth channel (HBC) and a \
             low-latency channel (LLC)",
    long_about = "dchannel steers every IP packet of unmodified applications onto a \
high-bandwidth channel (HBC, e.g. 5G eMBB) or a low-latency channel (LLC, e.g. 5G URLLC). \
Run `dchannel client` on the device and `dchannel gateway` at the operator edge. Each agent \
creates a TUN interface, prints READY on stdout once it is up (the client: once its handshake \
with the gateway has given a session; until then it logs why at warn), and carries packets as UDP over \
both channels, every datagram encrypted and authenticated (Noise IK handshake, AEAD per \
datagram; keys from `dchannel genkey` / `dchannel pubkey`; see docs/wire.md and \
docs/deploy.md). Routes into the TUN: --tun-route, or the caller's job. SIGINT/SIGTERM write --stats-json and exit 0. \
Logs go to stderr (RUST_LOG=debug for more)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub role: Role,
}

#[derive(Subcommand, Debug)]
pub enum Role {
    /// Device side: apps route through the TUN; one UDP socket per channel.
    Client(ClientArgs),
    /// Operator side: serves the configured clients; downlink for their
    /// addresses is routed (by the caller) into the TUN.
    Gateway(GatewayArgs),
    /// Prints a new private key (base64, 44 characters) on stdout, or writes
    /// it to --out FILE with mode 0600.
    Genkey(GenkeyArgs),
    /// Reads a private key (from FILE, or stdin when none is given) and
    /// prints its public key (base64).
    Pubkey(PubkeyArgs),
    /// Prints a running agent's status (like `wg show`): per channel up/down,
    /// time since last heard, RTT, bytes and packets each way, drops; sessions,
    /// peers and handshake counters. Read from the agent's --metrics-addr.
    /// At a gateway, also per device (from its control socket, root only):
    /// key, address, endpoint per channel, latest handshake, bytes and
    /// packets per channel each way, drops.
    Show(ShowArgs),
    /// Adds, changes or removes one device of a running gateway, without a
    /// restart (over its control socket, root only): `--device NAME
    /// --public-key KEY --address ADDR` adds (or changes what is given),
    /// `--remove NAME` removes. A removed or re-keyed device's session ends
    /// at once; other devices are untouched. A bad change is refused whole.
    Set(SetArgs),
    /// Makes a running gateway serve exactly the devices of FILE (the
    /// devices file format), without a restart: devices added, removed,
    /// re-keyed and re-addressed as FILE says, the others untouched. Refused
    /// whole, naming the line, if any device is bad. (SIGHUP to the gateway
    /// does the same with its own --devices file.)
    Syncconf(SyncconfArgs),
}

/// Where a gateway's control socket is.
#[derive(Args, Debug)]
pub struct SocketArg {
    /// The gateway's control socket (its --control-socket; default
    /// /run/dchannel/dch0.sock, the socket of a gateway with --tun dch0).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The agent's metrics address (its --metrics-addr; docs/deploy.md uses
    /// 127.0.0.1:9100 for both agents).
    #[arg(long, default_value = "127.0.0.1:9100")]
    pub metrics: SocketAddr,
    /// Print JSON (for scripts) instead of the text view.
    #[arg(long)]
    pub json: bool,
    /// Per-device status from this gateway control socket (without it: the
    /// default socket, if there is one).
    #[command(flatten)]
    pub socket: SocketArg,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["device", "remove"])))]
pub struct SetArgs {
    /// The device to add or change (its name in the devices file).
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// Its public key (base64; required for a new device).
    #[arg(long, value_name = "BASE64", requires = "device")]
    pub public_key: Option<String>,
    /// Its tunnel address (required for a new device; inside the prefixes
    /// the gateway's TUN receives: --tun-addr, --tun-route).
    #[arg(long, value_name = "ADDRESS", requires = "device")]
    pub address: Option<String>,
    /// The device to remove.
    #[arg(long, value_name = "NAME")]
    pub remove: Option<String>,
    #[command(flatten)]
    pub socket: SocketArg,
}

#[derive(Args, Debug)]
pub struct SyncconfArgs {
    /// The devices file to apply (TOML, `[[device]]` tables; docs/deploy.md).
    pub file: PathBuf,
    #[command(flatten)]
    pub socket: SocketArg,
}

#[derive(Args, Debug)]
pub struct GenkeyArgs {
    /// Write the key to this file (created with mode 0600) instead of stdout.
    /// An existing file is refused (it may be a live key) unless --force.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// With --out: replace an existing file.
    #[arg(long, requires = "out")]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct PubkeyArgs {
    /// File holding the private key (default: read it from stdin).
    pub file: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Name of the TUN interface to create.
    #[arg(long)]
    pub tun: String,
    /// Address (CIDR) assigned to the TUN, e.g. 198.19.0.2/32.
    #[arg(long)]
    pub tun_addr: String,
    /// Route this prefix (CIDR, or `default`) into the TUN once it is up
    /// (`ip route replace PREFIX dev TUN`; repeatable). Routes into a TUN vanish
    /// with it, so the agent adds them at every start: e.g. the gateway
    /// `--tun-route 198.19.0.2/32` per device, the client `--tun-route default`.
    #[arg(long = "tun-route", value_name = "PREFIX")]
    pub tun_routes: Vec<String>,
    /// Steering policy: dchannel, dchannel:alpha=A, all-hbc, all-llc, pkt-size:N,
    /// pkt-control, pkt-uplink, pkt-state, asap, prewarm[:alpha=A,gap_ms=G]
    /// (dchannel, and the client wakes the HBC radio beside LLC packets),
    /// burst[:alpha=A,gap_ms=G] (dchannel deciding on the rest of the packet's
    /// burst), realtime[:alpha=A] (WebRTC-aware; dchannel for other traffic),
    /// realtime-dup[:alpha=A] (realtime, input events on both channels).
    #[arg(long, default_value = "dchannel")]
    pub policy: String,
    /// Alpha of the dchannel policy when SPEC does not give one (NSDI'23 Algorithm 1).
    #[arg(long, default_value_t = 0.75)]
    pub alpha: f64,
    /// Configured LLC bandwidth in Mbit/s (drains the virtual LLC queue).
    #[arg(long, default_value_t = 2.0)]
    pub llc_mbit: f64,
    /// Reorder buffer for packets arriving over the LLC.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub reorder: OnOff,
    /// How long the reorder buffer holds an LLC packet at most.
    #[arg(long, default_value_t = 100)]
    pub reorder_timeout_ms: u64,
    /// Channels deliver in order (FIFO): a held LLC packet is released as soon
    /// as a later HBC packet of its flow shows that what it waits for was lost,
    /// not after the timeout. Off: NSDI'23's buffer (timeout only).
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    pub reorder_fifo: OnOff,
    /// Double the reorder timeout whenever a packet it gave up on arrives after
    /// all (the HBC's queue outgrew it); halve it again after 10 s without one,
    /// never below --reorder-timeout-ms. Off: NSDI'23's fixed timeout.
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    pub reorder_adaptive: OnOff,
    /// With --reorder-adaptive: the largest timeout.
    #[arg(long, default_value_t = 2000)]
    pub reorder_max_timeout_ms: u64,
    /// Reorder buffer bound per flow: bytes of held receive buffers (counted
    /// by capacity, ~1.5 KiB each, not by packet length).
    #[arg(long, default_value_t = 1024 * 1024)]
    pub reorder_flow_bytes: usize,
    /// Reorder buffer bound per device (peer): bytes of held buffers and
    /// remembered gaps. Reaching it releases that device's packets early, no
    /// other device's (docs/reliability.md, "Isolation between devices").
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub reorder_device_bytes: usize,
    /// Reorder buffer bound over all devices (bytes, as --reorder-device-bytes).
    /// Reaching it releases early the packets of the device holding the most.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub reorder_total_bytes: usize,
    /// Reorder-buffer flows per device (peer) at most; a device at its limit
    /// forgets its own least recently seen flow.
    #[arg(long, default_value_t = 16384)]
    pub reorder_device_flows: usize,
    /// Reorder-buffer flows over all devices at most; at the limit the device
    /// with the most flows forgets its least recently seen one.
    #[arg(long, default_value_t = 65536)]
    pub reorder_flows: usize,
    /// Interval of the D-SYN probes on both channels (client side initiates).
    #[arg(long, default_value_t = 500)]
    pub probe_interval_ms: u64,
    /// Interval of the probes while a channel's RTT window holds fewer than
    /// --probe-min-samples samples (after a start, or lost probes): a minimum of
    /// one or two samples is the delay those probes met, not the base RTT.
    #[arg(long, default_value_t = 50)]
    pub probe_fast_interval_ms: u64,
    /// Samples the RTT window needs before probing slows to --probe-interval-ms;
    /// 0 never probes fast.
    #[arg(long, default_value_t = 8)]
    pub probe_min_samples: usize,
    /// Client: before printing READY, wait up to this long for the first probe round
    /// to measure both channels (so the first packets are steered with estimates).
    #[arg(long, default_value_t = 3000)]
    pub ready_wait_ms: u64,
    #[command(flatten)]
    pub rtt: RttArgs,
    #[command(flatten)]
    pub share: crate::llc_share_config::ShareArgs,
    #[command(flatten)]
    pub outputs: OutputArgs,
    /// Lab only: no encryption; datagrams carry a plaintext bearer token
    /// (client --token, gateway --client ADDR=TOKEN) that anyone on the path
    /// can read and replay. Without it the agents encrypt (--key, ...).
    #[arg(long)]
    pub insecure: bool,
    /// TUN checksum and TCP segmentation offload: the kernel hands over TCP
    /// super-packets of up to 64 KiB (one read instead of ~45), which the agent
    /// cuts into the packets TCP would have sent and steers one by one
    /// (decisions unchanged). `off`: one packet per read, as before. If the
    /// kernel refuses the offloads, the agent warns and runs without them.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub tun_offload: OnOff,
    /// A classic BPF filter on both channel sockets: the kernel drops every
    /// datagram whose first byte and length fit no message of the wire format
    /// (docs/wire.md) before the agent reads it, so that a flood of garbage
    /// costs no system call. Counted in the stats (`channels.*.kernel_drops`).
    /// `off`: the agent reads and refuses everything itself.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub kernel_prefilter: OnOff,
    /// Busy-poll: one thread runs both directions and, after each packet,
    /// polls the TUN and both sockets for this many µs more without sleeping:
    /// the reply to a request then finds the agent awake (lower added latency
    /// for lone request/response traffic, docs/agent.md "Busy-poll"). Costs up
    /// to this much of a core after each burst. 0: two threads that sleep
    /// whenever idle.
    #[arg(long, default_value_t = 0, value_name = "US")]
    pub busy_poll_us: u64,
    /// MTU of the outer path; the TUN MTU is this minus IP/UDP/dchannel headers
    /// (and the 29 bytes of encryption overhead unless --insecure).
    #[arg(long, default_value_t = 1500)]
    pub outer_mtu: usize,
    /// Flows tracked at most per sender (idle ones are evicted first); the
    /// gateway has one sender per device.
    #[arg(long, default_value_t = 65536)]
    pub flow_capacity: usize,
    /// Sender flows of all devices together at most (the gateway; a client's
    /// one sender is bound by --flow-capacity). At the cap the device with the
    /// most flows loses its least recently seen one.
    #[arg(long, default_value_t = 1 << 20)]
    pub gateway_flows: usize,
    /// A flow unseen for this long is evicted.
    #[arg(long, default_value_t = 120)]
    pub flow_idle_s: u64,
}

/// What the agent reports besides its log: metrics while it runs, stats at
/// exit, and per-packet logs.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Serve Prometheus text metrics on this TCP address (e.g. 127.0.0.1:9100).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Write stats as JSON to this file on SIGINT/SIGTERM (its directory must
    /// exist: checked at start).
    #[arg(long)]
    pub stats_json: Option<PathBuf>,
    /// Write one CSV line per steered packet (time, flow, size, channel,
    /// reward, c_hbc, c_llc, ..., t_mono_ns) for the reward-accuracy analysis
    /// (Fig. 11). Buffered; flushed at exit.
    #[arg(long)]
    pub decision_log: Option<PathBuf>,
    /// Write one CSV line per data datagram received from a peer
    /// (t_mono_ns,peer,flow_id,seq,channel,size; CLOCK_MONOTONIC, shared by all
    /// namespaces), to join with the peer's --decision-log on (flow_id, seq).
    /// Buffered; flushed at exit.
    #[arg(long)]
    pub arrival_log: Option<PathBuf>,
}

/// How the RTT estimates are filtered, overridden and found dead.
#[derive(Args, Debug, Clone)]
pub struct RttArgs {
    /// Sliding window of the minimum-RTT filter.
    #[arg(long, default_value_t = 5000)]
    pub rtt_window_ms: u64,
    /// Multiply the measured HBC RTT by this factor (NSDI'23 Fig. 10: 0.2 .. 5).
    #[arg(long, default_value_t = 1.0)]
    pub hbc_rtt_scale: f64,
    /// Use this HBC RTT instead of measuring it.
    #[arg(long)]
    pub pin_hbc_rtt_ms: Option<f64>,
    /// Lab instrument: steer with the HBC's true current one-way delay, read per
    /// packet from the file an emulator started with `chanemu --oracle FILE`
    /// publishes (this agent's sending direction), instead of the probe estimate:
    /// what a perfect delay estimate would buy (docs/chanemu.md, "The delay oracle").
    #[arg(long, value_name = "FILE")]
    pub hbc_owd_oracle: Option<PathBuf>,
    /// Use this LLC RTT instead of measuring it.
    #[arg(long)]
    pub pin_llc_rtt_ms: Option<f64>,
    /// A channel with nothing heard for this long is treated as down.
    #[arg(long, default_value_t = 2000)]
    pub channel_dead_ms: u64,
    /// The LLC also counts as down as soon as a probe round finds it silent for
    /// twice its RTT plus this slack (traffic leaves a dead LLC within about one
    /// probe interval); 0 turns this off, leaving only --channel-dead-ms.
    #[arg(long, default_value_t = 50)]
    pub llc_probe_slack_ms: u64,
    /// Client: between two slow probe rounds, also send a D-SYN on the LLC alone
    /// this often, so a dead LLC is noticed within about half a probe interval
    /// at any phase. Gateway: expect LLC D-SYNs at least this often (it learns a
    /// longer spacing from the probes). 0 turns it off (rounds only).
    #[arg(long, default_value_t = 250)]
    pub llc_probe_interval_ms: u64,
}

#[derive(Args, Debug)]
pub struct ClientArgs {
    #[command(flatten)]
    pub common: Common,
    /// Interface of the HBC (the HBC socket is bound to it).
    #[arg(long)]
    pub hbc_dev: String,
    /// The gateway's HBC address.
    #[arg(long)]
    pub hbc_gateway: SocketAddr,
    /// Interface of the LLC.
    #[arg(long)]
    pub llc_dev: String,
    /// The gateway's LLC address.
    #[arg(long)]
    pub llc_gateway: SocketAddr,
    /// This device's private key file (from `dchannel genkey`; must not be
    /// readable by group or others).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The gateway's public key (base64, from `dchannel pubkey`).
    #[arg(long, value_name = "BASE64")]
    pub gateway_key: Option<String>,
    /// --insecure only: this client's token (hex, 1..64 digits), as configured
    /// at the gateway.
    #[arg(long)]
    pub token: Option<String>,
    /// Tests only (issue 37's flood check: many devices rekeying every few
    /// seconds): handshake again once the session is this old, instead of
    /// WireGuard's 120 s (Rekey-After-Time). 1..=120.
    #[arg(long, value_name = "SECS", hide = true,
          value_parser = clap::value_parser!(u64).range(1..=120))]
    pub rekey_after_secs: Option<u64>,
}

#[derive(Args, Debug)]
pub struct GatewayArgs {
    #[command(flatten)]
    pub common: Common,
    /// UDP address the HBC socket listens on.
    #[arg(long)]
    pub listen_hbc: SocketAddr,
    /// UDP address the LLC socket listens on.
    #[arg(long)]
    pub listen_llc: SocketAddr,
    /// Bind the HBC socket to this interface (optional on the gateway).
    #[arg(long)]
    pub hbc_dev: Option<String>,
    /// Bind the LLC socket to this interface (optional on the gateway).
    #[arg(long)]
    pub llc_dev: Option<String>,
    /// The gateway's private key file (from `dchannel genkey`; must not be
    /// readable by group or others).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The served devices: TOML, one `[[device]]` per device with `name`,
    /// `public_key` and `address` (its tunnel address); docs/deploy.md.
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
    /// The control socket through which `dchannel set`, `syncconf` and `show`
    /// reach this gateway (mode 0600, root only). Default:
    /// /run/dchannel/<--tun>.sock; if that one is in use by another gateway
    /// this one runs without (and says so).
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// --insecure only: a served client, its tunnel address and token, e.g.
    /// 198.19.0.2=00112233aabbccdd. Repeat for several clients.
    #[arg(long = "client", value_parser = parse_client)]
    pub clients: Vec<(IpAddr, String)>,
    /// Forward device packets to this prefix (CIDR, or one address), although
    /// the gateway refuses it by default: its own addresses, loopback,
    /// link-local (169.254.0.0/16, fe80::/10), the cloud metadata addresses,
    /// multicast and broadcast. Repeatable; the longest prefix among
    /// --egress-allow/--egress-deny decides (docs/deploy.md "Egress").
    #[arg(long = "egress-allow", value_name = "CIDR", value_parser = parse_cidr)]
    pub egress_allow: Vec<Cidr>,
    /// Refuse device packets to this prefix too (e.g. 10.0.0.0/8; counted as
    /// `malformed.egress_denied`). Repeatable.
    #[arg(long = "egress-deny", value_name = "CIDR", value_parser = parse_cidr)]
    pub egress_deny: Vec<Cidr>,
    /// Worker threads (gateway only; a device always runs one): N pairs of
    /// a TUN-queue reader and a socket reader, the devices spread over them
    /// by index (each device's datagrams reach one worker, steered by the
    /// kernel). Default: the number of cores (1 with --busy-poll-us, whose
    /// spinning thread per worker would take every core). With --insecure: 1. At most
    /// 256 (the kernel's limit of TUN queues).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    s.parse()
        .map_err(|e: dchannel_core::egress::EgressError| e.to_string())
}

fn parse_client(s: &str) -> Result<(IpAddr, String), String> {
    let (ip, tok) = s
        .split_once('=')
        .ok_or_else(|| format!("--client {s:?}: expected ADDRESS=HEXTOKEN"))?;
    let ip: IpAddr = ip
        .parse()
        .map_err(|_| format!("--client {s:?}: {ip:?} is not an IP address"))?;
    dchannel_core::token::parse_token(tok).map_err(|e| format!("--client {s:?}: {e}"))?;
    Ok((ip, tok.to_string()))
}
