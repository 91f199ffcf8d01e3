//! End-to-end tests of the `webreplay` binary on private loopback addresses (no namespaces).

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;

struct Env {
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    ca: TestCa,
    block: [u8; 2],
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let ca = make_ca(dir.path());
    Env {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        ca,
        block: loopback_block(),
    }
}

impl Env {
    fn addr(&self, host: u8, port: u16) -> SocketAddr {
        SocketAddr::new(addr_in(self.block, host), port)
    }

    /// hosts file: .1 = a.test, .2 = b.test + c.test
    fn hosts(&self) -> std::path::PathBuf {
        let p = self.dir.join("hosts");
        let text = format!(
            "# test origins\n{} a.test\n{} b.test c.test  # two names, one address\n",
            addr_in(self.block, 1),
            addr_in(self.block, 2)
        );
        std::fs::write(&p, text).unwrap();
        p
    }

    fn base_args(&self, extra: &[(&str, &str)]) -> Vec<String> {
        let hosts = self.hosts();
        let mut a = args(&[
            ("--hosts", hosts.to_str().unwrap()),
            ("--ca-cert", self.ca.cert_path.to_str().unwrap()),
            ("--ca-key", self.ca.key_path.to_str().unwrap()),
            ("--http-port", &HTTP_PORT.to_string()),
            ("--https-port", &HTTPS_PORT.to_string()),
            ("--threads", "2"),
        ]);
        a.extend(args(extra));
        a
    }

    fn start(&self, extra: &[(&str, &str)]) -> Server {
        Server::start(&self.base_args(extra), self.dir.join("stderr.log"))
    }

    /// Starts the server on `corpus` with an access log (and `extra` arguments); returns
    /// the server and the log's path.
    fn start_on_corpus(&self, corpus: &Path, extra: &[(&str, &str)]) -> (Server, PathBuf) {
        let log_path = self.dir.join("access.jsonl");
        let mut a = vec![
            ("--corpus", corpus.to_str().unwrap()),
            ("--access-log", log_path.to_str().unwrap()),
        ];
        a.extend_from_slice(extra);
        (self.start(&a), log_path)
    }

    /// GET `path` from a.test over HTTPS (trusting the test CA, offering `alpn`);
    /// panics when the exchange fails.
    async fn get_a(&self, path: &str, alpn: &[&str]) -> Fetched {
        let tls = Some((&self.ca.der, alpn));
        fetch(self.addr(1, HTTPS_PORT), "a.test", path, "GET", tls)
            .await
            .unwrap()
    }

    /// GET `path` from `host` at .`ip` over plain HTTP; panics when the exchange fails.
    async fn http_get(&self, ip: u8, host: &str, path: &str) -> Fetched {
        fetch(self.addr(ip, HTTP_PORT), host, path, "GET", None)
            .await
            .unwrap()
    }

    /// Runs curl on `https://host/path`, `host` resolved to .`ip`, with `flag` (`--http2`,
    /// …) and `opts`, trusting the test CA; returns its stdout and stderr.
    fn curl(
        &self,
        (host, ip): (&str, u8),
        flag: &str,
        opts: &[&str],
        path: &str,
    ) -> (String, String) {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "20", flag, "--cacert"])
            .arg(&self.ca.cert_path)
            .arg("--resolve")
            .arg(format!("{host}:{HTTPS_PORT}:{}", addr_in(self.block, ip)))
            .args(opts)
            .arg(format!("https://{host}:{HTTPS_PORT}{path}"))
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (text(&out.stdout), text(&out.stderr))
    }
}

/// False (and a SKIP line) when curl is not installed.
fn have_curl() -> bool {
    let found = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        eprintln!("SKIP: curl not installed");
    }
    found
}

