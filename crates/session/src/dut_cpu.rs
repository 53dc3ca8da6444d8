//! The DUT's CPU load during each trial, as the Cisco report shows it:
//! total, and caused by traffic (total minus the idle baseline measured
//! before the first trial).
//!
//! Sources:
//! - the lab: the DUT CPUs' counters in /proc/stat (system + irq + softirq
//!   time: where the kernel forwards packets; user time is left out, so
//!   other programs on the machine count only through their system calls;
//!   a user-space data path's own processes, pinned to the DUT CPU, add
//!   their user time from /proc/<pid>/stat),
//!   sampled when the trial starts sending and when it stops;
//! - an external DUT: a command the user gives (`--dut-cpu-cmd`, e.g. over
//!   ssh) printing a percentage, run towards the end of each trial's
//!   sending time; or SNMP (`--dut-snmp COMMUNITY@HOST`): the average of
//!   HOST-RESOURCES-MIB hrProcessorLoad over the device's processors, read
//!   with `snmpwalk` (a one-minute average on most agents: use trials of a
//!   minute or more).

use crate::error::{bail, err, Result, ResultExt};
use linerate_results::DutCpu;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// hrProcessorLoad (HOST-RESOURCES-MIB), one value per processor.
const HR_PROCESSOR_LOAD: &str = "1.3.6.1.2.1.25.3.3.1.2";
/// How long the lab's idle baseline is measured.
const BASELINE: Duration = Duration::from_secs(1);

/// Where the load comes from.
enum Probe {
    /// /proc/stat on these CPUs, plus the user time of these processes (a
    /// user-space data path pinned to them).
    Lab { cpus: Vec<usize>, pids: Vec<u32> },
    /// A shell command printing one percentage.
    Command { command: String },
    /// `snmpwalk` of hrProcessorLoad; the average of the values.
    Snmp { argv: Vec<String> },
}

/// Measures the DUT's CPU load around trials.
pub struct DutCpuMeter {
    probe: Probe,
    /// Load with no traffic, percent.
    baseline: f64,
    /// One phrase for the report: what was measured and the baseline.
    pub source: String,
}

/// A sample in progress: finished with [`Pending::finish`].
pub struct Pending {
    handle: JoinHandle<Result<Load>>,
    baseline: f64,
}

/// One reading of the DUT's CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Load {
    /// Busy share, percent.
    busy: f64,
    /// The lab: the share the hypervisor gave to other guests (steal),
    /// percent; None for an external DUT.
    stolen: Option<f64>,
}

impl Pending {
    /// The trial's load; a failed sample gives None and a warning (the
    /// trial's measurement itself is never lost over it).
    pub fn finish(self) -> Option<DutCpu> {
        match self.handle.join() {
            Ok(Ok(load)) => Some(DutCpu {
                total_pct: round1(load.busy),
                traffic_pct: round1((load.busy - self.baseline).max(0.0)),
                stolen_pct: load.stolen.map(round1),
            }),
            Ok(Err(e)) => {
                errln!(
                    "\nlinerate: warning: DUT CPU not measured in this trial: {}",
                    crate::exit::one_line(&e)
                );
                None
            }
            Err(_) => None,
        }
    }
}

/// Where an external DUT's CPU load comes from (`--dut-cpu-cmd`,
/// `--dut-snmp`); a lab's is read from its CPU counters instead.
#[derive(Debug, Clone, Default)]
pub struct DutCpuPlan {
    /// A command printing the load in percent, run towards the end of each trial.
    pub dut_cpu_cmd: Option<String>,
    /// SNMP (HOST-RESOURCES-MIB hrProcessorLoad) as COMMUNITY@HOST.
    pub dut_snmp: Option<String>,
}

/// The meter every packet command records the DUT's CPU load with: on a
/// lab, the DUT CPU's counters (plus the user time of a scenario's data
/// path, `data_path_pids`); on an external DUT, `--dut-cpu-cmd` or
/// `--dut-snmp` when given. None when nothing measures it: a lab whose
/// placement gave the DUT no CPU of its own (the run goes on and says why
/// the column is missing), or an external DUT without either option.
pub fn meter_for(
    bed: &crate::ports::TestBed,
    external: &DutCpuPlan,
    data_path_pids: &[u32],
    stop: &AtomicBool,
) -> Result<Option<DutCpuMeter>> {
    let Some(p) = &bed.placement else {
        return DutCpuMeter::external(
            external.dut_cpu_cmd.as_deref(),
            external.dut_snmp.as_deref(),
        );
    };
    match DutCpuMeter::lab(&p.dut_cpus, p.shared_core, data_path_pids, stop) {
        Ok(m) => Ok(Some(m)),
        Err(e) => {
            errln!(
                "linerate: note: DUT CPU load not measured: {}",
                crate::exit::one_line(&e)
            );
            Ok(None)
        }
    }
}

