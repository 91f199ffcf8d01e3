//! Per-packet decision log (CSV) for the reward-accuracy analysis (NSDI'23
//! Fig. 11): when each packet was steered, its flow and size, the channel, and
//! Algorithm 1's estimated reward and completion times.
//!
//! `t_ms`, `reward_ms`, `c_hbc_ms` and `c_llc_ms` are in milliseconds since this
//! process started (the policy's clock). `t_mono_ns` is the same instant on
//! CLOCK_MONOTONIC, which every network namespace shares, so a row joins the
//! receiving agent's arrival log (`--arrival-log`, arrival_log.rs) on
//! (flow_id, seq): an absolute estimate is `t_mono_ns + (c_x_ms - t_ms) * 1e6`.

use crate::csv_log::CsvLog;
use anyhow::Result;
use dchannel_core::steer::Steered;
use dchannel_core::{Channel, Nanos};
use std::path::Path;

pub const COLUMNS: &str = "t_ms,peer,flow_id,seq,flow,proto,size,payload,channel,outcome,reward_ms,c_hbc_ms,c_llc_ms,llc_queue_bytes,t_mono_ns";

pub struct DecisionLog {
    log: CsvLog,
    /// CLOCK_MONOTONIC (ns) at the agent's epoch (`now` = 0).
    epoch_mono_ns: u64,
}

fn ms(v: f64) -> f64 {
    v / 1e6
}

impl DecisionLog {
    pub fn create(path: &Path, epoch_mono_ns: u64) -> Result<DecisionLog> {
        Ok(DecisionLog {
            log: CsvLog::create(path, "--decision-log", COLUMNS)?,
            epoch_mono_ns,
        })
    }

    /// One line; `sent_on` may differ from the decision when an endpoint was missing.
    pub fn record(&self, now: Nanos, peer: usize, st: &Steered, sent_on: Channel) {
        let (flow, proto, size, payload) = match (&st.key, &st.info) {
            (Some(k), Some(i)) => (k.to_string(), i.proto, i.ip_len, i.payload_len),
            _ => ("-".to_string(), 0, 0, 0),
        };
        let (r, ch, cl) = match st.decision.estimate {
            Some(e) => (
                format!("{:.4}", ms(e.reward)),
                format!("{:.4}", ms(e.c_hbc)),
                format!("{:.4}", ms(e.c_llc)),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        self.log.write_row(format_args!(
            "{:.4},{peer},{},{},{flow},{proto},{size},{payload},{},{},{r},{ch},{cl},{:.0},{}",
            ms(now as f64),
            st.flow_id,
            st.seq,
            sent_on.name(),
            st.decision.outcome.name(),
            st.llc_queue,
            self.epoch_mono_ns + now
        ));
    }

    pub fn flush(&self) {
        self.log.flush();
    }
}
