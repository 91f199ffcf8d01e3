//! HTTP/3 listener of the `webreplay` binary (--h3-port), end to end on private loopback
//! addresses: a quinn + h3 client fetches what an HTTP/2 client fetches, byte for byte and
//! with the same think time and CDN tier delay (both go through `service::handle`).

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Buf;
use support::*;

/// Same number as the HTTPS port: UDP and TCP ports are separate spaces, as 443 is in the lab.
const H3_PORT: u16 = HTTPS_PORT;

struct H3Env {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    ca: TestCa,
    block: [u8; 2],
}

impl H3Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = make_ca(dir.path());
        Self {
            dir: dir.path().to_path_buf(),
            _dir: dir,
            ca,
            block: loopback_block(),
        }
    }

    fn addr(&self, host: u8, port: u16) -> SocketAddr {
        SocketAddr::new(addr_in(self.block, host), port)
    }

    /// .1 = a.test, .2 = b.test.
    fn args(&self, extra: &[(&str, &str)]) -> Vec<String> {
        let hosts = self.dir.join("hosts");
        let text = format!(
            "{} a.test\n{} b.test\n",
            addr_in(self.block, 1),
            addr_in(self.block, 2)
        );
        std::fs::write(&hosts, text).unwrap();
        let mut a = args(&[
            ("--hosts", hosts.to_str().unwrap()),
            ("--ca-cert", self.ca.cert_path.to_str().unwrap()),
            ("--ca-key", self.ca.key_path.to_str().unwrap()),
            ("--http-port", "0"),
            ("--https-port", &HTTPS_PORT.to_string()),
            ("--h3-port", &H3_PORT.to_string()),
            ("--threads", "2"),
        ]);
        a.extend(args(extra));
        a
    }

    fn start(&self, extra: &[(&str, &str)]) -> Server {
        Server::start(&self.args(extra), self.dir.join("stderr.log"))
    }
}

/// What an HTTP/3 GET saw.
struct H3Fetched {
    status: u16,
    version: http::Version,
    body_len: u64,
    sha256: String,
    ttfb: Duration,
}

/// GET `https://host/path` over a fresh QUIC connection to `addr` (ALPN h3, trusting
/// `ca`, server name `host`); the client gives up after 3 s without an answer.
async fn h3_get(
    addr: SocketAddr,
    host: &str,
    path: &str,
    ca: &rustls::pki_types::CertificateDer<'static>,
) -> anyhow::Result<H3Fetched> {
    let tls = (*client_config(ca, &["h3"])).clone();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(Duration::from_secs(3).try_into()?));
    cfg.transport_config(Arc::new(transport));
    let mut ep = quinn::Endpoint::client(SocketAddr::new(addr.ip(), 0))?;
    ep.set_default_client_config(cfg);
    let conn = ep.connect(addr, host)?.await?;
    let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(conn)).await?;
    let drive = tokio::spawn(async move { driver.wait_idle().await });
    let req = http::Request::get(format!("https://{host}{path}")).body(())?;
    let t0 = Instant::now();
    let mut stream = sender.send_request(req).await?;
    // The server may answer and stop reading before this FIN leaves (RFC 9114 §4.1 allows
    // a complete response before the whole request): then finishing fails, harmlessly.
    let _ = stream.finish().await;
    let resp = stream.recv_response().await?;
    let ttfb = t0.elapsed();
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await? {
        while chunk.has_remaining() {
            let n = chunk.chunk().len();
            body.extend_from_slice(chunk.chunk());
            chunk.advance(n);
        }
    }
    drop(sender);
    drive.abort();
    ep.close(0u32.into(), b"done");
    Ok(H3Fetched {
        status: resp.status().as_u16(),
        version: resp.version(),
        body_len: body.len() as u64,
        sha256: sha256_hex(&body),
        ttfb,
    })
}

