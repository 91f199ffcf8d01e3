//! Test support: a throw-away CA, a webreplay child process on private loopback addresses,
//! and a minimal hyper + rustls client that reports what was negotiated.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use sha2::{Digest, Sha256};

pub const HTTP_PORT: u16 = 18080;
pub const HTTPS_PORT: u16 = 18443;

/// A fresh 127.x.y.0/24 block per server so parallel tests (and other people's test runs)
/// never collide on ports: x from the pid, y from the pid and a per-process counter (≤ 8
/// servers per test process).
pub fn loopback_block() -> [u8; 2] {
    static NEXT: AtomicU8 = AtomicU8::new(0);
    let pid = std::process::id();
    let n = NEXT.fetch_add(1, Ordering::Relaxed) % 8;
    [(pid % 256) as u8, (((pid / 256) % 32) * 8) as u8 + n]
}

pub fn addr_in(block: [u8; 2], host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, block[0], block[1], host))
}

/// Test CA written as PEM files (certificate + PKCS#8 key), like the testbed's.
pub struct TestCa {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    pub der: CertificateDer<'static>,
}

pub fn make_ca(dir: &Path) -> TestCa {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "webreplay test CA");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    let cert_path = dir.join("ca.pem");
    let key_path = dir.join("ca.key");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    TestCa {
        cert_path,
        key_path,
        der: cert.der().clone(),
    }
}

/// A running `webreplay`; stopped with SIGTERM on drop.
pub struct Server {
    child: Option<Child>,
    pub stderr_path: PathBuf,
}