/// The access log's records, one JSON object a line.
fn read_access_log(path: &Path) -> Vec<serde_json::Value> {
    let log = std::fs::read_to_string(path).unwrap();
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const H2_H1: &[&str] = &["h2", "http/1.1"];
const H1: &[&str] = &["http/1.1"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls13_alpn_negotiation_and_bytes_pattern() {
    let e = env();
    let mut server = e.start(&[]);
    let a = e.addr(1, HTTPS_PORT);

    // h2 offered → h2 over TLS 1.3; content is the i mod 251 pattern.
    let n = 3_000_017;
    let r = e.get_a(&format!("/bytes/{n}"), H2_H1).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.alpn.as_deref(), Some("h2"));
    assert_eq!(r.version, http::Version::HTTP_2);
    assert_eq!(r.tls, Some(rustls::ProtocolVersion::TLSv1_3));
    assert_eq!(r.headers["content-length"], n.to_string());
    assert_eq!((r.body_len, r.sha256), (n, pattern_sha256(n)));

    // Only http/1.1 offered → HTTP/1.1.
    let r = e.get_a("/bytes/1000", H1).await;
    assert_eq!(r.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(r.version, http::Version::HTTP_11);
    assert_eq!(r.sha256, pattern_sha256(1000));

    // Two names on one address: SNI picks a certificate valid for each (the client verifies).
    for name in ["b.test", "c.test"] {
        let r = fetch(
            e.addr(2, HTTPS_PORT),
            name,
            "/health",
            "GET",
            Some((&e.ca.der, H2_H1)),
        )
        .await
        .unwrap();
        assert_eq!((r.status, &r.head[..]), (200, &b"ok"[..]), "{name}");
    }
    // A name the server has no certificate for fails verification (the fallback cert is a.test's).
    assert!(
        fetch(a, "other.test", "/health", "GET", Some((&e.ca.der, H2_H1)))
            .await
            .is_err()
    );

    // Plain HTTP on the same address, same built-ins.
    let r = e.http_get(1, "a.test", "/bytes/0").await;
    assert_eq!((r.status, r.body_len), (200, 0));

    // N = 10^9 is announced with its length (HEAD: no body, on either protocol).
    for alpn in [H1, H2_H1] {
        let r = fetch(
            a,
            "a.test",
            "/bytes/1000000000",
            "HEAD",
            Some((&e.ca.der, alpn)),
        )
        .await
        .unwrap();
        assert_eq!(r.headers["content-length"], "1000000000", "{alpn:?}");
        assert_eq!((r.status, r.body_len), (200, 0), "{alpn:?}");
    }

    // Bad N → 400, ?think_ms delays the built-ins.
    let r = e.get_a("/bytes/12x", H2_H1).await;
    assert_eq!(r.status, 400);
    let r = e.get_a("/health?think_ms=200", H2_H1).await;
    assert!(r.ttfb >= Duration::from_millis(200), "{:?}", r.ttfb);

    let status = server.stop().unwrap();
    assert!(status.success(), "SIGTERM must exit 0, got {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transfer_is_streamed_not_buffered() {
    let e = env();
    let server = e.start(&[]);
    let n: u64 = 300_000_000;
    let r = e.get_a(&format!("/bytes/{n}"), H2_H1).await;
    assert_eq!((r.body_len, r.sha256), (n, pattern_sha256(n)));
    // Peak resident memory stays far below the 300 MB served.
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(hwm_kb < 100 * 1024, "server peak RSS {hwm_kb} kB");
}

/// Deterministic incompressible-looking bytes, so bodies are not all alike.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    dchannel_base::testing::pattern(n, seed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_is_replayed_byte_identically_with_think_time() {
    let e = env();
    let html =
        b"<!doctype html><link rel=stylesheet href=/style.css?v=1><img src=https://b.test/img.bin>"
            .to_vec();
    let css = b"body { color: #123456 }\n".to_vec();
    let img = noise(300_000, 7);
    let corpus = write_corpus(
        &e.dir,
        &[
            CorpusObj {
                url: "https://a.test/",
                status: 200,
                headers: &[("Content-Type", "text/html; charset=utf-8")],
                body: html.clone(),
                think_ms: 0.0,
            },
            // Recorded length/encoding/hop-by-hop headers are wrong on purpose: the server must recompute.
            CorpusObj {
                url: "https://a.test/style.css?v=1",
                status: 200,
                headers: &[
                    ("content-type", "text/css"),
                    ("content-length", "9999"),
                    ("content-encoding", "gzip"),
                    ("connection", "keep-alive"),
                    ("cache-control", "max-age=60"),
                ],
                body: css.clone(),
                think_ms: 150.0,
            },
            CorpusObj {
                url: "https://b.test/img.bin",
                status: 200,
                headers: &[("content-type", "application/octet-stream")],
                body: img.clone(),
                think_ms: 0.0,
            },
            CorpusObj {
                url: "http://a.test/old",
                status: 301,
                headers: &[("location", "https://a.test/")],
                body: Vec::new(),
                think_ms: 0.0,
            },
        ],
    );
    let (mut server, log_path) = e.start_on_corpus(&corpus, &[]);
    let b = e.addr(2, HTTPS_PORT);

    let r = e.get_a("/", H2_H1).await;
    assert_eq!((r.status, r.sha256.clone()), (200, sha256_hex(&html)));
    assert_eq!(r.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(r.alpn.as_deref(), Some("h2"));

    let r = e.get_a("/style.css?v=1", H2_H1).await;
    assert_eq!(r.sha256, sha256_hex(&css));
    assert_eq!(r.headers["content-length"], css.len().to_string());
    assert!(r.headers.get("content-encoding").is_none());
    assert_eq!(r.headers["cache-control"], "max-age=60");
    // Think time: never early; on a loaded 2-core machine allow 750 ms of lateness.
    assert!(
        r.ttfb >= Duration::from_millis(150) && r.ttfb < Duration::from_millis(900),
        "ttfb {:?} for think_ms 150",
        r.ttfb
    );

    // Query fallback: unknown query, same path → the recorded object.
    let r = e.get_a("/style.css?v=2", H1).await;
    assert_eq!((r.status, r.sha256), (200, sha256_hex(&css)));

    // Per-origin ALPN: b.test is http/1.1-only even when the client offers h2.
    let r = fetch(b, "b.test", "/img.bin", "GET", Some((&e.ca.der, H2_H1)))
        .await
        .unwrap();
    assert_eq!(r.alpn.as_deref(), Some("http/1.1"));
    assert_eq!(r.version, http::Version::HTTP_11);
    assert_eq!(
        (r.status, r.body_len, r.sha256),
        (200, img.len() as u64, sha256_hex(&img))
    );

    // Same objects over plain http://, recorded status + headers replayed.
    let r = e.http_get(1, "a.test", "/old").await;
    assert_eq!((r.status, r.body_len), (301, 0));
    assert_eq!(r.headers["location"], "https://a.test/");
    let r = e.http_get(2, "b.test", "/img.bin").await;
    assert_eq!(r.sha256, sha256_hex(&img));

    // Unknown path / object of another origin → 404.
    for path in ["/missing.js", "/img.bin"] {
        assert_eq!(e.get_a(path, H2_H1).await.status, 404, "{path}");
    }

    assert!(server.stop().unwrap().success());
    let stderr = std::fs::read_to_string(e.dir.join("stderr.log")).unwrap();
    assert!(stderr.contains("/missing.js"), "404 is logged: {stderr}");

    // Access log: one JSON object per response with the agreed fields.
    let recs = read_access_log(&log_path);
    assert_eq!(recs.len(), 8, "{recs:?}");
    for r in &recs {
        for k in [
            "ts",
            "client",
            "host",
            "alpn",
            "http_version",
            "method",
            "path",
            "status",
            "bytes",
            "think_ms",
            "ttfb_ms",
            "total_ms",
        ] {
            assert!(r.get(k).is_some(), "missing {k} in {r}");
        }
    }
    let css_rec = recs.iter().find(|r| r["path"] == "/style.css?v=1").unwrap();
    assert_eq!(css_rec["think_ms"], 150.0);
    assert_eq!(css_rec["matched"], "exact");
    assert_eq!(css_rec["bytes"], css.len());
    assert!(css_rec["ttfb_ms"].as_f64().unwrap() >= 150.0);
    assert_eq!(
        recs.iter().find(|r| r["path"] == "/style.css?v=2").unwrap()["matched"],
        "path"
    );
    let img_rec = recs
        .iter()
        .find(|r| r["host"] == "b.test" && r["scheme"] == "https")
        .unwrap();
    assert_eq!(
        (img_rec["alpn"].as_str(), img_rec["http_version"].as_str()),
        (Some("http/1.1"), Some("HTTP/1.1"))
    );
    assert_eq!(img_rec["bytes"], img.len());
    let miss = recs.iter().find(|r| r["path"] == "/missing.js").unwrap();
    assert_eq!(
        (miss["status"].as_u64(), miss["matched"].as_str()),
        (Some(404), Some("none"))
    );
    // A request the corpus cannot answer is a fast 404: no think time, whatever the
    // origin's objects have (a page's expected-missing requests cost every scheme alike).
    assert_eq!(miss["think_ms"], 0.0, "{miss}");
    assert!(miss["ttfb_ms"].as_f64().unwrap() < 150.0, "{miss}");
}

/// curl (OpenSSL) must accept the chain too, both protocols: this is what the testbed uses.
/// With the project venv present, the CA is made by Python `cryptography` like the testbed's.
#[test]
fn curl_verifies_chain_with_h2_and_http11() {
    if !have_curl() {
        return;
    }
    let e = env();
    let venv_py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let py_ca = venv_py.exists()
        && std::process::Command::new(&venv_py)
            .arg("-c")
            .arg(PY_CA)
            .arg(&e.ca.cert_path)
            .arg(&e.ca.key_path)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    eprintln!(
        "CA made by {}",
        if py_ca {
            "python cryptography"
        } else {
            "rcgen"
        }
    );
    let _server = e.start(&[]);
    for (host, ip, flag, want) in [
        ("a.test", 1, "--http2", "2"),
        ("c.test", 2, "--http1.1", "1.1"),
    ] {
        let written = "%{http_version} %{http_code} %{size_download} %{ssl_verify_result}";
        let (got, err) = e.curl(
            (host, ip),
            flag,
            &["-o", "/dev/null", "-w", written],
            "/bytes/1234567",
        );
        assert_eq!(got, format!("{want} 200 1234567 0"), "curl {host}: {err}");
    }
}

const PY_CA: &str = r#"
import sys, datetime
from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
key = ec.generate_private_key(ec.SECP256R1())
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dchannel test CA")])
now = datetime.datetime.now(datetime.timezone.utc)
cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
  .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
  .not_valid_after(now + datetime.timedelta(days=30))
  .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
  .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
  .sign(key, hashes.SHA256()))
open(sys.argv[1], "wb").write(cert.public_bytes(serialization.Encoding.PEM))
open(sys.argv[2], "wb").write(key.private_bytes(serialization.Encoding.PEM,
    serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
"#;

/// `TCP_IS_MPTCP` (linux/tcp.h): 1 on an MPTCP socket whose connection did not fall back.
const TCP_IS_MPTCP: libc::c_int = 43;

fn connect_mptcp_and_check(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let sock = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::from(262)),
    )
    .expect("MPTCP client socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut s: std::net::TcpStream = sock.into();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.ends_with("ok"),
        "{resp}"
    );
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_TCP,
            TCP_IS_MPTCP,
            &mut val as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    assert_eq!(rc, 0, "getsockopt TCP_IS_MPTCP");
    val == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mptcp_listener_serves_mptcp_and_plain_tcp() {
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    if !enabled {
        eprintln!("SKIP: MPTCP not enabled (/proc/sys/net/mptcp/enabled != 1)");
        return;
    }
    let e = env();
    let server = e.start(&[("--mptcp", "")]);
    let http = e.addr(1, HTTP_PORT);
    assert!(
        tokio::task::spawn_blocking(move || connect_mptcp_and_check(http))
            .await
            .unwrap(),
        "MPTCP client to --mptcp server fell back to TCP"
    );
    // Plain TCP + TLS clients still work.
    let r = e.get_a("/bytes/100000", H2_H1).await;
    assert_eq!(r.sha256, pattern_sha256(100_000));
    drop(server);

    // Control: without --mptcp the same client falls back, so the check above can fail.
    let e2 = env();
    let _plain = e2.start(&[]);
    let http2 = e2.addr(1, HTTP_PORT);
    assert!(
        !tokio::task::spawn_blocking(move || connect_mptcp_and_check(http2))
            .await
            .unwrap()
    );
}

#[test]
fn startup_errors_name_the_problem() {
    let e = env();
    // Bad hosts line → file:line.
    let hosts = e.dir.join("bad_hosts");
    std::fs::write(&hosts, "127.0.0.1 ok.test\n999.1.1.1 x.test\n").unwrap();
    let mut a = e.base_args(&[]);
    a[1] = hosts.to_str().unwrap().to_string();
    let (st, err) = run_to_exit(&a);
    assert!(!st.success());
    assert!(err.contains(&format!("{}:2:", hosts.display())), "{err}");

    // Unparsable CA.
    let bad_ca = e.dir.join("bad.pem");
    std::fs::write(&bad_ca, "not a certificate").unwrap();
    let mut a = e.base_args(&[]);
    a[3] = bad_ca.to_str().unwrap().to_string();
    let (st, err) = run_to_exit(&a);
    assert!(!st.success() && err.contains("CA certificate"), "{err}");

    // Corpus naming a body file that is not there.
    let c = e.dir.join("broken");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(
        c.join("manifest.json"),
        r#"{"format":"dchannel-corpus/1","objects":[{"url":"https://a.test/","status":200,"body":"bodies/deadbeef"}]}"#,
    )
    .unwrap();
    let (st, err) = run_to_exit(&e.base_args(&[("--corpus", c.to_str().unwrap())]));
    assert!(
        !st.success() && err.contains("bodies/deadbeef") && err.contains("objects[0]"),
        "{err}"
    );
}

/// `--check` runs the hosts and corpus parsers of a real start and nothing else: no CA,
/// nothing bound; the same errors (file, line or field) on refusal.
#[test]
fn check_mode_parses_without_serving() {
    let e = env();
    let hosts = e.dir.join("check_hosts");
    std::fs::write(&hosts, "198.19.128.1 a.test\n").unwrap();
    let h = hosts.to_str().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_webreplay"))
        .args(["--check", "--hosts", h])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    std::fs::write(&hosts, "198.19.128.1 a.test\n198.19.128.2 .ds_store\n").unwrap();
    let (st, err) = run_to_exit(&args(&[("--check", ""), ("--hosts", h)]));
    assert!(
        !st.success() && err.contains(":2:") && err.contains(".ds_store"),
        "{err}"
    );
    std::fs::write(&hosts, "198.19.128.1 a.test\n").unwrap();
    let c = e.dir.join("check_corpus");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(
        c.join("manifest.json"),
        r#"{"format":"dchannel-corpus/1","objects":[{"url":"https://a.test/","status":101}]}"#,
    )
    .unwrap();
    let (st, err) = run_to_exit(&args(&[
        ("--check", ""),
        ("--hosts", h),
        ("--corpus", c.to_str().unwrap()),
    ]));
    assert!(
        !st.success() && err.contains("objects[0]") && err.contains("status"),
        "{err}"
    );
    // Without --check the CA stays required.
    let (st, err) = run_to_exit(&args(&[("--hosts", h)]));
    assert!(!st.success() && err.contains("--ca-cert"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_in_flight_responses_finish_then_exits_zero() {
    let e = env();
    let mut server = e.start(&[]);
    let a = e.addr(1, HTTPS_PORT);
    let ca = e.ca.der.clone();
    // A response that is still thinking when the signal arrives.
    let in_flight = tokio::spawn(async move {
        fetch(
            a,
            "a.test",
            "/bytes/100000?think_ms=800",
            "GET",
            Some((&ca, H2_H1)),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = tokio::task::spawn_blocking(move || server.stop())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    let r = in_flight
        .await
        .unwrap()
        .expect("in-flight request completes");
    assert_eq!((r.status, r.sha256), (200, pattern_sha256(100_000)));
    // The listener is gone afterwards.
    assert!(tokio::net::TcpStream::connect(a).await.is_err());
}

/// Asserts a 206 with `Content-Range: bytes FIRST-LAST/TOTAL` and the matching length.
fn assert_partial(r: &Fetched, first: u64, last: u64, total: u64, sha: &str, what: &str) {
    assert_eq!(r.status, 206, "{what}: {r:?}");
    assert_eq!(
        r.headers["content-range"],
        format!("bytes {first}-{last}/{total}").as_str(),
        "{what}"
    );
    let len = last - first + 1;
    assert_eq!(
        r.headers["content-length"],
        len.to_string().as_str(),
        "{what}"
    );
    assert_eq!((r.body_len, r.sha256.as_str()), (len, sha), "{what}");
}

/// RFC 9110 single ranges on a corpus object, over HTTP/2 and HTTP/1.1: the objproxy size
/// probe (`0-999`) and its rest (`1000-`), suffix, 416, ignored malformed / multi-range,
/// If-Range, HEAD and non-200 objects ignore Range, think time per request, access log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_object_byte_ranges() {
    let e = env();
    let body = noise(5000, 11);
    let err_body = b"gone for good\n".to_vec();
    let corpus = write_corpus(
        &e.dir,
        &[
            CorpusObj {
                url: "https://a.test/obj.bin",
                status: 200,
                headers: &[
                    ("content-type", "application/octet-stream"),
                    ("etag", "\"v1\""),
                ],
                body: body.clone(),
                think_ms: 0.0,
            },
            CorpusObj {
                url: "https://a.test/slow.bin",
                status: 200,
                headers: &[],
                body: body.clone(),
                think_ms: 120.0,
            },
            CorpusObj {
                url: "https://a.test/gone",
                status: 410,
                headers: &[("content-type", "text/plain")],
                body: err_body.clone(),
                think_ms: 0.0,
            },
        ],
    );
    let (mut server, log_path) = e.start_on_corpus(&corpus, &[]);
    let a = e.addr(1, HTTPS_PORT);
    let sha = |r: std::ops::RangeInclusive<usize>| sha256_hex(&body[r]);
    for (alpn, want_alpn) in [(H2_H1, "h2"), (H1, "http/1.1")] {
        let get = |range: &'static str| {
            let extra: Vec<(&str, &str)> = if range.is_empty() {
                vec![]
            } else {
                vec![("range", range)]
            };
            let ca = e.ca.der.clone();
            async move {
                fetch_with(a, "a.test", "/obj.bin", "GET", &extra, Some((&ca, alpn)))
                    .await
                    .unwrap()
            }
        };
        let r = get("").await;
        assert_eq!(r.alpn.as_deref(), Some(want_alpn));
        assert_eq!((r.status, r.sha256.clone()), (200, sha256_hex(&body)));
        assert_eq!(r.headers["accept-ranges"], "bytes");
        assert!(r.headers.get("content-range").is_none());

        // (Range, first and last byte served); the last is clamped to the object
        for (range, first, last) in [
            ("bytes=0-999", 0, 999),
            ("bytes=1000-", 1000, 4999),
            ("bytes=-500", 4500, 4999),
            ("bytes=4000-99999", 4000, 4999),
        ] {
            let what = format!("{want_alpn} {range}");
            let sha = sha(first as usize..=last as usize);
            assert_partial(&get(range).await, first, last, 5000, &sha, &what);
        }

        let r = get("bytes=5000-").await;
        assert_eq!(r.status, 416, "{want_alpn}");
        assert_eq!(r.headers["content-range"], "bytes */5000");
        assert_eq!(r.body_len, 0);

        for bad in ["bytes=0-1,5-6", "bytes=9-3", "lines=0-1", "bytes=x-"] {
            let r = get(bad).await;
            assert_eq!(
                (r.status, r.sha256.clone()),
                (200, sha256_hex(&body)),
                "{want_alpn} {bad}"
            );
            assert!(r.headers.get("content-range").is_none());
        }

        // If-Range: a stale validator means "send it all", a current one honours the range.
        let ca = e.ca.der.clone();
        let stale = [("range", "bytes=0-999"), ("if-range", "\"v0\"")];
        let r = fetch_with(a, "a.test", "/obj.bin", "GET", &stale, Some((&ca, alpn)))
            .await
            .unwrap();
        assert_eq!((r.status, r.body_len), (200, 5000));
        let fresh = [("range", "bytes=0-999"), ("if-range", "\"v1\"")];
        let r = fetch_with(a, "a.test", "/obj.bin", "GET", &fresh, Some((&ca, alpn)))
            .await
            .unwrap();
        assert_partial(&r, 0, 999, 5000, &sha(0..=999), "if-range match");

        // HEAD: Range is defined for GET only; the head of the full 200 comes back.
        let rng = [("range", "bytes=0-999")];
        let r = fetch_with(a, "a.test", "/obj.bin", "HEAD", &rng, Some((&ca, alpn)))
            .await
            .unwrap();
        assert_eq!((r.status, r.body_len), (200, 0));
        assert_eq!(r.headers["content-length"], "5000");
        assert_eq!(r.headers["accept-ranges"], "bytes");

        // A recorded non-200 ignores Range and has no Accept-Ranges.
        let r = fetch_with(a, "a.test", "/gone", "GET", &rng, Some((&ca, alpn)))
            .await
            .unwrap();
        assert_eq!((r.status, r.sha256.clone()), (410, sha256_hex(&err_body)));
        assert!(r.headers.get("content-range").is_none());
        assert!(r.headers.get("accept-ranges").is_none());

        // Think time applies to every ranged request.
        for rg in ["bytes=0-999", "bytes=1000-"] {
            let h = [("range", rg)];
            let r = fetch_with(a, "a.test", "/slow.bin", "GET", &h, Some((&ca, alpn)))
                .await
                .unwrap();
            assert_eq!(r.status, 206);
            assert!(r.ttfb >= Duration::from_millis(120), "{rg}: {:?}", r.ttfb);
        }
    }
    server.stop();
    let lines = read_access_log(&log_path);
    let probe = lines
        .iter()
        .find(|l| l["range"] == "bytes=0-999" && l["path"] == "/obj.bin")
        .expect("probe logged");
    assert_eq!(
        (probe["status"].as_u64(), probe["bytes"].as_u64()),
        (Some(206), Some(1000))
    );
    let plain = lines
        .iter()
        .find(|l| l["path"] == "/obj.bin" && l["status"] == 200)
        .unwrap();
    assert!(plain["range"].is_null(), "{plain}");
    let unsat = lines.iter().find(|l| l["range"] == "bytes=5000-").unwrap();
    assert_eq!(
        (unsat["status"].as_u64(), unsat["bytes"].as_u64()),
        (Some(416), Some(0))
    );
}

/// `/bytes/N` ranges keep absolute offsets (byte k = k mod 251), also across the 64 KiB
/// chunk boundaries of the streamed body; both protocols; HTTP too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_builtin_byte_ranges() {
    let e = env();
    let mut server = e.start(&[]);
    let ca = e.ca.der.clone();
    let n = 200_000u64;
    let path = format!("/bytes/{n}?think_ms=30");
    for (tls, port, label) in [
        (Some((&ca, H2_H1)), HTTPS_PORT, "h2"),
        (Some((&ca, H1)), HTTPS_PORT, "http/1.1"),
        (None, HTTP_PORT, "http"),
    ] {
        let addr = e.addr(1, port);
        let get = |range: &'static str| {
            let path = path.clone();
            async move {
                fetch_with(addr, "a.test", &path, "GET", &[("range", range)], tls)
                    .await
                    .unwrap()
            }
        };
        let r = get("bytes=70000-140000").await;
        let sha = pattern_range_sha256(70_000, 140_001);
        assert_partial(&r, 70_000, 140_000, n, &sha, label);
        assert!(r.ttfb >= Duration::from_millis(30), "{label}");
        assert_eq!(r.head[0], (70_000 % 251) as u8); // 222: not the pattern's start
        let r = get("bytes=0-999").await;
        assert_partial(&r, 0, 999, n, &pattern_sha256(1000), label);
        let r = get("bytes=1000-").await;
        assert_partial(&r, 1000, n - 1, n, &pattern_range_sha256(1000, n), label);
        let r = get("bytes=-251").await;
        assert_partial(
            &r,
            n - 251,
            n - 1,
            n,
            &pattern_range_sha256(n - 251, n),
            label,
        );
        let r = get("bytes=200000-").await;
        assert_eq!((r.status, r.body_len), (416, 0), "{label}");
        assert_eq!(r.headers["content-range"], "bytes */200000");
        let r = get("bytes=1-2, 4-5").await;
        assert_eq!(
            (r.status, r.sha256.clone()),
            (200, pattern_sha256(n)),
            "{label}"
        );
        assert_eq!(r.headers["accept-ranges"], "bytes");
    }
    server.stop();
}

/// curl's `-r` (what a user would try first) over both protocols, corpus and built-in.
#[test]
fn curl_range_requests_h2_and_http11() {
    if !have_curl() {
        return;
    }
    let e = env();
    let body = noise(5000, 23);
    let corpus = write_corpus(
        &e.dir,
        &[CorpusObj {
            url: "https://a.test/five.bin",
            status: 200,
            headers: &[],
            body: body.clone(),
            think_ms: 0.0,
        }],
    );
    let _server = e.start(&[("--corpus", corpus.to_str().unwrap())]);
    let out_path = e.dir.join("curl.out");
    for (flag, want) in [("--http2", "2"), ("--http1.1", "1.1")] {
        for (path, range, want_sha, want_cr) in [
            (
                "/five.bin",
                "0-999",
                sha256_hex(&body[..1000]),
                "bytes 0-999/5000",
            ),
            (
                "/five.bin",
                "1000-",
                sha256_hex(&body[1000..]),
                "bytes 1000-4999/5000",
            ),
            (
                "/bytes/5000",
                "-1000",
                pattern_range_sha256(4000, 5000),
                "bytes 4000-4999/5000",
            ),
        ] {
            let written = "%{http_version} %{http_code} %header{content-range}";
            let opts = ["-r", range, "-o", out_path.to_str().unwrap(), "-w", written];
            let (got, err) = e.curl(("a.test", 1), flag, &opts, path);
            assert_eq!(
                got,
                format!("{want} 206 {want_cr}"),
                "curl {flag} {path} {range}: {err}"
            );
            let data = std::fs::read(&out_path).unwrap();
            assert_eq!(sha256_hex(&data), want_sha, "curl {flag} {path} {range}");
        }
    }
}

/// `--cdn`: the manifest's tier (else the hit ratio) adds its delay before the response
/// head; the access log names the tier and the delay; built-ins and 404s get none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdn_tiers_delay_the_response_head() {
    let e = env();
    let obj = |url: &'static str| CorpusObj {
        url,
        status: 200,
        headers: &[("content-type", "text/plain")],
        body: url.as_bytes().to_vec(),
        think_ms: 0.0,
    };
    let corpus = write_corpus(
        &e.dir,
        &[
            obj("https://a.test/edge"),
            obj("https://a.test/parent"),
            obj("https://a.test/origin"),
            obj("https://a.test/unrecorded"),
        ],
    );
    // Tiers as an importer writes them; the last object has none (hit ratio decides).
    let mp = corpus.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    for (i, t) in ["edge", "parent", "origin"].iter().enumerate() {
        m["objects"][i]["tier"] = serde_json::json!(t);
    }
    std::fs::write(&mp, serde_json::to_vec(&m).unwrap()).unwrap();
    let (mut server, log_path) = e.start_on_corpus(
        &corpus,
        &[
            ("--cdn-delays-ms", "parent=150,origin=400"),
            // Nothing hits a cache by ratio: the unrecorded object is an origin fetch.
            ("--cdn-hit-ratio", "edge=0,parent=0"),
        ],
    );
    // (path, extra delay ms); never early, at most 750 ms late on a loaded 2-core machine.
    for (path, want_ms) in [
        ("/edge", 0u64),
        ("/parent", 150),
        ("/origin", 400),
        ("/unrecorded", 400),
        ("/health", 0),
        ("/absent", 0),
    ] {
        let r = e.get_a(path, H2_H1).await;
        let want = Duration::from_millis(want_ms);
        assert!(
            r.ttfb >= want && r.ttfb < want + Duration::from_millis(750),
            "{path}: ttfb {:?}, tier delay {want:?}",
            r.ttfb
        );
    }
    assert!(server.stop().unwrap().success());
    let recs = read_access_log(&log_path);
    let rec = |p: &str| recs.iter().find(|r| r["path"] == p).unwrap();
    for (p, tier, ms) in [
        ("/edge", serde_json::json!("edge"), 0.0),
        ("/parent", serde_json::json!("parent"), 150.0),
        ("/origin", serde_json::json!("origin"), 400.0),
        ("/unrecorded", serde_json::json!("origin"), 400.0),
        ("/health", serde_json::Value::Null, 0.0),
        ("/absent", serde_json::Value::Null, 0.0),
    ] {
        assert_eq!(
            (&rec(p)["tier"], rec(p)["cdn_ms"].as_f64()),
            (&tier, Some(ms)),
            "{p}"
        );
    }
    assert!(rec("/origin")["ttfb_ms"].as_f64().unwrap() >= 400.0);
}

/// Bad --cdn-* values stop the start with the flag named; the check mode parses them too.
#[test]
fn cdn_flag_errors_name_the_flag() {
    let e = env();
    let hosts = e.hosts();
    for (flag, val, want) in [
        (
            "--cdn-delays-ms",
            "origin=slow",
            "--cdn-delays-ms: origin=\"slow\" is not a number",
        ),
        ("--cdn-hit-ratio", "edge=0.9,parent=0.5", "exceeds 1"),
        (
            "--cdn-hit-ratio",
            "cache=1",
            "expected edge, parent or origin",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_webreplay"))
            .args(["--check", "--hosts", hosts.to_str().unwrap(), flag, val])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {val}: {err}");
        assert!(
            err.contains("webreplay: error:") && err.contains(want),
            "{err}"
        );
    }
}
