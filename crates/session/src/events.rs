//! `--events FILE|-`: one JSON object per line for scripts, written and
//! flushed as each event happens: run_started, trial_started, trial_done,
//! result, run_done. Every object has `event` and `time` (RFC 3339 UTC).

//!
//! The same events reach the caller's listener (`caller::scoped`, the
//! Python package's progress callback), from every packet command,
//! whether or not `--events` was given.

use crate::error::{Result, ResultExt};
use serde_json::{json, Value};
use std::io::Write;
use std::time::SystemTime;

pub(crate) use crate::caller::notify;

pub struct EventSink {
    out: Box<dyn Write>,
    /// True when the events go to stdout (the table must then go elsewhere).
    pub to_stdout: bool,
    failed: bool,
}

impl EventSink {
    /// Opens `target`: '-' for stdout, else a file (created or truncated).
    pub fn open(target: &str) -> Result<EventSink> {
        let (out, to_stdout): (Box<dyn Write>, bool) = if target == "-" {
            (Box::new(std::io::stdout()), true)
        } else {
            let file = std::fs::File::create(target).with_context(|| {
                format!("--events {target}: cannot create the file; pass a writable path or '-' for stdout")
            }).kind(crate::error::Kind::Environment)?;
            (Box::new(file), false)
        };
        Ok(EventSink {
            out,
            to_stdout,
            failed: false,
        })
    }

    /// Writes `{"event": name, "time": now, ...fields}` as one line. A
    /// reader that went away (closed pipe) must not stop the measurement:
    /// the first failure is reported and later events are dropped.
    pub fn emit(&mut self, name: &str, fields: Value) {
        if self.failed {
            return;
        }
        // `event` and `time` first, for readers that look at the start of a line.
        let head = json!({
            "event": name,
            "time": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        });
        let mut line = format!("{{\"event\":{},\"time\":{}", head["event"], head["time"]);
        if let Value::Object(fields) = fields {
            for (k, v) in fields {
                line.push_str(&format!(",{}:{}", Value::String(k), v));
            }
        }
        line.push('}');
        if let Err(e) = writeln!(self.out, "{line}").and_then(|_| self.out.flush()) {
            errln!(
                "linerate: warning: --events: {e}; no more events are written (the run goes on)"
            );
            self.failed = true;
        }
    }
}
