//! Channel profiles: the TOML file of docs/formats.md and the built-in names
//! (`fixed:<rtt>ms/<rate>mbit`, `urllc`, `embb`, `cellreplay:<dir>`), resolved into traces loaded in
//! memory and turned into one [`Pipeline`] per direction.

use crate::cellreplay::CellReplayLink;
use crate::delay::{DelayModel, DelayStage};
use crate::drx::Drx;
use crate::loss::Loss;
use crate::outage::{Burst, FaultSpec, Faults, Window};
use crate::pipeline::Pipeline;
use crate::queue::{QueueLimit, RateQueue};
use crate::rate::{Capacity, RateSchedule};
use crate::time::{ms_f64, to_ms, Nanos};
use crate::trace::capacity::CapacitySeries;
use crate::trace::cellreplay::{CellReplayDir, CellReplaySide};
use crate::trace::mahimahi::MahimahiTrace;
use crate::trace::read_text;
use crate::trace::rtt::RttTimeline;
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

/// A refused profile; the message names file, line (when known) and field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ProfileError(pub String);

/// A direction of the emulated channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Side A → side B (ue → gw).
    Uplink,
    /// Side B → side A (gw → ue); the only direction with DRX.
    Downlink,
}

impl Direction {
    /// `uplink` or `downlink`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Uplink => "uplink",
            Direction::Downlink => "downlink",
        }
    }
}

/// The delay model of a profile.
#[derive(Debug, Clone)]
pub enum DelaySpec {
    /// A fixed RTT (each direction gets half).
    Fixed {
        /// The RTT (ms).
        rtt_ms: f64,
    },
    /// An RTT timeline file (linear interpolation between samples).
    Timeline {
        /// The file it came from.
        file: PathBuf,
        /// The parsed timeline.
        rtt: RttTimeline,
    },
    /// A normal distribution of RTTs, redrawn every `resample_ms`.
    Gaussian {
        /// Mean RTT (ms).
        mean_rtt_ms: f64,
        /// Coefficient of variation.
        cov: f64,
        /// How long one draw holds (ms).
        resample_ms: f64,
    },
}

/// A CellReplay trace directory replayed in one direction (`cellreplay.rs`).
#[derive(Debug, Clone)]
pub struct CellReplaySpec {
    /// The directory.
    pub dir: PathBuf,
    /// Which of its file sets (`up-*` or `down-*`).
    pub side: CellReplaySide,
    /// Its traces, loaded.
    pub traces: Arc<CellReplayDir>,
    /// mm-cellular's `--long-to-short-timer-*` (ms, default 0).
    pub timer_ms: i64,
}

impl CellReplaySpec {
    /// Loads `side` of `dir` (errors name the trace file, line and field).
    pub fn load(dir: &Path, side: CellReplaySide, timer_ms: i64) -> Result<Self, ProfileError> {
        let traces = CellReplayDir::load(dir, side, 0).map_err(trace_err)?;
        Ok(CellReplaySpec {
            dir: dir.to_path_buf(),
            side,
            traces: Arc::new(traces),
            timer_ms,
        })
    }
}

/// The settings of one direction.
#[derive(Debug, Clone)]
pub struct DirSpec {
    /// Capacity (constant, per-second series, Mahimahi trace or unlimited).
    pub rate: Capacity,
    /// Where the rate came from (file and column), for reports.
    pub rate_source: String,
    /// Drop-tail queue limit.
    pub queue: QueueLimit,
    /// I.i.d. loss probability (0..1).
    pub loss: f64,
    /// (inactivity_ms, wake_period_ms)
    pub drx: Option<(f64, f64)>,
    /// Outages and loss bursts (run time; empty: none).
    pub faults: FaultSpec,
    /// A CellReplay trace directory in place of rate and queue (`rate` is then
    /// `Unlimited` and unused).
    pub cellreplay: Option<CellReplaySpec>,
}

/// A channel profile (docs/formats.md).
#[derive(Debug, Clone)]
pub struct Profile {
    /// Its name.
    pub name: String,
    /// One line saying what it models.
    pub description: String,
    /// Delay model (both directions).
    pub delay: DelaySpec,
    /// Side A to side B.
    pub uplink: DirSpec,
    /// Side B to side A.
    pub downlink: DirSpec,
}