impl DutCpuMeter {
    /// The lab's DUT on `cpus` (from placement); measures the idle baseline,
    /// cut short once `stop` is set (the run is ending: no trial will use
    /// it). `pids`: processes of a user-space data path (boringtun,
    /// charon) pinned to the DUT CPUs: their user time is the DUT's work
    /// too.
    pub fn lab(
        cpus: &[usize],
        shared_core: bool,
        pids: &[u32],
        stop: &AtomicBool,
    ) -> Result<DutCpuMeter> {
        if cpus.is_empty() {
            bail!(Environment, "the lab's DUT has no CPU of its own (placement failed), so its CPU load cannot be told from the tester's");
        }
        let probe = Probe::Lab {
            cpus: cpus.to_vec(),
            pids: pids.to_vec(),
        };
        let baseline = probe.measure_until(BASELINE, stop)?.busy;
        let list = cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let shared = if shared_core {
            " (shared with the tester: its share is included)"
        } else {
            ""
        };
        Ok(DutCpuMeter {
            probe,
            baseline,
            source: format!(
                "system + irq + softirq time of CPU {list}{shared} from /proc/stat{} over each trial's sending time; idle baseline {baseline:.1} % before the first trial; stolen: the CPU's steal time (given by the hypervisor to other guests)",
                if pids.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", plus the user time of the data path's process{} {} (pinned there)",
                        if pids.len() > 1 { "es" } else { "" },
                        pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
                    )
                }
            ),
        })
    }

    /// An external DUT, from `--dut-cpu-cmd` or `--dut-snmp`.
    pub fn external(command: Option<&str>, snmp: Option<&str>) -> Result<Option<DutCpuMeter>> {
        let (probe, what) = match (command, snmp) {
            (Some(c), _) => {
                if c.trim().is_empty() {
                    bail!(BadInput, "--dut-cpu-cmd is empty: give a command printing the DUT's CPU load in percent, e.g. \"ssh r1 cat /run/cpu-load\"");
                }
                (
                    Probe::Command {
                        command: c.to_string(),
                    },
                    format!("'{c}' run towards the end of each trial"),
                )
            }
            (None, Some(s)) => {
                let (community, host) = s.split_once('@').ok_or_else(|| {
                    err!(
                        BadInput,
                        "--dut-snmp '{s}': write it as COMMUNITY@HOST, e.g. public@192.0.2.1"
                    )
                })?;
                if community.is_empty() || host.is_empty() {
                    bail!(
                        BadInput,
                        "--dut-snmp '{s}': write it as COMMUNITY@HOST, e.g. public@192.0.2.1"
                    );
                }
                if which("snmpwalk").is_none() {
                    bail!(
                        Environment,
                        "--dut-snmp needs snmpwalk: install it with 'apt-get install snmp'"
                    );
                }
                let argv = [
                    "snmpwalk",
                    "-v2c",
                    "-c",
                    community,
                    "-Oqv",
                    host,
                    HR_PROCESSOR_LOAD,
                ]
                .map(str::to_string)
                .to_vec();
                (
                    Probe::Snmp { argv },
                    format!("SNMP hrProcessorLoad of {host}, averaged over its processors, read towards the end of each trial"),
                )
            }
            (None, None) => return Ok(None),
        };
        let baseline = probe
            .read_now()
            .context("measuring the DUT's idle CPU load before the first trial")?
            .busy;
        Ok(Some(DutCpuMeter {
            probe,
            baseline,
            source: format!("{what}; idle baseline {baseline:.1} % before the first trial"),
        }))
    }

    /// Starts sampling a trial that sends for `sending`.
    pub fn begin(&self, sending: Duration) -> Pending {
        let probe = self.probe.clone_probe();
        let handle = std::thread::spawn(move || match &probe {
            Probe::Lab { .. } => probe.measure_over(sending),
            // The device's own figure is an average over its last seconds:
            // read it while the traffic still runs.
            _ => {
                std::thread::sleep(sending.mul_f64(0.9));
                probe.read_now()
            }
        });
        Pending {
            handle,
            baseline: self.baseline,
        }
    }
}