fn read_log(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One corpus object (think 100 ms, CDN tier parent = +150 ms) and a 3 MB built-in, over
/// HTTP/3 and over HTTP/2: the same bytes, and neither answers before 250 ms nor (on a
/// loaded 2-core machine) more than 750 ms late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_serves_the_corpus_byte_exact_with_the_delays_of_h2() {
    let e = H3Env::new();
    let page = dchannel_base::testing::pattern(200_000, 11);
    let other = b"b.test over QUIC\n".to_vec();
    let corpus = write_corpus(
        &e.dir,
        &[
            CorpusObj {
                url: "https://a.test/page.bin",
                status: 200,
                headers: &[("content-type", "application/octet-stream")],
                body: page.clone(),
                think_ms: 100.0,
            },
            CorpusObj {
                url: "https://b.test/b.txt",
                status: 200,
                headers: &[("content-type", "text/plain")],
                body: other.clone(),
                think_ms: 0.0,
            },
        ],
    );
    let mp = corpus.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mp).unwrap()).unwrap();
    m["objects"][0]["tier"] = serde_json::json!("parent");
    std::fs::write(&mp, serde_json::to_vec(&m).unwrap()).unwrap();
    let log = e.dir.join("access.jsonl");
    let mut server = e.start(&[
        ("--corpus", corpus.to_str().unwrap()),
        ("--access-log", log.to_str().unwrap()),
        ("--cdn-delays-ms", "parent=150"),
    ]);

    let want = Duration::from_millis(100 + 150);
    let q = h3_get(e.addr(1, H3_PORT), "a.test", "/page.bin", &e.ca.der)
        .await
        .unwrap();
    assert_eq!((q.status, q.version), (200, http::Version::HTTP_3));
    assert_eq!(
        (q.body_len, q.sha256.as_str()),
        (page.len() as u64, sha256_hex(&page).as_str())
    );
    let t = fetch(
        e.addr(1, HTTPS_PORT),
        "a.test",
        "/page.bin",
        "GET",
        Some((&e.ca.der, &["h2"])),
    )
    .await
    .unwrap();
    assert_eq!(
        (t.alpn.as_deref(), t.sha256.as_str()),
        (Some("h2"), q.sha256.as_str())
    );
    for (proto, ttfb) in [("h3", q.ttfb), ("h2", t.ttfb)] {
        assert!(
            ttfb >= want && ttfb < want + Duration::from_millis(750),
            "{proto}: ttfb {ttfb:?}, think 100 ms + parent tier 150 ms"
        );
    }

    // Built-in endpoint, large enough to need many flow-control updates.
    let n = 3_000_000u64;
    let q = h3_get(
        e.addr(1, H3_PORT),
        "a.test",
        &format!("/bytes/{n}"),
        &e.ca.der,
    )
    .await
    .unwrap();
    assert_eq!((q.body_len, q.sha256), (n, pattern_sha256(n)));

    // The second origin's own certificate (the client checks the name b.test).
    let q = h3_get(e.addr(2, H3_PORT), "b.test", "/b.txt", &e.ca.der)
        .await
        .unwrap();
    assert_eq!((q.status, q.sha256), (200, sha256_hex(&other)));

    assert!(server.stop().unwrap().success());
    let recs = read_log(&log);
    let h3_page = recs
        .iter()
        .find(|r| r["path"] == "/page.bin" && r["alpn"] == "h3")
        .expect("an h3 record");
    let h2_page = recs
        .iter()
        .find(|r| r["path"] == "/page.bin" && r["alpn"] == "h2")
        .expect("an h2 record");
    assert_eq!(h3_page["http_version"], "HTTP/3.0");
    for r in [h3_page, h2_page] {
        assert_eq!(
            (
                r["think_ms"].as_f64(),
                r["cdn_ms"].as_f64(),
                r["tier"].as_str()
            ),
            (Some(100.0), Some(150.0), Some("parent")),
            "{r}"
        );
        assert_eq!(
            (r["bytes"].as_u64(), r["complete"].as_bool()),
            (Some(200_000), Some(true))
        );
    }
}

