//! JSON-lines access log written by one background thread, so request handling never
//! blocks on file I/O. Lines are flushed whenever the queue drains.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use serde::Serialize;

/// One served (or refused) request.
#[derive(Debug, Serialize)]
pub struct Record {
    /// Unix time (seconds) when the request head was received.
    pub ts: f64,
    /// Client `ip:port`.
    pub client: String,
    /// Local `ip:port` the request arrived on.
    pub local: String,
    /// Host the request was matched against (Host/:authority, else SNI, else the address's first name).
    pub host: String,
    /// `https` or `http`.
    pub scheme: &'static str,
    /// Negotiated ALPN (`h2`, `http/1.1`) or empty for plain HTTP / no ALPN.
    pub alpn: String,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub http_version: String,
    pub method: String,
    /// Path and query as requested.
    pub path: String,
    pub status: u16,
    /// How the response was chosen: `exact`, `path`, `builtin` or `none` (404).
    pub matched: &'static str,
    /// The request's `Range` header as received (`null` when absent); honoured only for
    /// `GET` of 200 objects — `status` 206/416 says whether it was.
    pub range: Option<String>,
    /// Body bytes handed to the connection.
    pub bytes: u64,
    /// Think time applied before the response head.
    pub think_ms: f64,
    /// CDN tier the corpus object was served from (`edge`, `parent`, `origin`); `null`
    /// without `--cdn` and for built-ins and 404s.
    pub tier: Option<&'static str>,
    /// The tier's extra delay applied before the response head (on top of `think_ms`).
    pub cdn_ms: f64,
    /// Request received → response head handed to the connection.
    pub ttfb_ms: f64,
    /// Request received → body finished (or abandoned by the client: `complete` false).
    pub total_ms: f64,
    pub complete: bool,
}

enum Msg {
    Line(Box<Record>),
    Stop,
}

/// Cheap-to-clone handle that queues records; `None` when no log is configured.
#[derive(Clone)]
pub struct AccessLog {
    tx: Option<mpsc::Sender<Msg>>,
}

/// Owns the writer thread; `finish` flushes and joins it.
pub struct AccessLogWriter {
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl AccessLog {
    pub fn disabled() -> Self {
        Self { tx: None }
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    pub fn log(&self, rec: Record) {
        if let Some(tx) = &self.tx {
            // A closed channel only happens during shutdown; dropping the line is fine then.
            let _ = tx.send(Msg::Line(Box::new(rec)));
        }
    }

    /// Opens (appends to) `path` and starts the writer thread.
    pub fn open(path: &Path) -> Result<(Self, AccessLogWriter)> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open access log {}", path.display()))?;
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_loop(rx, BufWriter::with_capacity(64 * 1024, file)))
            .context("spawning the access-log thread")?;
        Ok((
            Self {
                tx: Some(tx.clone()),
            },
            AccessLogWriter {
                tx,
                thread: Some(thread),
            },
        ))
    }
}

impl AccessLogWriter {
    /// Flushes everything queued so far and stops the thread.
    pub fn finish(mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn write_loop(rx: mpsc::Receiver<Msg>, mut out: BufWriter<std::fs::File>) {
    let write = |out: &mut BufWriter<std::fs::File>, rec: &Record| {
        if let Err(e) = serde_json::to_writer(&mut *out, rec)
            .map_err(std::io::Error::from)
            .and_then(|_| out.write_all(b"\n"))
        {
            tracing::error!("access log write failed: {e}");
        }
    };
    while let Ok(msg) = rx.recv() {
        let mut stop = false;
        match msg {
            Msg::Line(r) => write(&mut out, &r),
            Msg::Stop => stop = true,
        }
        // Drain whatever else is queued before paying for a flush.
        while !stop {
            match rx.try_recv() {
                Ok(Msg::Line(r)) => write(&mut out, &r),
                Ok(Msg::Stop) => stop = true,
                Err(_) => break,
            }
        }
        if let Err(e) = out.flush() {
            tracing::error!("access log flush failed: {e}");
        }
        if stop {
            return;
        }
    }
    let _ = out.flush();
}