impl Probe {
    fn clone_probe(&self) -> Probe {
        match self {
            Probe::Lab { cpus, pids } => Probe::Lab {
                cpus: cpus.clone(),
                pids: pids.clone(),
            },
            Probe::Command { command } => Probe::Command {
                command: command.clone(),
            },
            Probe::Snmp { argv } => Probe::Snmp { argv: argv.clone() },
        }
    }

    /// Lab: the busy and stolen shares over `period` from two /proc/stat
    /// readings.
    fn measure_over(&self, period: Duration) -> Result<Load> {
        self.measure_until(period, &AtomicBool::new(false))
    }

    /// [`measure_over`](Self::measure_over), over less than `period` once
    /// `stop` is set: a Ctrl-C during the baseline stops the run at once.
    fn measure_until(&self, period: Duration, stop: &AtomicBool) -> Result<Load> {
        let Probe::Lab { cpus, pids } = self else {
            return self.read_now();
        };
        let before = CpuTimes::read(cpus, pids)?;
        let end = Instant::now() + period;
        while !stop.load(Ordering::Relaxed) {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
        let after = CpuTimes::read(cpus, pids)?;
        Ok(Load {
            busy: after.busy_share_since(&before) * 100.0,
            stolen: Some(after.stolen_share_since(&before) * 100.0),
        })
    }

    /// External: the device's figure now.
    fn read_now(&self) -> Result<Load> {
        let busy = |busy| Load { busy, stolen: None };
        match self {
            Probe::Lab { .. } => self.measure_over(Duration::from_millis(200)),
            Probe::Command { command } => {
                let out = run(&["sh", "-c", command])?;
                percentages(&out).first().copied().map(busy).ok_or_else(|| {
                    err!(
                        Failed,
                        "--dut-cpu-cmd printed no percentage: '{}'",
                        out.trim()
                    )
                })
            }
            Probe::Snmp { argv } => {
                let args: Vec<&str> = argv.iter().map(String::as_str).collect();
                let out = run(&args)?;
                let values = percentages(&out);
                if values.is_empty() {
                    bail!(
                        Failed,
                        "snmpwalk returned no hrProcessorLoad value: '{}'",
                        out.trim()
                    );
                }
                Ok(busy(values.iter().sum::<f64>() / values.len() as f64))
            }
        }
    }
}

fn run(argv: &[&str]) -> Result<String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", argv[0]))?;
    if !out.status.success() {
        bail!(
            Failed,
            "'{}' failed: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every number in `text` (a trailing % allowed), in order: "CPU 37%" and
/// "37.5" both give 37.5-like values.
fn percentages(text: &str) -> Vec<f64> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '=' || c == ':')
        .filter_map(|w| w.trim_end_matches('%').parse::<f64>().ok())
        .filter(|v| v.is_finite() && (0.0..=100.0).contains(v))
        .collect()
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// utime (field 14) of a /proc/<pid>/stat line, in clock ticks as
/// /proc/stat counts; the fields are counted after the command name's `)`,
/// which may itself hold spaces.
fn process_user_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(11)?.parse().ok()
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Summed /proc/stat jiffies of some CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct CpuTimes {
    busy: u64,
    /// Steal: time the hypervisor ran other guests on this virtual CPU.
    stolen: u64,
    total: u64,
}

impl CpuTimes {
    fn read(cpus: &[usize], pids: &[u32]) -> Result<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        let mut t = CpuTimes::parse(&text, cpus)?;
        for &pid in pids {
            // A daemon that died adds nothing (the tunnel check then fails).
            if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                t.busy = t
                    .busy
                    .saturating_add(process_user_ticks(&stat).unwrap_or(0));
            }
        }
        Ok(t)
    }