// ---- raw TOML shape -------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: String,
    #[serde(default)]
    description: String,
    delay: RawDelay,
    uplink: RawDir,
    downlink: RawDir,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDelay {
    kind: Spanned<String>,
    rtt_ms: Option<Spanned<f64>>,
    file: Option<Spanned<String>>,
    mean_rtt_ms: Option<Spanned<f64>>,
    cov: Option<Spanned<f64>>,
    resample_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDir {
    rate: Spanned<toml::Value>,
    queue: Option<Spanned<toml::Value>>,
    loss: Option<Spanned<f64>>,
    drx: Option<Spanned<RawDrx>>,
    faults: Option<Spanned<RawFaults>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    repeat_ms: Option<f64>,
    #[serde(default)]
    down: Vec<RawWindow>,
    #[serde(default)]
    loss_bursts: Vec<RawBurst>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindow {
    from_ms: f64,
    to_ms: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBurst {
    from_ms: f64,
    to_ms: f64,
    loss: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDrx {
    inactivity_ms: f64,
    wake_period_ms: f64,
}

/// Error-message helper: knows the file and its text (to turn spans into lines).
struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        field: &str,
        msg: impl std::fmt::Display,
    ) -> Result<T, ProfileError> {
        let line = self.text[..span.start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1;
        Err(ProfileError(format!(
            "{}:{line}: field `{field}`: {msg}",
            self.file.display()
        )))
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.file.parent().unwrap_or(Path::new(".")).join(rel)
    }
}

impl Profile {
    /// A built-in name, or else a profile file path.
    pub fn resolve(arg: &str) -> Result<Profile, ProfileError> {
        if let Some(dir) = arg.strip_prefix("cellreplay:") {
            return Self::cellreplay(arg, Path::new(dir));
        }
        if let Some(p) = Self::builtin(arg)? {
            return Ok(p);
        }
        let path = Path::new(arg);
        let text = std::fs::read_to_string(path).map_err(|e| {
            ProfileError(format!(
                "profile {arg:?}: not a built-in (fixed:<rtt>ms/<rate>mbit, urllc, embb, cellreplay:<dir>) and cannot read it as a file: {e}"
            ))
        })?;
        Self::parse(path, &text)
    }

    /// `fixed:<rtt>ms/<rate>mbit` (rate may be `unlimited`), `urllc`, `embb`.
    pub fn builtin(arg: &str) -> Result<Option<Profile>, ProfileError> {
        let spec = match arg {
            "urllc" => "fixed:5ms/2mbit",
            "embb" => "fixed:40ms/200mbit",
            s if s.starts_with("fixed:") => s,
            _ => return Ok(None),
        };
        let bad = |what: &str| {
            ProfileError(format!("built-in profile {arg:?}: {what}; expected fixed:<rtt>ms/<rate>mbit, e.g. fixed:40ms/200mbit"))
        };
        let body = &spec["fixed:".len()..];
        let (rtt, rate) = body.split_once('/').ok_or_else(|| bad("missing `/`"))?;
        let rtt_ms: f64 = rtt
            .strip_suffix("ms")
            .ok_or_else(|| bad("RTT must end in `ms`"))?
            .parse()
            .map_err(|_| bad("RTT is not a number"))?;
        if !(rtt_ms.is_finite() && rtt_ms >= 0.0) {
            return Err(bad("RTT must be ≥ 0"));
        }
        let (cap, src) = if rate == "unlimited" {
            (Capacity::Unlimited, "unlimited".to_string())
        } else {
            let mbit: f64 = rate
                .strip_suffix("mbit")
                .ok_or_else(|| bad("rate must end in `mbit` (or be `unlimited`)"))?
                .parse()
                .map_err(|_| bad("rate is not a number"))?;
            if !(mbit.is_finite() && mbit > 0.0) {
                return Err(bad("rate must be > 0"));
            }
            (
                Capacity::Constant((mbit * 1e6).round() as u64),
                format!("{mbit} Mbit/s"),
            )
        };
        let dir = DirSpec {
            rate: cap,
            rate_source: src,
            queue: QueueLimit::default(),
            loss: 0.0,
            drx: None,
            faults: FaultSpec::default(),
            cellreplay: None,
        };
        Ok(Some(Profile {
            name: arg.to_string(),
            description: format!("built-in {spec}"),
            delay: DelaySpec::Fixed { rtt_ms },
            uplink: dir.clone(),
            downlink: dir,
        }))
    }

    /// `cellreplay:<dir>`: CellReplay's model alone over a trace directory (uplink
    /// replays its `up-*` files, downlink its `down-*`; no extra delay, loss or DRX),
    /// as `mm-cellular` runs it.
    pub fn cellreplay(name: &str, dir: &Path) -> Result<Profile, ProfileError> {
        let side = |s| -> Result<DirSpec, ProfileError> {
            let spec = CellReplaySpec::load(dir, s, 0)?;
            Ok(DirSpec {
                rate: Capacity::Unlimited,
                rate_source: format!("cellreplay {} ({})", dir.display(), s.as_str()),
                queue: QueueLimit::Unlimited,
                loss: 0.0,
                drx: None,
                faults: FaultSpec::default(),
                cellreplay: Some(spec),
            })
        };
        Ok(Profile {
            name: name.to_string(),
            description: format!("CellReplay traces {}", dir.display()),
            delay: DelaySpec::Fixed { rtt_ms: 0.0 },
            uplink: side(CellReplaySide::Up)?,
            downlink: side(CellReplaySide::Down)?,
        })
    }

    /// Parse a profile file's text; trace paths are relative to `file`.
    pub fn parse(file: &Path, text: &str) -> Result<Profile, ProfileError> {
        let raw: RawProfile = toml::from_str(text).map_err(|e| {
            ProfileError(format!("{}: {}", file.display(), e.to_string().trim_end()))
        })?;
        let cx = Ctx { file, text };
        let delay = parse_delay(&cx, &raw.delay)?;
        let uplink = parse_dir(&cx, "uplink", &raw.uplink)?;
        let downlink = parse_dir(&cx, "downlink", &raw.downlink)?;
        if let Some(d) = &raw.uplink.drx {
            return cx.err(
                d.span(),
                "uplink.drx",
                "radio sleep applies to the downlink only",
            );
        }
        Ok(Profile {
            name: raw.name,
            description: raw.description,
            delay,
            uplink,
            downlink,
        })
    }

    /// The settings of direction `d`.
    pub fn dir(&self, d: Direction) -> &DirSpec {
        match d {
            Direction::Uplink => &self.uplink,
            Direction::Downlink => &self.downlink,
        }
    }

    /// The stage pipeline of one direction for a run with `seed` and trace `offset`.
    pub fn pipeline<P>(&self, d: Direction, seed: u64, offset: Nanos) -> Pipeline<P> {
        let spec = self.dir(d);
        let sid = match d {
            Direction::Uplink => 1,
            Direction::Downlink => 2,
        };
        let model = match &self.delay {
            DelaySpec::Fixed { rtt_ms } => DelayModel::Fixed(ms_f64(rtt_ms / 2.0)),
            DelaySpec::Timeline { rtt, .. } => DelayModel::Timeline {
                rtt: rtt.clone(),
                offset,
            },
            DelaySpec::Gaussian {
                mean_rtt_ms,
                cov,
                resample_ms,
            } => DelayModel::Gaussian {
                mean_rtt_ms: *mean_rtt_ms,
                cov: *cov,
                resample: ms_f64(*resample_ms).max(1),
                seed,
                stream: 10 + sid,
                offset,
            },
        };
        let drx = match (d, spec.drx) {
            (Direction::Downlink, Some((i, w))) => Some(Drx::new(ms_f64(i), ms_f64(w))),
            _ => None,
        };
        let mut pipe = Pipeline::new(
            Loss::new(spec.loss, seed, sid),
            RateQueue::new(spec.queue, RateSchedule::new(spec.rate.clone(), offset)),
            DelayStage::new(model),
            drx,
        );
        if let Some(cr) = &spec.cellreplay {
            pipe =
                pipe.with_cellreplay(CellReplayLink::new(cr.traces.clone(), cr.timer_ms, offset));
        }
        if spec.faults.is_empty() {
            pipe
        } else {
            pipe.with_faults(Faults::new(spec.faults.clone(), seed, 20 + sid))
        }
    }

    /// The resolved profile as JSON (for `chanemu check-profile` and logs).
    pub fn to_json(&self) -> serde_json::Value {
        let delay = match &self.delay {
            DelaySpec::Fixed { rtt_ms } => json!({"kind": "fixed", "rtt_ms": rtt_ms}),
            DelaySpec::Timeline { file, rtt } => json!({
                "kind": "timeline", "file": file.display().to_string(), "period_ms": rtt.period_ms()
            }),
            DelaySpec::Gaussian {
                mean_rtt_ms,
                cov,
                resample_ms,
            } => json!({
                "kind": "gaussian", "mean_rtt_ms": mean_rtt_ms, "cov": cov, "resample_ms": resample_ms
            }),
        };
        let dir = |d: &DirSpec| {
            let rate = match (&d.cellreplay, &d.rate) {
                (Some(cr), _) => {
                    let t = &cr.traces;
                    let heavy = &t.heavy;
                    json!({
                        "cellreplay": cr.dir.display().to_string(), "side": cr.side.as_str(),
                        "trains": t.light.trains.len(), "light_period_ms": t.light.period_ms(),
                        "heavy_opportunities": heavy.opportunities_ms.len(),
                        "heavy_period_ms": heavy.period_ms(),
                        "mean_heavy_mbit": heavy.opportunities_ms.len() as f64
                            * crate::cellreplay::PDO_BYTES as f64 * 8.0 / 1000.0
                            / heavy.period_ms() as f64,
                        "size_offsets": t.offsets.is_some(),
                        "long_to_short_timer_ms": cr.timer_ms,
                    })
                }
                (None, rate) => match rate {
                    Capacity::Unlimited => json!("unlimited"),
                    Capacity::Constant(bps) => json!({"mbit": *bps as f64 / 1e6}),
                    Capacity::Series(s) => json!({
                        "series": d.rate_source, "seconds": s.bps.len(),
                        "mean_mbit": s.bps.iter().sum::<u64>() as f64 / s.bps.len() as f64 / 1e6
                    }),
                    Capacity::Mahimahi(m) => json!({
                        "mahimahi": d.rate_source, "opportunities": m.opportunities_ms.len(),
                        "period_ms": m.period_ms(), "mean_mbit": m.mean_bps() / 1e6
                    }),
                },
            };
            let queue = match d.queue {
                QueueLimit::Packets(n) => json!({"packets": n}),
                QueueLimit::Bytes(n) => json!({"bytes": n}),
                QueueLimit::Unlimited => json!("unlimited"),
            };
            let drx = d
                .drx
                .map(|(i, w)| json!({"inactivity_ms": i, "wake_period_ms": w}));
            json!({"rate": rate, "queue": queue, "loss": d.loss, "drx": drx, "faults": faults_json(&d.faults)})
        };
        json!({
            "name": self.name, "description": self.description, "delay": delay,
            "uplink": dir(&self.uplink), "downlink": dir(&self.downlink)
        })
    }
}

/// `null` without faults, else the schedule in ms (what `check-profile` prints).
fn faults_json(f: &FaultSpec) -> serde_json::Value {
    if f.is_empty() && f.repeat.is_none() {
        return serde_json::Value::Null;
    }
    let w = |w: &Window| json!({"from_ms": to_ms(w.from), "to_ms": to_ms(w.to)});
    json!({
        "repeat_ms": f.repeat.map(to_ms),
        "down": f.down.iter().map(w).collect::<Vec<_>>(),
        "loss_bursts": f.bursts.iter().map(|b| {
            let mut j = w(&b.window);
            j["loss"] = json!(b.loss);
            j
        }).collect::<Vec<_>>(),
    })
}

fn trace_err(e: crate::trace::TraceError) -> ProfileError {
    ProfileError(e.to_string())
}

fn parse_delay(cx: &Ctx, d: &RawDelay) -> Result<DelaySpec, ProfileError> {
    let kind = d.kind.get_ref().as_str();
    // Fields that belong to the other kinds must be absent (catches typos in `kind`).
    let present: [(&str, Option<std::ops::Range<usize>>); 5] = [
        ("rtt_ms", d.rtt_ms.as_ref().map(|v| v.span())),
        ("file", d.file.as_ref().map(|v| v.span())),
        ("mean_rtt_ms", d.mean_rtt_ms.as_ref().map(|v| v.span())),
        ("cov", d.cov.as_ref().map(|v| v.span())),
        ("resample_ms", d.resample_ms.as_ref().map(|v| v.span())),
    ];
    let allowed: &[&str] = match kind {
        "fixed" => &["rtt_ms"],
        "timeline" => &["file"],
        "gaussian" => &["mean_rtt_ms", "cov", "resample_ms"],
        other => {
            return cx.err(
                d.kind.span(),
                "delay.kind",
                format!("expected \"fixed\", \"timeline\" or \"gaussian\", got {other:?}"),
            )
        }
    };
    for (name, span) in &present {
        if let Some(span) = span {
            if !allowed.contains(name) {
                return cx.err(
                    span.clone(),
                    &format!("delay.{name}"),
                    format!(
                        "not used by kind = {kind:?} (it takes {})",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }
    let need = |v: &Option<Spanned<f64>>, name: &str| -> Result<f64, ProfileError> {
        match v {
            None => cx.err(
                d.kind.span(),
                &format!("delay.{name}"),
                format!("required for kind = {kind:?}"),
            ),
            Some(s) if !(s.get_ref().is_finite() && *s.get_ref() >= 0.0) => cx.err(
                s.span(),
                &format!("delay.{name}"),
                format!("expected a number ≥ 0, got {}", s.get_ref()),
            ),
            Some(s) => Ok(*s.get_ref()),
        }
    };
    Ok(match kind {
        "fixed" => DelaySpec::Fixed {
            rtt_ms: need(&d.rtt_ms, "rtt_ms")?,
        },
        "timeline" => {
            let Some(f) = &d.file else {
                return cx.err(
                    d.kind.span(),
                    "delay.file",
                    "required for kind = \"timeline\"",
                );
            };
            let path = cx.path(f.get_ref());
            let text = read_text(&path).map_err(trace_err)?;
            DelaySpec::Timeline {
                rtt: RttTimeline::parse(&path, &text).map_err(trace_err)?,
                file: path,
            }
        }
        _ => {
            let resample_ms = need(&d.resample_ms, "resample_ms")?;
            if resample_ms <= 0.0 {
                return cx.err(
                    d.resample_ms.as_ref().unwrap().span(),
                    "delay.resample_ms",
                    "expected > 0 ms",
                );
            }
            DelaySpec::Gaussian {
                mean_rtt_ms: need(&d.mean_rtt_ms, "mean_rtt_ms")?,
                cov: need(&d.cov, "cov")?,
                resample_ms,
            }
        }
    })
}

fn parse_dir(cx: &Ctx, dir: &str, d: &RawDir) -> Result<DirSpec, ProfileError> {
    let cellreplay = match d.rate.get_ref() {
        toml::Value::Table(t) if t.contains_key("cellreplay") => {
            Some(parse_cellreplay(cx, dir, &d.rate)?)
        }
        _ => None,
    };
    let (rate, rate_source) = match &cellreplay {
        Some(cr) => (
            Capacity::Unlimited,
            format!("cellreplay {} ({})", cr.dir.display(), cr.side.as_str()),
        ),
        None => parse_rate(cx, dir, &d.rate)?,
    };
    let queue = match (&d.queue, &cellreplay) {
        (Some(q), Some(_)) => {
            return cx.err(
                q.span(),
                &format!("{dir}.queue"),
                "not used with rate = { cellreplay = ... }: its heavy-PDO link queue is unlimited, as mm-cellular's default",
            )
        }
        (None, Some(_)) => QueueLimit::Unlimited,
        (None, None) => QueueLimit::default(),
        (Some(q), None) => parse_queue(cx, dir, q)?,
    };
    let loss = match &d.loss {
        None => 0.0,
        Some(l) => {
            let p = *l.get_ref();
            if !(0.0..1.0).contains(&p) {
                return cx.err(
                    l.span(),
                    &format!("{dir}.loss"),
                    format!("expected a probability in [0, 1), got {p}"),
                );
            }
            p
        }
    };
    let drx = match &d.drx {
        None => None,
        Some(x) => {
            let r = x.get_ref();
            if !(r.inactivity_ms.is_finite() && r.inactivity_ms >= 0.0) {
                return cx.err(
                    x.span(),
                    &format!("{dir}.drx.inactivity_ms"),
                    "expected ms ≥ 0",
                );
            }
            if !(r.wake_period_ms.is_finite() && r.wake_period_ms > 0.0) {
                return cx.err(
                    x.span(),
                    &format!("{dir}.drx.wake_period_ms"),
                    "expected ms > 0",
                );
            }
            Some((r.inactivity_ms, r.wake_period_ms))
        }
    };
    let faults = match &d.faults {
        None => FaultSpec::default(),
        Some(f) => parse_faults(cx, dir, f)?,
    };
    Ok(DirSpec {
        rate,
        rate_source,
        queue,
        loss,
        drx,
        faults,
        cellreplay,
    })
}

/// `<dir>.rate = { cellreplay = "DIR", side = "up"|"down", long_to_short_timer_ms = N }`
/// (`side` defaults to the direction: uplink → up, downlink → down).
fn parse_cellreplay(
    cx: &Ctx,
    dir: &str,
    v: &Spanned<toml::Value>,
) -> Result<CellReplaySpec, ProfileError> {
    let field = format!("{dir}.rate");
    let span = v.span();
    let toml::Value::Table(t) = v.get_ref() else {
        unreachable!("called on tables only")
    };
    if let Some(k) = t
        .keys()
        .find(|k| !["cellreplay", "side", "long_to_short_timer_ms"].contains(&k.as_str()))
    {
        return cx.err(
            span,
            &format!("{field}.{k}"),
            "unknown key; with cellreplay, expected side = \"up\"|\"down\" or long_to_short_timer_ms = N",
        );
    }
    let Some(toml::Value::String(d)) = t.get("cellreplay") else {
        return cx.err(
            span,
            &format!("{field}.cellreplay"),
            "expected a directory name string",
        );
    };
    let side = match t.get("side") {
        None if dir == "uplink" => CellReplaySide::Up,
        None => CellReplaySide::Down,
        Some(toml::Value::String(s)) if s == "up" => CellReplaySide::Up,
        Some(toml::Value::String(s)) if s == "down" => CellReplaySide::Down,
        Some(other) => {
            return cx.err(
                span,
                &format!("{field}.side"),
                format!("expected \"up\" or \"down\", got {other}"),
            )
        }
    };
    let timer_ms = match t.get("long_to_short_timer_ms") {
        None => 0,
        Some(toml::Value::Integer(i)) if *i >= 0 => *i,
        Some(other) => {
            return cx.err(
                span,
                &format!("{field}.long_to_short_timer_ms"),
                format!("expected an integer number of ms ≥ 0, got {other}"),
            )
        }
    };
    CellReplaySpec::load(&cx.path(d), side, timer_ms)
}

/// `<dir>.faults`: times in ms ≥ 0 (run time), checked by [`FaultSpec::new`].
fn parse_faults(cx: &Ctx, dir: &str, f: &Spanned<RawFaults>) -> Result<FaultSpec, ProfileError> {
    let field = format!("{dir}.faults");
    let r = f.get_ref();
    let ms = |v: f64, name: String| -> Result<Nanos, ProfileError> {
        // 1e12 ms (31 years) keeps the ns in u64 with room to spare
        if v.is_finite() && (0.0..=1e12).contains(&v) {
            Ok(ms_f64(v))
        } else {
            cx.err(
                f.span(),
                &format!("{field}.{name}"),
                format!("expected ms in [0, 1e12], got {v}"),
            )
        }
    };
    let mut down = Vec::new();
    for (i, w) in r.down.iter().enumerate() {
        down.push(Window {
            from: ms(w.from_ms, format!("down[{i}].from_ms"))?,
            to: ms(w.to_ms, format!("down[{i}].to_ms"))?,
        });
    }
    let mut bursts = Vec::new();
    for (i, b) in r.loss_bursts.iter().enumerate() {
        bursts.push(Burst {
            window: Window {
                from: ms(b.from_ms, format!("loss_bursts[{i}].from_ms"))?,
                to: ms(b.to_ms, format!("loss_bursts[{i}].to_ms"))?,
            },
            loss: b.loss,
        });
    }
    let repeat = match r.repeat_ms {
        None => None,
        Some(v) => Some(ms(v, "repeat_ms".into())?),
    };
    FaultSpec::new(down, bursts, repeat).or_else(|msg| {
        let (name, what) = msg.split_once(": ").unwrap_or(("", &msg));
        cx.err(f.span(), &format!("{field}.{name}"), what)
    })
}

const RATE_FORMS: &str = "\"unlimited\", { mbit = N }, { series = \"file.cap.csv\", column = \"up_mbit\" }, { mahimahi = \"file\" } or { cellreplay = \"dir\" }";

fn parse_rate(
    cx: &Ctx,
    dir: &str,
    v: &Spanned<toml::Value>,
) -> Result<(Capacity, String), ProfileError> {
    let field = format!("{dir}.rate");
    let span = v.span();
    match v.get_ref() {
        toml::Value::String(s) if s == "unlimited" => Ok((Capacity::Unlimited, "unlimited".into())),
        toml::Value::Table(t) => {
            let keys: Vec<&str> = t.keys().map(String::as_str).collect();
            let num = |k: &str| -> Option<f64> {
                match t.get(k)? {
                    toml::Value::Integer(i) => Some(*i as f64),
                    toml::Value::Float(f) => Some(*f),
                    _ => None,
                }
            };
            match keys.as_slice() {
                ["mbit"] => match num("mbit") {
                    Some(m) if m.is_finite() && m > 0.0 => Ok((
                        Capacity::Constant((m * 1e6).round() as u64),
                        format!("{m} Mbit/s"),
                    )),
                    _ => cx.err(
                        span,
                        &format!("{field}.mbit"),
                        format!("expected a number of Mbit/s > 0, got {}", t["mbit"]),
                    ),
                },
                ["mahimahi"] => {
                    let Some(toml::Value::String(f)) = t.get("mahimahi") else {
                        return cx.err(
                            span,
                            &format!("{field}.mahimahi"),
                            "expected a file name string",
                        );
                    };
                    let path = cx.path(f);
                    let text = read_text(&path).map_err(trace_err)?;
                    let tr = MahimahiTrace::parse(&path, &text).map_err(trace_err)?;
                    Ok((Capacity::Mahimahi(tr), path.display().to_string()))
                }
                _ if t.contains_key("series")
                    && keys.iter().all(|k| *k == "series" || *k == "column") =>
                {
                    let Some(toml::Value::String(f)) = t.get("series") else {
                        return cx.err(
                            span,
                            &format!("{field}.series"),
                            "expected a file name string",
                        );
                    };
                    let column = match t.get("column") {
                        None => format!("{}_mbit", if dir == "uplink" { "up" } else { "down" }),
                        Some(toml::Value::String(c)) => c.clone(),
                        Some(other) => {
                            return cx.err(
                                span,
                                &format!("{field}.column"),
                                format!("expected a column name string, got {other}"),
                            )
                        }
                    };
                    let path = cx.path(f);
                    let text = read_text(&path).map_err(trace_err)?;
                    let s = CapacitySeries::parse(&path, &text, &column).map_err(trace_err)?;
                    Ok((
                        Capacity::Series(s),
                        format!("{} column {column}", path.display()),
                    ))
                }
                _ => cx.err(
                    span,
                    &field,
                    format!("unknown key(s) {}; expected {RATE_FORMS}", keys.join(", ")),
                ),
            }
        }
        other => cx.err(span, &field, format!("expected {RATE_FORMS}, got {other}")),
    }
}

fn parse_queue(cx: &Ctx, dir: &str, v: &Spanned<toml::Value>) -> Result<QueueLimit, ProfileError> {
    let field = format!("{dir}.queue");
    const FORMS: &str = "{ packets = N }, { bytes = N } or \"unlimited\"";
    match v.get_ref() {
        toml::Value::String(s) if s == "unlimited" => Ok(QueueLimit::Unlimited),
        toml::Value::Table(t) if t.len() == 1 => {
            let (k, val) = t.iter().next().expect("one entry");
            let n = match val {
                toml::Value::Integer(i) if *i > 0 => *i as u64,
                _ => {
                    return cx.err(
                        v.span(),
                        &format!("{field}.{k}"),
                        format!("expected an integer > 0, got {val}"),
                    )
                }
            };
            match k.as_str() {
                "packets" => Ok(QueueLimit::Packets(n.min(u32::MAX as u64) as u32)),
                "bytes" => Ok(QueueLimit::Bytes(n)),
                _ => cx.err(
                    v.span(),
                    &field,
                    format!("unknown key `{k}`; expected {FORMS}"),
                ),
            }
        }
        other => cx.err(v.span(), &field, format!("expected {FORMS}, got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS as MS;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const FULL: &str = r#"
name = "MM-D"
description = "test"

[delay]
kind = "timeline"
file = "x.rtt.csv"

[uplink]
rate = { mbit = 60 }
queue = { packets = 800 }
loss = 0.0

[downlink]
rate = { series = "x.cap.csv", column = "down_mbit" }
queue = { bytes = 150000 }
loss = 0.01
drx = { inactivity_ms = 30, wake_period_ms = 40 }
"#;

    fn fixture() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "x.rtt.csv", "t_ms,rtt_ms\n0,20\n100,40\n");
        write(
            d.path(),
            "x.cap.csv",
            "t_s,up_mbit,down_mbit\n0,60,140.5\n1,60,131.2\n",
        );
        d
    }

    #[test]
    fn parses_full_profile_from_formats_doc() {
        let d = fixture();
        let p = Profile::resolve(write(d.path(), "p.toml", FULL).to_str().unwrap()).unwrap();
        assert_eq!(p.name, "MM-D");
        assert_eq!(p.uplink.rate, Capacity::Constant(60_000_000));
        assert_eq!(p.downlink.queue, QueueLimit::Bytes(150_000));
        assert_eq!(p.downlink.drx, Some((30.0, 40.0)));
        assert!(
            matches!(&p.downlink.rate, Capacity::Series(s) if s.bps == vec![140_500_000, 131_200_000])
        );
        // RTT at 50 ms = 30 → one-way 15 ms; offset shifts it
        let mut up = p.pipeline::<u8>(Direction::Uplink, 1, 0);
        assert_eq!(
            up.push(50 * MS, 750, 0).unwrap().0,
            50 * MS + 100_000 + 15 * MS
        );
        let j = p.to_json();
        assert_eq!(j["downlink"]["drx"]["wake_period_ms"], 40.0);
    }

    #[test]
    fn builtins() {
        let u = Profile::resolve("urllc").unwrap();
        assert!(matches!(u.delay, DelaySpec::Fixed { rtt_ms } if rtt_ms == 5.0));
        assert_eq!(u.uplink.rate, Capacity::Constant(2_000_000));
        assert_eq!(u.uplink.queue, QueueLimit::Packets(800));
        let e = Profile::resolve("embb").unwrap();
        assert_eq!(e.downlink.rate, Capacity::Constant(200_000_000));
        let f = Profile::resolve("fixed:12.5ms/unlimited").unwrap();
        assert_eq!(f.uplink.rate, Capacity::Unlimited);
        for bad in [
            "fixed:40/200mbit",
            "fixed:40ms",
            "fixed:40ms/200mbps",
            "fixed:-1ms/2mbit",
            "fixed:1ms/0mbit",
        ] {
            let err = Profile::resolve(bad).unwrap_err().to_string();
            assert!(
                err.contains("expected fixed:<rtt>ms/<rate>mbit"),
                "{bad}: {err}"
            );
        }
        let err = Profile::resolve("/nonexistent/x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not a built-in") && err.contains("No such file"),
            "{err}"
        );
    }

    fn refuse(text: &str) -> String {
        let d = fixture();
        let p = write(d.path(), "p.toml", text);
        Profile::resolve(p.to_str().unwrap())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn refuses_bad_profiles_naming_line_and_field() {
        // (text in FULL, its replacement, what the error must contain)
        let cases: &[(&str, &str, &[&str])] = &[
            (
                "loss = 0.0",
                "los = 0.0",
                &["unknown field `los`", "line 12"],
            ),
            (
                "{ mbit = 60 }",
                "{ kbit = 60 }",
                &["p.toml:10: field `uplink.rate`", "kbit"],
            ),
            (
                "{ mbit = 60 }",
                "\"60mbit\"",
                &["p.toml:10: field `uplink.rate`"],
            ),
            (
                "{ mbit = 60 }",
                "{ mbit = 0 }",
                &["uplink.rate.mbit", "> 0"],
            ),
            (
                "loss = 0.01",
                "loss = 1.5",
                &["p.toml:17: field `downlink.loss`"],
            ),
            (
                "x.rtt.csv",
                "missing.rtt.csv",
                &["missing.rtt.csv:0: field `file`: cannot read"],
            ),
            (
                "\"timeline\"",
                "\"timelime\"",
                &["p.toml:6: field `delay.kind`"],
            ),
            (
                "file = \"x.rtt.csv\"",
                "rtt_ms = 40",
                &["delay.rtt_ms", "not used"],
            ),
            (
                "{ packets = 800 }",
                "{ packets = -3 }",
                &["uplink.queue.packets"],
            ),
            (
                "column = \"down_mbit\"",
                "column = \"down_kbps\"",
                &["x.cap.csv:1: field `down_kbps`"],
            ),
            (
                "[uplink]\n",
                "[uplink]\ndrx = { inactivity_ms = 1, wake_period_ms = 2 }\n",
                &["uplink.drx", "downlink only"],
            ),
            (
                "wake_period_ms = 40",
                "wake_period_ms = 0",
                &["downlink.drx.wake_period_ms"],
            ),
            (
                "kind = \"timeline\"\nfile = \"x.rtt.csv\"",
                "kind = \"fixed\"\nrtt_ms = \"40ms\"",
                &["line 7", "invalid type"],
            ),
        ];
        for (from, to, wanted) in cases {
            let e = refuse(&FULL.replace(from, to));
            assert!(wanted.iter().all(|w| e.contains(w)), "{from} -> {to}: {e}");
        }
    }

    #[test]
    fn bad_trace_inside_profile_names_trace_line() {
        let d = fixture();
        write(d.path(), "x.rtt.csv", "t_ms,rtt_ms\n0,20\n5,30\n3,40\n");
        let p = write(d.path(), "p.toml", FULL);
        let e = Profile::resolve(p.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.rtt.csv:4: field `t_ms`"), "{e}");
    }

    #[test]
    fn faults_parse_run_and_print() {
        let d = fixture();
        let text = FULL.replace(
            "drx = { inactivity_ms = 30, wake_period_ms = 40 }\n",
            "drx = { inactivity_ms = 30, wake_period_ms = 40 }\n\
             faults = { repeat_ms = 10000, down = [{ from_ms = 2000, to_ms = 4000 }], \
             loss_bursts = [{ from_ms = 5000, to_ms = 5500.5, loss = 1.0 }] }\n",
        );
        let p = Profile::resolve(write(d.path(), "f.toml", &text).to_str().unwrap()).unwrap();
        assert!(p.uplink.faults.is_empty());
        let f = &p.downlink.faults;
        assert_eq!(
            f.down,
            vec![Window {
                from: 2000 * MS,
                to: 4000 * MS
            }]
        );
        assert_eq!(f.bursts[0].window.to, 5_500_500_000);
        assert_eq!(f.repeat, Some(10_000 * MS));
        let mut down = p.pipeline::<u8>(Direction::Downlink, 1, 0);
        assert!(down.push(100 * MS, 100, 0).is_ok());
        assert_eq!(
            down.push(2100 * MS, 100, 1).unwrap_err().0.as_str(),
            "drop_outage"
        );
        assert_eq!(
            down.push(5100 * MS, 100, 2).unwrap_err().0.as_str(),
            "drop_burst"
        );
        assert_eq!(
            down.push(12_100 * MS, 100, 3).unwrap_err().0.as_str(),
            "drop_outage"
        );
        let mut up = p.pipeline::<u8>(Direction::Uplink, 1, 0);
        assert!(up.push(2100 * MS, 100, 0).is_ok());
        let j = p.to_json();
        assert_eq!(j["uplink"]["faults"], serde_json::Value::Null);
        assert_eq!(j["downlink"]["faults"]["down"][0]["to_ms"], 4000.0);
        assert_eq!(j["downlink"]["faults"]["loss_bursts"][0]["to_ms"], 5500.5);
        assert_eq!(j["downlink"]["faults"]["repeat_ms"], 10000.0);
    }

    #[test]
    fn refuses_bad_faults_naming_the_entry() {
        let with = |faults: &str| {
            refuse(&FULL.replace("[downlink]\n", &format!("[downlink]\nfaults = {faults}\n")))
        };
        let e = with("{ down = [{ from_ms = 4000, to_ms = 2000 }] }");
        assert!(
            e.contains("p.toml:15: field `downlink.faults.down[0]`: expected to_ms > from_ms"),
            "{e}"
        );
        let e = with("{ down = [{ from_ms = 0, to_ms = 10 }, { from_ms = 5, to_ms = 20 }] }");
        assert!(
            e.contains("`downlink.faults.down[1]`") && e.contains("overlap"),
            "{e}"
        );
        let e = with("{ down = [{ from_ms = -1, to_ms = 10 }] }");
        assert!(e.contains("`downlink.faults.down[0].from_ms`"), "{e}");
        let e = with("{ loss_bursts = [{ from_ms = 0, to_ms = 10, loss = 2 }] }");
        assert!(e.contains("`downlink.faults.loss_bursts[0].loss`"), "{e}");
        let e = with("{ repeat_ms = 5, down = [{ from_ms = 0, to_ms = 10 }] }");
        assert!(e.contains("after repeat_ms"), "{e}");
        let e = with("{ down = [{ from_ms = 0, until_ms = 10 }] }");
        assert!(e.contains("unknown field `until_ms`"), "{e}");
        let e = with("{ outages = [] }");
        assert!(e.contains("unknown field `outages`"), "{e}");
    }

    #[test]
    fn gaussian_and_mahimahi() {
        let d = fixture();
        write(d.path(), "l.up", "1\n2\n");
        let text = FULL
            .replace(
                "kind = \"timeline\"\nfile = \"x.rtt.csv\"",
                "kind = \"gaussian\"\nmean_rtt_ms = 10\ncov = 0.5\nresample_ms = 10",
            )
            .replace("{ mbit = 60 }", "{ mahimahi = \"l.up\" }");
        let p = Profile::resolve(write(d.path(), "g.toml", &text).to_str().unwrap()).unwrap();
        assert!(matches!(p.delay, DelaySpec::Gaussian { cov, .. } if cov == 0.5));
        assert!(matches!(&p.uplink.rate, Capacity::Mahimahi(m) if m.period_ms() == 2));
    }

    fn cellreplay_fixture() -> tempfile::TempDir {
        let d = fixture();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/cellreplay");
        std::fs::create_dir(d.path().join("cr")).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.path().join("cr").join(e.file_name())).unwrap();
        }
        d
    }

    #[test]
    fn cellreplay_rate_replaces_rate_and_queue() {
        let d = cellreplay_fixture();
        let text = FULL
            .replace("rate = { mbit = 60 }\nqueue = { packets = 800 }\n", "rate = { cellreplay = \"cr\" }\n")
            .replace(
                "rate = { series = \"x.cap.csv\", column = \"down_mbit\" }\nqueue = { bytes = 150000 }\n",
                "rate = { cellreplay = \"cr\", side = \"up\", long_to_short_timer_ms = 5 }\n",
            );
        let p = Profile::resolve(write(d.path(), "c.toml", &text).to_str().unwrap()).unwrap();
        let up = p.uplink.cellreplay.as_ref().unwrap();
        assert_eq!((up.side, up.timer_ms), (CellReplaySide::Up, 0));
        let down = p.downlink.cellreplay.as_ref().unwrap();
        assert_eq!((down.side, down.timer_ms), (CellReplaySide::Up, 5));
        let j = p.to_json();
        assert_eq!(j["uplink"]["rate"]["side"], "up");
        assert_eq!(j["uplink"]["rate"]["trains"], 3);
        // up-heavy-pdo: 100 opportunities of 1400 B in 1000 ms = 1.12 Mbit/s
        assert_eq!(j["uplink"]["rate"]["mean_heavy_mbit"], 1.12);
        // the uplink: up-delay-light-pdo's base delay 20 ms at trace time 0, plus the
        // timeline's one-way delay from the [delay] section (RTT 20 ms at 0 → 10 ms)
        let mut pipe = p.pipeline::<u32>(Direction::Uplink, 1, 0);
        assert_eq!(pipe.push(0, 96, 1).unwrap().0, 30 * MS);
    }

    #[test]
    fn cellreplay_rate_refusals_name_the_field_or_the_trace_line() {
        let d = cellreplay_fixture();
        let with = |rate: &str, keep_queue: bool| {
            let mut text = FULL.replace("rate = { mbit = 60 }", &format!("rate = {rate}"));
            if !keep_queue {
                text = text.replace("queue = { packets = 800 }\n", "");
            }
            let p = write(d.path(), "p.toml", &text);
            Profile::resolve(p.to_str().unwrap())
                .unwrap_err()
                .to_string()
        };
        let e = with("{ cellreplay = \"cr\" }", true);
        assert!(e.contains("p.toml:11: field `uplink.queue`"), "{e}");
        let e = with("{ cellreplay = \"cr\", side = \"left\" }", false);
        assert!(e.contains("field `uplink.rate.side`"), "{e}");
        let e = with("{ cellreplay = \"cr\", loop = true }", false);
        assert!(e.contains("field `uplink.rate.loop`"), "{e}");
        let e = with(
            "{ cellreplay = \"cr\", long_to_short_timer_ms = -1 }",
            false,
        );
        assert!(e.contains("long_to_short_timer_ms"), "{e}");
        std::fs::write(
            d.path().join("cr/up-delay-light-pdo"),
            "0 20 0\n100 20 x\n200 20 0\n",
        )
        .unwrap();
        let e = with("{ cellreplay = \"cr\" }", false);
        assert!(e.contains("up-delay-light-pdo:2: field `pdo_ms[0]`"), "{e}");
    }

    #[test]
    fn cellreplay_builtin_replays_both_sides_with_the_offset() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/cellreplay");
        let p = Profile::resolve(&format!("cellreplay:{}", dir.display())).unwrap();
        assert_eq!(
            p.uplink.cellreplay.as_ref().unwrap().side,
            CellReplaySide::Up
        );
        assert_eq!(
            p.downlink.cellreplay.as_ref().unwrap().side,
            CellReplaySide::Down
        );
        // down-delay-light-pdo at trace 250 ms (offset): 18 + 0.5·(18 − 18) = 18 ms;
        // uplink at 250 ms: 24 + 0.5·(20 − 24) = 22 ms
        let mut down = p.pipeline::<u32>(Direction::Downlink, 1, 250 * MS);
        assert_eq!(down.push(0, 96, 1).unwrap().0, 18 * MS);
        let mut up = p.pipeline::<u32>(Direction::Uplink, 1, 750 * MS);
        assert_eq!(up.push(0, 96, 1).unwrap().0, 22 * MS);
        let e = Profile::resolve("cellreplay:/nonexistent")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/up-delay-light-pdo:0: field `file`"),
            "{e}"
        );
    }
}