/// `--h3-refuse b.test`: no QUIC on b.test's address (its TCP listener stays), a.test still
/// speaks HTTP/3; a name the hosts file lacks stops the start with the flag named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h3_refuse_leaves_an_origin_tcp_only() {
    let e = H3Env::new();
    let mut server = e.start(&[("--h3-refuse", "b.test")]);
    let q = h3_get(e.addr(1, H3_PORT), "a.test", "/bytes/10", &e.ca.der)
        .await
        .unwrap();
    assert_eq!((q.status, q.sha256), (200, pattern_sha256(10)));
    let refused = h3_get(e.addr(2, H3_PORT), "b.test", "/bytes/10", &e.ca.der).await;
    assert!(refused.is_err(), "b.test answered over QUIC");
    let t = fetch(
        e.addr(2, HTTPS_PORT),
        "b.test",
        "/bytes/10",
        "GET",
        Some((&e.ca.der, &["h2"])),
    )
    .await
    .unwrap();
    assert_eq!((t.status, t.alpn.as_deref()), (200, Some("h2")));
    assert!(server.stop().unwrap().success());

    let (status, stderr) = run_to_exit(&e.args(&[("--h3-refuse", "nowhere.test")]));
    assert!(!status.success());
    assert!(
        stderr.contains("--h3-refuse") && stderr.contains("nowhere.test"),
        "{stderr}"
    );
}

/// The `h3get` client (Table 2 over QUIC): one fetch of a corpus object with 100 ms think
/// time, byte-exact by hash, and its phases in curl's order — resolution, then the QUIC
/// handshake, then the first response byte no sooner than the think time after it, then
/// the last byte. A refused origin is exit 1 with the reason, still as one JSON line.
#[test]
fn h3get_fetches_byte_exact_with_ordered_phases() {
    let e = H3Env::new();
    let page = dchannel_base::testing::pattern(150_000, 7);
    let corpus = write_corpus(
        &e.dir,
        &[CorpusObj {
            url: "https://a.test/page.bin",
            status: 200,
            headers: &[("content-type", "application/octet-stream")],
            body: page.clone(),
            think_ms: 100.0,
        }],
    );
    let mut server = e.start(&[
        ("--corpus", corpus.to_str().unwrap()),
        ("--h3-refuse", "b.test"),
    ]);
    let h3get = |host: u8, path: &str| {
        let url = format!("https://{}:{H3_PORT}{path}", addr_in(e.block, host));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_h3get"))
            .args([url.as_str(), "--cacert", e.ca.cert_path.to_str().unwrap()])
            .args(["--max-time", "5"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };

    let (code, v) = h3get(1, "/page.bin");
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        (v["http_code"].as_u64(), v["http_version"].as_str()),
        (Some(200), Some("3"))
    );
    assert_eq!(
        (v["size_download"].as_u64(), v["sha256"].as_str()),
        (Some(page.len() as u64), Some(sha256_hex(&page).as_str()))
    );
    let t = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {v}"));
    let (dns, conn, app) = (
        t("time_namelookup"),
        t("time_connect"),
        t("time_appconnect"),
    );
    let (start, total) = (t("time_starttransfer"), t("time_total"));
    assert!(dns > 0.0 && dns < conn, "{v}");
    assert_eq!(conn, app, "QUIC has no TLS phase after the handshake: {v}");
    assert!(
        start - conn >= 0.1,
        "first byte before the 100 ms think time: {v}"
    );
    assert!(start <= total && total < 5.0, "{v}");

    let (code, v) = h3get(2, "/bytes/10");
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["exitcode"].as_i64(), Some(1));
    assert!(
        v["errormsg"].as_str().unwrap().contains("QUIC handshake"),
        "{v}"
    );
    assert!(server.stop().unwrap().success());
}
