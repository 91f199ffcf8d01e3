//! The gateway's control socket, like WireGuard's: a Unix stream socket
//! (default `/run/dchannel/<tun>.sock`, mode 0600, its directory created
//! 0700) through which `dchannel set`, `dchannel syncconf` and `dchannel
//! show` change and read the devices of the running gateway
//! (live_devices.rs). Only root and the gateway's own user may talk to it
//! (file mode, and the peer's credentials checked on every connection).
//!
//! Protocol: one request per connection, one JSON object on one line; one
//! JSON answer on one line, then the gateway closes. Requests: `{"op":
//! "set", "name", "public_key"?, "address"?}`, `{"op": "remove", "name"}`,
//! `{"op": "sync", "path", "text"}` (a devices file's text; `path` names it
//! in messages), `{"op": "show"}`. Answers: `{"ok": true, ...}` (changes:
//! `added`, `removed`, `rekeyed`, `readdressed`, lists of names; show:
//! `devices`) or `{"ok": false, "error": "..."}`; a refused change changed
//! nothing.

use crate::cli::{SetArgs, SocketArg, SyncconfArgs};
use crate::device_plan::Plan;
use crate::live_devices::LiveDevices;
use anyhow::{anyhow, bail, Context, Result};
use dchannel_core::{Channel, Nanos};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where gateways put their sockets unless told otherwise.
pub const SOCKET_DIR: &str = "/run/dchannel";

/// The default socket of the gateway whose TUN is `tun`.
pub fn default_path(tun: &str) -> PathBuf {
    Path::new(SOCKET_DIR).join(format!("{tun}.sock"))
}

/// A slow or silent client is cut off after this long (the gateway serves
/// one connection at a time).
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest request read (a devices file of 100,000 devices is ~11 MB).
const MAX_REQUEST: u64 = 64 << 20;

/// The socket file while the gateway runs; removed when dropped if it is
/// still ours (another gateway may have replaced a stale one).
pub struct ControlSocket {
    path: PathBuf,
    ino: u64,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if std::fs::metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates the socket at `path` and serves it on a thread. A socket file
/// left by a gateway that is gone is replaced; one that answers is another
/// gateway's and is refused.
pub fn serve(path: &Path, live: Arc<Mutex<LiveDevices>>, epoch: Instant) -> Result<ControlSocket> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!("{} is in use by another running gateway", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let ino = std::fs::metadata(path)?.ino();
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(c) = conn else { continue };
                if let Err(e) = handle(c, &live, epoch) {
                    tracing::warn!("control socket: {e:#}");
                }
            }
        })?;
    Ok(ControlSocket {
        path: path.to_path_buf(),
        ino,
    })
}

/// The gateway's control socket as `setup` asks: by name, failing to create
/// it is an error; the default is skipped with a warning (e.g. another
/// gateway with the same TUN name in another network namespace has it).
pub fn start(
    setup: &crate::config::LiveSetup,
    live: &Arc<Mutex<LiveDevices>>,
    epoch: Instant,
) -> Result<Option<ControlSocket>> {
    match serve(&setup.socket, Arc::clone(live), epoch) {
        Ok(s) => {
            tracing::info!(
                "control socket {} (dchannel set / syncconf / show)",
                setup.socket.display()
            );
            Ok(Some(s))
        }
        Err(e) if !setup.socket_explicit => {
            tracing::warn!(
                "no control socket: {e:#}; devices change only by SIGHUP (or pass \
                 --control-socket PATH)"
            );
            Ok(None)
        }
        Err(e) => Err(e.context("--control-socket")),
    }
}

/// The connecting process's user id (SO_PEERCRED).
fn peer_uid(c: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writing, of the size passed.
    let rc = unsafe {
        libc::getsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

fn handle(c: UnixStream, live: &Mutex<LiveDevices>, epoch: Instant) -> Result<()> {
    c.set_read_timeout(Some(IO_TIMEOUT))?;
    c.set_write_timeout(Some(IO_TIMEOUT))?;
    let uid = peer_uid(&c)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let answer = if uid != 0 && uid != me {
        json!({"ok": false, "error": format!("uid {uid} may not use the control socket (root only)")})
    } else {
        let mut line = String::new();
        BufReader::new((&c).take(MAX_REQUEST))
            .read_line(&mut line)
            .context("reading the request")?;
        let mut live = live.lock().unwrap_or_else(|e| e.into_inner());
        match answer(&line, &mut live, epoch) {
            Ok(v) => v,
            Err(e) => json!({"ok": false, "error": e}),
        }
    };
    let mut c = c;
    writeln!(c, "{answer}")?;
    Ok(())
}

fn field<'a>(req: &'a Value, name: &str) -> Result<&'a str, String> {
    req[name]
        .as_str()
        .ok_or_else(|| format!("request without `{name}`"))
}