impl Server {
    /// Starts the binary with `args` and waits (≤ 30 s) for its `READY` line.
    pub fn start(args: &[String], stderr_path: PathBuf) -> Server {
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_webreplay"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn webreplay");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = Server {
            child: Some(child),
            stderr_path,
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line == "READY\n" => server,
            other => {
                let status = server.stop();
                panic!(
                    "webreplay did not print READY (got {other:?}, exit {status:?}); stderr:\n{}",
                    std::fs::read_to_string(&server.stderr_path).unwrap_or_default()
                );
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGTERM, then wait up to 10 s (SIGKILL after that).
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return Some(st);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs the binary to completion (for startup-error tests).
pub fn run_to_exit(args: &[String]) -> (ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_webreplay"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("spawn webreplay");
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn args(pairs: &[(&str, &str)]) -> Vec<String> {
    let mut v = Vec::new();
    for (k, val) in pairs {
        v.push(k.to_string());
        if !val.is_empty() {
            v.push(val.to_string());
        }
    }
    v
}

/// What one request saw.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body_len: u64,
    pub sha256: String,
    /// First bytes of the body (for text checks).
    pub head: Vec<u8>,
    pub alpn: Option<String>,
    pub version: http::Version,
    pub tls: Option<rustls::ProtocolVersion>,
    /// Request sent → response head received.
    pub ttfb: Duration,
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// sha256 of offsets `start..end` of the `/bytes/N` pattern (byte k = k mod 251).
pub fn pattern_range_sha256(start: u64, end: u64) -> String {
    let bytes: Vec<u8> = (start..end).map(|k| (k % 251) as u8).collect();
    sha256_hex(&bytes)
}

/// sha256 of the `/bytes/N` pattern, computed independently of the server code.
pub fn pattern_sha256(n: u64) -> String {
    let mut h = Sha256::new();
    let period: Vec<u8> = (0..251u32).map(|i| i as u8).collect();
    let mut left = n;
    while left > 0 {
        let k = left.min(251);
        h.update(&period[..k as usize]);
        left -= k;
    }
    hex(&h.finalize())
}

pub fn client_config(ca: &CertificateDer<'static>, alpn: &[&str]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Arc::new(cfg)
}

/// One request over a fresh connection: HTTPS when `tls` is given (server name `host`,
/// trusting the CA, offering `alpn`), plain HTTP/1.1 otherwise.
pub async fn fetch(
    addr: SocketAddr,
    host: &str,
    path: &str,
    method: &str,
    tls: Option<(&CertificateDer<'static>, &[&str])>,
) -> anyhow::Result<Fetched> {
    fetch_with(addr, host, path, method, &[], tls).await
}

/// [`fetch`] with extra request headers (e.g. `Range`).
pub async fn fetch_with(
    addr: SocketAddr,
    host: &str,
    path: &str,
    method: &str,
    extra: &[(&str, &str)],
    tls: Option<(&CertificateDer<'static>, &[&str])>,
) -> anyhow::Result<Fetched> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    match tls {
        None => {
            request(
                TokioIo::new(tcp),
                false,
                host,
                path,
                method,
                extra,
                None,
                None,
            )
            .await
        }
        Some((ca, alpn)) => {
            let connector = tokio_rustls::TlsConnector::from(client_config(ca, alpn));
            let name = ServerName::try_from(host.to_string())?;
            let stream = connector.connect(name, tcp).await?;
            let (_, conn) = stream.get_ref();
            let negotiated = conn
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned());
            let version = conn.protocol_version();
            let h2 = negotiated.as_deref() == Some("h2");
            request(
                TokioIo::new(stream),
                h2,
                host,
                path,
                method,
                extra,
                negotiated,
                version,
            )
            .await
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn request<I>(
    io: I,
    h2: bool,
    host: &str,
    path: &str,
    method: &str,
    extra: &[(&str, &str)],
    alpn: Option<String>,
    tls: Option<rustls::ProtocolVersion>,
) -> anyhow::Result<Fetched>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut req = http::Request::builder().method(method);
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    let req = if h2 {
        req.uri(format!("{scheme}://{host}{path}"))
    } else {
        req.uri(path).header(http::header::HOST, host)
    }
    .body(Empty::<Bytes>::new())?;
    let t0 = Instant::now();
    let resp = if h2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
        tokio::spawn(conn);
        sender.send_request(req).await?
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(conn);
        sender.send_request(req).await?
    };
    let ttfb = t0.elapsed();
    let status = resp.status().as_u16();
    let version = resp.version();
    let headers = resp.headers().clone();
    let mut body = resp.into_body();
    let mut hasher = Sha256::new();
    let mut body_len = 0u64;
    let mut head = Vec::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            body_len += data.len() as u64;
            if head.len() < 4096 {
                head.extend_from_slice(&data[..data.len().min(4096 - head.len())]);
            }
            hasher.update(&data);
        }
    }
    Ok(Fetched {
        status,
        headers,
        body_len,
        sha256: hex(&hasher.finalize()),
        head,
        alpn,
        version,
        tls,
        ttfb,
    })
}

/// One recorded response of a test corpus.
pub struct CorpusObj {
    pub url: &'static str,
    pub status: u16,
    pub headers: &'static [(&'static str, &'static str)],
    pub body: Vec<u8>,
    pub think_ms: f64,
}

/// Writes a corpus (manifest + content-addressed bodies) under `dir`/corpus: origins
/// a.test (h2, http/1.1) and b.test (http/1.1 only), one page `p`.
pub fn write_corpus(dir: &Path, objs: &[CorpusObj]) -> std::path::PathBuf {
    let c = dir.join("corpus");
    std::fs::create_dir_all(c.join("bodies")).unwrap();
    let mut objects = Vec::new();
    for o in objs {
        let h = sha256_hex(&o.body);
        std::fs::write(c.join("bodies").join(&h), &o.body).unwrap();
        objects.push(serde_json::json!({
            "url": o.url, "page": "p", "status": o.status,
            "headers": o.headers.iter().map(|(k, v)| vec![*k, *v]).collect::<Vec<_>>(),
            "body": format!("bodies/{h}"), "size": o.body.len(), "think_ms": o.think_ms,
        }));
    }
    let manifest = serde_json::json!({
        "format": "dchannel-corpus/1", "name": "tiny", "source": "test",
        "origins": [
            {"host": "a.test", "alpn": ["h2", "http/1.1"]},
            {"host": "b.test", "alpn": ["http/1.1"]},
        ],
        "pages": [{"name": "p", "entry_url": "https://a.test/", "missing": 0}],
        "objects": objects,
    });
    std::fs::write(
        c.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    c
}