    /// Fields of "cpuN": user nice system idle iowait irq softirq steal
    /// (guest time is already inside user). Busy = system + irq + softirq;
    /// the total includes steal, so busy and stolen are shares of the
    /// same wall-clock time.
    fn parse(text: &str, cpus: &[usize]) -> Result<CpuTimes> {
        let mut sum = CpuTimes::default();
        for &cpu in cpus {
            let label = format!("cpu{cpu}");
            let line = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(label.as_str()))
                .ok_or_else(|| err!(Failed, "/proc/stat has no line for CPU {cpu}"))?;
            let v: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|f| f.parse().ok())
                .collect();
            if v.len() < 8 {
                bail!(
                    Failed,
                    "/proc/stat line for CPU {cpu} has {} fields",
                    v.len()
                );
            }
            // Saturating: counters near u64::MAX (a corrupt or hostile
            // line) overflowed, a panic in a debug build.
            let busy = [v[2], v[5], v[6]]
                .iter()
                .fold(0u64, |a, &b| a.saturating_add(b));
            let total = v[..8].iter().fold(0u64, |a, &b| a.saturating_add(b));
            sum.busy = sum.busy.saturating_add(busy);
            sum.stolen = sum.stolen.saturating_add(v[7]);
            sum.total = sum.total.saturating_add(total);
        }
        Ok(sum)
    }

    fn busy_share_since(&self, before: &CpuTimes) -> f64 {
        Self::share(self.busy.saturating_sub(before.busy), self, before)
    }

    fn stolen_share_since(&self, before: &CpuTimes) -> f64 {
        Self::share(self.stolen.saturating_sub(before.stolen), self, before)
    }

    fn share(part: u64, now: &CpuTimes, before: &CpuTimes) -> f64 {
        let total = now.total.saturating_sub(before.total);
        if total == 0 {
            return 0.0;
        }
        part as f64 / total as f64
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 0 20 300 0 0 5 0 0 0
cpu0 5 0 10 150 0 0 2 0 0 0
cpu1 5 0 10 150 0 1 3 4 0 0
intr 1 2 3
";

    #[test]
    fn proc_stat_busy_counts_system_irq_and_softirq() {
        let t = CpuTimes::parse(STAT, &[1]).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                busy: 14,
                stolen: 4,
                total: 173
            }
        );
        let both = CpuTimes::parse(STAT, &[0, 1]).unwrap();
        assert_eq!(both.busy, 26);
        assert!(CpuTimes::parse(STAT, &[7]).is_err());
        assert_eq!(
            process_user_ticks("42 (charon x) S 1 42 42 0 -1 4194560 100 0 0 0 350 20 0 0"),
            Some(350)
        );
        assert_eq!(process_user_ticks("garbage"), None);
        let later = CpuTimes {
            busy: t.busy + 75,
            stolen: t.stolen + 5,
            total: t.total + 100,
        };
        assert!((later.busy_share_since(&t) - 0.75).abs() < 1e-12);
        // Steal is a share of the same time: 5 of 100 ticks.
        assert!((later.stolen_share_since(&t) - 0.05).abs() < 1e-12);
        assert_eq!(t.busy_share_since(&t), 0.0);
        assert_eq!(t.stolen_share_since(&t), 0.0);
    }

    #[test]
    fn percentages_are_found_in_device_output() {
        assert_eq!(percentages("37%"), [37.0]);
        assert_eq!(
            percentages("CPU utilization for five seconds: 99%/98%; one minute: 12%"),
            [12.0]
        );
        assert_eq!(percentages("12\n30\n"), [12.0, 30.0]);
        assert!(percentages("busy").is_empty());
        assert!(percentages("250").is_empty());
    }

    #[test]
    fn a_command_gives_total_and_traffic_share() {
        let meter = DutCpuMeter::external(Some("echo 42.5%"), None)
            .unwrap()
            .unwrap();
        assert_eq!(meter.baseline, 42.5);
        let sample = meter.begin(Duration::from_millis(10)).finish().unwrap();
        assert_eq!(sample.total_pct, 42.5);
        assert_eq!(sample.traffic_pct, 0.0);
        assert_eq!(
            sample.stolen_pct, None,
            "a device's own figure has no steal time"
        );
        assert!(DutCpuMeter::external(Some("echo none"), None).is_err());
        assert!(DutCpuMeter::external(None, Some("nohost")).is_err());
        assert!(DutCpuMeter::external(None, None).unwrap().is_none());
    }

    #[test]
    fn the_lab_probe_reads_this_machines_counters() {
        let meter = DutCpuMeter::lab(&[0], false, &[], &AtomicBool::new(false)).unwrap();
        assert!((0.0..=100.0).contains(&meter.baseline));
        let sample = meter.begin(Duration::from_millis(100)).finish().unwrap();
        assert!((0.0..=100.0).contains(&sample.total_pct));
        // The lab also says how much the hypervisor took (0 on bare metal).
        let stolen = sample.stolen_pct.expect("the lab measures steal time");
        assert!((0.0..=100.0).contains(&stolen), "{stolen}");
        assert!(DutCpuMeter::lab(&[], false, &[], &AtomicBool::new(false)).is_err());
    }
}