/// One request's answer.
fn answer(line: &str, live: &mut LiveDevices, epoch: Instant) -> Result<Value, String> {
    let req: Value = serde_json::from_str(line).map_err(|e| format!("bad request: {e}"))?;
    let op = field(&req, "op")?;
    let plan = match op {
        "show" => return Ok(json!({"ok": true, "devices": status(live, epoch)})),
        "set" => live.set(
            field(&req, "name")?,
            req["public_key"].as_str(),
            req["address"].as_str(),
        ),
        "remove" => live.remove(field(&req, "name")?),
        "sync" => live.sync(field(&req, "text")?, field(&req, "path")?),
        other => Err(format!("unknown op {other:?}")),
    };
    match plan {
        Ok(p) => {
            if !p.is_empty() {
                tracing::info!("devices changed ({op}, control socket): {p}");
            }
            Ok(changes(&p))
        }
        Err(e) => {
            tracing::warn!("devices change refused ({op}, control socket), nothing changed: {e}");
            Err(e)
        }
    }
}

/// A plan as the answer lists it.
pub fn changes(p: &Plan) -> Value {
    let names = |v: &[dchannel_crypto::devices::Device]| -> Vec<String> {
        v.iter().map(|d| d.name.clone()).collect()
    };
    json!({
        "ok": true,
        "summary": p.to_string(),
        "added": names(&p.added),
        "removed": names(&p.removed),
        "rekeyed": names(&p.rekeyed),
        "readdressed": names(&p.readdressed),
    })
}

/// Every device as `dchannel show` prints it: key, address, per channel its
/// endpoint, liveness, RTT and traffic, the latest handshake, drops.
fn status(live: &LiveDevices, epoch: Instant) -> Value {
    let now = epoch.elapsed().as_nanos() as Nanos;
    let devices: Vec<Value> = live
        .devices()
        .iter()
        .map(|(slot, d)| {
            let link = live.shared().peer(*slot);
            let traffic = link.as_ref().map(|l| l.traffic()).unwrap_or_default();
            let mut channels = serde_json::Map::new();
            for ch in Channel::ALL {
                let i = ch.index();
                let l = link.as_ref();
                channels.insert(
                    ch.name().into(),
                    json!({
                        "endpoint": l.and_then(|l| l.endpoint(ch)).map(|e| e.to_string()),
                        "up": l.is_some_and(|l| l.reported_up(ch)),
                        "rtt_ms": l.and_then(|l| l.rtt(ch)).map(|v| v as f64 / 1e6),
                        "tx_bytes": traffic.tx_bytes[i],
                        "tx_packets": traffic.tx_packets[i],
                        "rx_bytes": traffic.rx_bytes[i],
                        "rx_packets": traffic.rx_packets[i],
                    }),
                );
            }
            let handshake = live
                .aead()
                .session_created(*slot)
                .map(|t| now.saturating_sub(t) as f64 / 1e9);
            json!({
                "name": d.name,
                "public_key": d.public_key.to_base64(),
                "address": d.address.map(|a| a.to_string()),
                "latest_handshake_s": handshake,
                "drops": traffic.drops,
                "channels": channels,
            })
        })
        .collect();
    Value::Array(devices)
}

/// Sends `request` to the gateway at `socket` and returns its answer (an
/// `Err` with the gateway's message if it refused).
pub fn request(socket: &Path, request: &Value) -> Result<Value> {
    let mut c = UnixStream::connect(socket).with_context(|| {
        format!(
            "connecting to the gateway's control socket {} (is the gateway running, with \
             --control-socket {0}? root only)",
            socket.display()
        )
    })?;
    c.set_read_timeout(Some(Duration::from_secs(30)))?;
    writeln!(c, "{request}")?;
    let mut text = String::new();
    c.read_to_string(&mut text)
        .with_context(|| format!("reading the answer from {}", socket.display()))?;
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|e| anyhow!("{}: not an answer ({e}): {text:?}", socket.display()))?;
    if v["ok"] != json!(true) {
        bail!("{}", v["error"].as_str().unwrap_or("refused"));
    }
    Ok(v)
}

/// `dchannel set` / `set --remove` / `syncconf`: sends the change, prints
/// what changed (`added: ...; removed: ...; re-keyed: ...; re-addressed: ...`).
pub fn change(socket: &Path, req: &Value) -> Result<()> {
    let v = request(socket, req)?;
    println!("{}", v["summary"].as_str().unwrap_or_default());
    Ok(())
}

/// The socket `--socket` names, else the default gateway's (TUN dch0).
fn socket_of(a: &SocketArg) -> PathBuf {
    a.socket.clone().unwrap_or_else(|| default_path("dch0"))
}

/// `dchannel set --device NAME [--public-key KEY] [--address ADDR]` or
/// `dchannel set --remove NAME`.
pub fn set(a: &SetArgs) -> Result<()> {
    let req = match (&a.device, &a.remove) {
        (Some(name), None) => json!({
            "op": "set",
            "name": name,
            "public_key": a.public_key,
            "address": a.address,
        }),
        (None, Some(name)) => json!({"op": "remove", "name": name}),
        _ => bail!("--device NAME or --remove NAME, one of them"),
    };
    change(&socket_of(&a.socket), &req)
}

/// `dchannel syncconf FILE`: the file's text goes to the gateway, which
/// checks and applies it whole.
pub fn syncconf(a: &SyncconfArgs) -> Result<()> {
    let path = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file).with_context(|| path.clone())?;
    change(
        &socket_of(&a.socket),
        &json!({"op": "sync", "path": path, "text": text}),
    )
}
