//! The results database on real runs in labs the tests make: kill -9 in
//! the middle of a search loses no finished trial; show, compare, export
//! and report work on stored runs; the exported JSON follows
//! schema/run.schema.json; the HTML report renders in headless Chromium
//! with its charts. Needs root (and Chromium for the rendering check);
//! run with --test-threads=1.

mod common;

use common::*;
use nix::sys::signal::Signal;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A scratch directory for one test's database and files, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `linerate export RUN --json --db DB`, parsed.
fn export_json(db: &str, run: &str) -> Value {
    let r = linerate(&["export", run, "--json", "--db", db]);
    assert_eq!(r.code, 0, "{}", r.dump());
    serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("export is not JSON: {e}\n{}", r.stdout))
}

/// Every violation of schema/run.schema.json, one per line ("" when valid).
fn schema_violations(doc: &Value) -> String {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schema/run.schema.json"
    ))
    .expect("schema/run.schema.json");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(doc)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The (tx, rx) counts of each finished trial the progress lines show.
fn printed_trials(stderr: &str) -> Vec<(u64, u64)> {
    let num = |s: &str| s.replace(',', "").parse::<u64>().unwrap();
    stderr
        .lines()
        .filter_map(|l| {
            let (_, done) = l
                .split_once("pass: tx ")
                .or_else(|| l.split_once("FAIL: tx "))?;
            let mut w = done.split_whitespace();
            let tx = num(w.next()?);
            let rx = num(w.nth(1)?);
            Some((tx, rx))
        })
        .collect()
}

/// (tx, rx) of each stored trial, in the order run.
fn stored_trials(doc: &Value) -> Vec<(u64, u64)> {
    doc["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (u(&t["result"], "tx_frames"), u(&t["result"], "rx_frames")))
        .collect()
}

#[test]
fn kill_9_mid_search_keeps_every_finished_trial() {
    let test = "kill_9_mid_search_keeps_every_finished_trial";
    if !root_or_skip(test) {
        return;
    }
    let (lab, _guard) = lab_up("k9");
    let dir = TempDir::new("k9");
    let db = dir.file("results.sqlite");
    let spawned = Spawned::start(&[
        "rfc2544",
        "--lab",
        "--lab-name",
        &lab,
        "--db",
        &db,
        "--sizes",
        "64,1518",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--dut-name",
        "lab router",
        "--dut-firmware",
        "test",
    ]);
    // Wait until the database holds at least two trials.
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "fewer than 2 trials stored after 60 s:\n{}",
            spawned.stderr_now()
        );
        if Path::new(&db).exists() {
            let r = linerate(&["export", "1", "--json", "--db", &db]);
            if r.code == 0 {
                let doc: Value = serde_json::from_str(&r.stdout).unwrap();
                if doc["trials"].as_array().unwrap().len() >= 2 {
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    signal(spawned.pid, Signal::SIGKILL);
    let run = spawned.finish(Duration::from_secs(10));
    assert_eq!(run.code, 128 + 9, "{}", run.dump());

    let printed = printed_trials(&run.stderr);
    let doc = export_json(&db, "1");
    let stored = stored_trials(&doc);
    // Stored before shown: every trial printed is in the database, in
    // order, with its counts; at most one more (stored, not yet printed).
    assert!(stored.len() >= 2, "{doc}");
    assert!(
        stored.len() == printed.len() || stored.len() == printed.len() + 1,
        "printed {printed:?}, stored {stored:?}"
    );
    assert_eq!(
        &stored[..printed.len()],
        &printed[..],
        "printed and stored counts differ"
    );
    for t in doc["trials"].as_array().unwrap() {
        assert_trial_consistent(&t["result"]);
    }
    assert_eq!(doc["run"]["status"], "died", "{}", doc["run"]);
    assert_eq!(schema_violations(&doc), "");

    let runs = linerate(&["runs", "--db", &db]);
    assert_eq!(runs.code, 0, "{}", runs.dump());
    let line = runs.stdout.lines().nth(1).expect("one run listed");
    assert!(
        line.contains("incomplete (process died)"),
        "{}",
        runs.stdout
    );
    assert!(line.contains("lab router test"), "{}", runs.stdout);
    // `show` prints what was kept, and says it is incomplete.
    let show = linerate(&["show", "1", "--db", &db]);
    assert_eq!(show.code, 0, "{}", show.dump());
    assert!(show.stdout.contains("incomplete"), "{}", show.stdout);
    // The lab made for this test is removed by its guard (the killed
    // process could not); nothing else to clean.
}

/// The Frames/s values of the throughput row in a printed table.
fn table_fps(table: &str) -> Vec<String> {
    let row = table
        .lines()
        .find(|l| l.trim_end().ends_with("Frames/s"))
        .unwrap_or_else(|| panic!("no Frames/s row in\n{table}"));
    row.split_whitespace()
        .filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))
        // As printed, with the tester-limited mark: the HTML shows it too.
        .map(str::to_string)
        .collect()
}

#[test]
fn stored_runs_show_compare_export_and_report() {
    let test = "stored_runs_show_compare_export_and_report";
    if !root_or_skip(test) {
        return;
    }
    let (lab, _guard) = lab_up("st");
    let dir = TempDir::new("st");
    let db = dir.file("results.sqlite");
    let events = dir.file("events.jsonl");
    let mut tables = Vec::new();
    for firmware in ["A", "B"] {
        let run = linerate(&[
            "rfc2544",
            "--lab",
            "--lab-name",
            &lab,
            "--db",
            &db,
            "--sizes",
            "64,512",
            "--trial-duration",
            "1s",
            "--straggler-wait",
            "500ms",
            "--resolution",
            "20%",
            "--dut-name",
            "lab router",
            "--dut-firmware",
            firmware,
            "--events",
            &events,
        ]);
        assert_eq!(run.code, 0, "{}", run.dump());
        tables.push(run.stdout);
    }
    // The events of the last run: one JSON object per line, in order.
    let text = std::fs::read_to_string(&events).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v["event"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("run_started"),
        "{text}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("run_done"), "{text}");
    assert_eq!(kinds.iter().filter(|k| *k == "result").count(), 2, "{text}");
    let started = kinds.iter().filter(|k| *k == "trial_started").count();
    let done = kinds.iter().filter(|k| *k == "trial_done").count();
    assert_eq!(started, done, "{text}");

    // A trial run is stored too; its first frames at port B go to a pcap file.
    let pcap = dir.file("trial.pcap");
    let trial = linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        &lab,
        "--db",
        &db,
        "--frame-size",
        "128",
        "--rate",
        "1000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--engine",
        "af_packet",
        "--pcap",
        &pcap,
        "--pcap-frames",
        "10",
    ]);
    assert_eq!(trial.code, 0, "{}", trial.dump());
    check_pcap(&pcap, 10, 128);

    let runs = linerate(&["runs", "--db", &db]);
    assert_eq!(runs.code, 0, "{}", runs.dump());
    assert_eq!(runs.stdout.lines().count(), 4, "{}", runs.stdout);
    assert_eq!(
        runs.stdout.matches("complete").count(),
        3,
        "{}",
        runs.stdout
    );

    // show: the same table as the run printed, from the stored data.
    for (id, printed) in ["1", "2"].iter().zip(&tables) {
        let show = linerate(&["show", id, "--db", &db]);
        assert_eq!(show.code, 0, "{}", show.dump());
        assert!(
            show.stdout.contains(printed.as_str()),
            "run {id}: printed\n{printed}\nshown\n{}",
            show.stdout
        );
    }
    let show = linerate(&["show", "3", "--db", &db]);
    assert!(show.stdout.contains(&trial.stdout), "{}", show.stdout);

    // compare: both runs, the differences in % against run 1.
    let cmp = linerate(&["compare", "1", "2", "--db", &db]);
    assert_eq!(cmp.code, 0, "{}", cmp.dump());
    assert!(
        cmp.stdout.contains("lab router A") && cmp.stdout.contains("lab router B"),
        "{}",
        cmp.stdout
    );
    let docs = [export_json(&db, "1"), export_json(&db, "2")];
    let diff_row = cmp
        .stdout
        .lines()
        .find(|l| l.contains("vs run 1"))
        .expect("a difference row");
    for (i, size) in [64, 512].iter().enumerate() {
        let fps = |d: &Value| f(&d["report"]["results"][i], "throughput_fps");
        assert_eq!(u(&docs[0]["report"]["results"][i], "frame_size"), *size);
        let (base, other) = (fps(&docs[0]), fps(&docs[1]));
        let pct = (other - base) / base * 100.0;
        let shown = if base <= 0.0 {
            "-".to_string() // no rate passed in the baseline: no share to give
        } else if pct.abs() < 0.05 {
            "0.0 %".to_string()
        } else {
            format!("{pct:+.1} %")
        };
        assert!(diff_row.contains(&shown), "expected {shown} in {diff_row}");
    }
    // A trial run has no throughput to compare: a one-line error, exit 2.
    assert_bad_input(&linerate(&["compare", "1", "3", "--db", &db]));
    assert_bad_input(&linerate(&["show", "99", "--db", &db]));
    assert_bad_input(&linerate(&["show", "x", "--db", &db]));

    // export --json: valid against the schema, for every kind of run.
    for id in ["1", "2", "3"] {
        let doc = export_json(&db, id);
        assert_eq!(schema_violations(&doc), "", "run {id}");
        assert_eq!(doc["run"]["status"], "complete");
    }
    // export --csv: one row per size, the same numbers as the JSON.
    let csv = linerate(&["export", "1", "--csv", "--db", &db]);
    assert_eq!(csv.code, 0, "{}", csv.dump());
    let rows: Vec<Vec<&str>> = csv
        .stdout
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 2, "{}", csv.stdout);
    for (i, row) in rows.iter().enumerate() {
        let json_fps = f(&docs[0]["report"]["results"][i], "throughput_fps");
        assert_eq!(row[3].parse::<f64>().unwrap(), json_fps, "{}", csv.stdout);
    }
    let trials_csv = linerate(&["export", "1", "--csv", "--trials", "--db", &db]);
    let stored = docs[0]["trials"].as_array().unwrap().len();
    assert_eq!(
        trials_csv.stdout.lines().count(),
        stored + 1,
        "{}",
        trials_csv.stdout
    );

    // report --html: rendered by Chromium, what a reader sees.
    let html = dir.file("report.html");
    let r = linerate(&["report", "1", "--html", &html, "--db", &db]);
    assert_eq!(r.code, 0, "{}", r.dump());
    check_rendered(&html, &table_fps(&tables[0]), dir.file("report.png"));
}

/// Renders `html` in headless Chromium and checks what a reader sees: the
/// table's values in the DOM after rendering, the charts' SVG elements,
/// and coloured chart marks in the screenshot.
fn check_rendered(html: &str, values: &[String], png: String) {
    let chromium = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(chromium) = chromium else {
        skip("(chromium is not installed; scripts/setup.sh installs it): rendering the HTML report in a browser");
        return;
    };
    let url = format!("file://{html}");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
    ];
    let dom = run_program(
        chromium,
        &[&common[..], &["--dump-dom", &url]].concat(),
        Duration::from_secs(60),
    );
    assert_eq!(dom.code, 0, "{}", dom.dump());
    let dom = dom.stdout;
    // The lab measures the DUT's CPU, so its chart is there too.
    assert_eq!(
        dom.matches("<svg").count(),
        5,
        "fps, Mbps, loss, DUT CPU and latency charts"
    );
    assert!(dom.contains("DUT CPU load against offered load"));
    assert!(dom.matches("<circle").count() >= 4, "measured points");
    assert!(dom.contains("<polyline"), "the line-rate curve");
    for v in values {
        assert!(
            dom.contains(&format!(">{v}</td>")),
            "table value {v} not in the rendered DOM"
        );
    }

    let shot = format!("--screenshot={png}");
    let r = run_program(
        chromium,
        &[
            &common[..],
            &[shot.as_str(), "--window-size=1200,3200", &url],
        ]
        .concat(),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, 0, "{}", r.dump());
    let decoder = png::Decoder::new(std::fs::File::open(&png).expect("screenshot written"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.line_size / info.width as usize;
    assert!(channels >= 3, "{info:?}");
    let (mut ink, mut colour) = (0usize, 0usize);
    for px in buf[..info.buffer_size()].chunks(channels) {
        let (r, g, b) = (px[0] as i32, px[1] as i32, px[2] as i32);
        if r < 240 || g < 240 || b < 240 {
            ink += 1;
        }
        // Text and tables are grey; only the charts' marks are coloured.
        if r.max(g).max(b) - r.min(g).min(b) > 80 {
            colour += 1;
        }
    }
    let total = (info.width * info.height) as usize;
    eprintln!(
        "screenshot {}x{}: {ink} non-white pixels, {colour} coloured",
        info.width, info.height
    );
    assert!(
        ink > total / 100,
        "the page looks blank: {ink} of {total} pixels not white"
    );
    assert!(
        colour > 3000,
        "the charts' marks are not drawn: {colour} coloured pixels"
    );
}

/// The pcap file holds `frames` records (Ethernet, ns timestamps), most of
/// them linerate test frames of `frame_size` bytes (FCS not captured).
fn check_pcap(path: &str, frames: usize, frame_size: usize) {
    let b = std::fs::read(path).expect("pcap written");
    let word = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!(word(0), 0xa1b2_3c4d, "pcap magic (ns)");
    assert_eq!(word(20), 1, "linktype Ethernet");
    let (mut at, mut records, mut test_frames) = (24, 0, 0);
    let mut last_ts = 0u64;
    while at < b.len() {
        let (sec, ns, kept, orig) = (
            word(at),
            word(at + 4),
            word(at + 8) as usize,
            word(at + 12) as usize,
        );
        assert!(
            ns < 1_000_000_000 && kept == orig && at + 16 + kept <= b.len(),
            "bad record at {at}"
        );
        let ts = sec as u64 * 1_000_000_000 + ns as u64;
        assert!(ts >= last_ts, "timestamps go back");
        last_ts = ts;
        let f = &b[at + 16..at + 16 + kept];
        // IPv4 (0x0800), UDP (17), destination port 19538.
        if f[12..14] == [8, 0] && f[23] == 17 && u16::from_be_bytes([f[36], f[37]]) == 19538 {
            assert_eq!(orig, frame_size - 4, "test frame length without FCS");
            test_frames += 1;
        }
        records += 1;
        at += 16 + kept;
    }
    assert_eq!(records, frames, "frames sampled");
    assert!(
        test_frames >= frames - 2,
        "{test_frames} test frames of {records}"
    );
}

#[test]
fn database_problems_are_one_line_errors() {
    let dir = TempDir::new("bad");
    // Reading commands never create a database.
    let missing = dir.file("missing.sqlite");
    for args in [
        vec!["runs", "--db", &missing],
        vec!["show", "1", "--db", &missing],
        vec!["export", "1", "--json", "--db", &missing],
    ] {
        let r = linerate(&args);
        assert_bad_input(&r);
        assert!(r.stderr.contains("no results database"), "{}", r.dump());
    }
    assert!(!Path::new(&missing).exists());
    // A file that is not a database, and a database that cannot be made:
    // refused before anything is measured (no root needed to get there).
    let junk = dir.file("junk.sqlite");
    std::fs::write(
        &junk,
        "not a database, just text that is long enough to be read",
    )
    .unwrap();
    let r = linerate(&["runs", "--db", &junk]);
    assert_bad_input(&r);
    assert!(r.stderr.contains("--db"), "{}", r.dump());
    let r = linerate(&[
        "rfc2544",
        "--lab",
        "--db",
        "/proc/linerate/results.sqlite",
        "--sizes",
        "64",
    ]);
    assert_bad_input(&r);
    assert!(r.stderr.contains("--no-db"), "{}", r.dump());
    // --db and --no-db together: a usage error.
    let empty = dir.file("unused.sqlite");
    let r = linerate(&[
        "trial",
        "--lab",
        "--db",
        &empty,
        "--no-db",
        "--frame-size",
        "64",
        "--rate",
        "1fps",
    ]);
    assert_eq!(r.code, 2, "--db and --no-db conflict: {}", r.dump());
}

/// A database deleted while a run writes to it is noticed: no "stored as
/// run N" for a run that is gone, a non-zero exit, and the --json file
/// named as the record.
#[test]
fn a_database_deleted_during_a_run_is_reported_not_claimed() {
    if !root_or_skip("a_database_deleted_during_a_run_is_reported_not_claimed") {
        return;
    }
    let (ns, _guard) = back_to_back("dd", 1500);
    let dir = TempDir::new("deleted");
    let db = dir.file("del.sqlite");
    let json = dir.file("del.json");
    let doomed = db.clone();
    let deleter = std::thread::spawn(move || {
        // The run's row is written when its trial starts (ARP first).
        let start = Instant::now();
        while !Path::new(&doomed).exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(1500));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{doomed}{suffix}"));
        }
    });
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&[
        "--frame-size",
        "64",
        "--rate",
        "1000fps",
        "--duration",
        "4s",
        "--straggler-wait",
        "200ms",
        "--db",
        &db,
        "--json",
        &json,
    ]);
    let run = linerate_in(&ns, &args);
    deleter.join().unwrap();
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(!run.stderr.contains("stored as run"), "{}", run.dump());
    assert!(
        run.stderr.contains("deleted or replaced") && run.stderr.contains("del.json"),
        "{}",
        run.dump()
    );
    let t = read_json(Path::new(&json));
    assert_eq!(u(&t, "rx_frames"), 4_000, "{t}");
}

/// Reading commands need no write access: as nobody, on root's database
/// in a directory nobody cannot write, `runs`, `show`, `export` work.
#[test]
fn stored_runs_are_read_without_write_access() {
    if !root_or_skip("stored_runs_are_read_without_write_access") {
        return;
    }
    let (ns, _guard) = back_to_back("ro", 1500);
    // Under /tmp: nobody must be able to reach it.
    let dir = std::env::temp_dir().join(format!("lr-store-ro-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = TempDir(dir);
    let db = dir.file("ro.sqlite");
    let (run, _) = b2b_trial(&ns, &["--frame-size", "64", "--db", &db], 1000);
    assert!(run.stderr.contains("stored as run 1"), "{}", run.dump());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    for args in [
        vec!["runs", "--db", &db],
        vec!["show", "last", "--db", &db],
        vec!["export", "1", "--json", "--db", &db],
    ] {
        let mut full = vec!["--reuid=65534", "--regid=65534", "--clear-groups", LINERATE];
        full.extend_from_slice(&args);
        let r = run_program("setpriv", &full, RUN_LIMIT);
        assert_eq!(r.code, 0, "{args:?} as nobody: {}", r.dump());
        assert!(!r.stdout.is_empty(), "{args:?}: {}", r.dump());
    }
    // Nothing was written: no file nobody made.
    for entry in std::fs::read_dir(&dir.0).unwrap() {
        use std::os::unix::fs::MetadataExt;
        let e = entry.unwrap();
        assert_eq!(e.metadata().unwrap().uid(), 0, "{:?}", e.path());
    }
}

/// A tmpfs of `size` mounted for one test, unmounted and removed on drop
/// (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn new(tag: &str, size: &str) -> Tmpfs {
        Tmpfs::with_options(tag, &format!("size={size},mode=0700"))
    }

    fn with_options(tag: &str, opts: &str) -> Tmpfs {
        let dir = std::env::temp_dir().join(format!("lr-tmpfs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fs = Tmpfs(dir);
        let r = run_program(
            "mount",
            &["-t", "tmpfs", "-o", opts, "tmpfs", fs.0.to_str().unwrap()],
            RUN_LIMIT,
        );
        assert_eq!(r.code, 0, "mounting a tmpfs: {}", r.dump());
        fs
    }

    /// Makes empty files until it takes no more (no inode left), so not
    /// even an empty end mark can be made.
    fn use_up_inodes(&self) {
        let mut n = 0;
        while std::fs::File::create(self.0.join(format!("inode{n}"))).is_ok() {
            n += 1;
        }
    }

    /// Writes zeros into it until it takes no more.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.0.join("filler")).unwrap();
        let chunk = vec![0u8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
        while f.write_all(&[0]).is_ok() {}
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A 4-s trial at 1,000 frames/s stored in `db` (its JSON in `json`),
/// with `fill` run once the run's row is stored (its trial has started),
/// so that the trial's own row finds no room. Whether `fill` ran, and the
/// run.
fn trial_filling_its_db(
    ns: &str,
    db: &str,
    json: &str,
    fill: impl Fn() + Send + Sync,
) -> (bool, Run) {
    std::thread::scope(|scope| {
        let filler = scope.spawn(|| {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(15) {
                let r = linerate(&["runs", "--db", db]);
                if r.stdout.contains("running") {
                    fill();
                    return true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            false
        });
        let mut args = vec!["trial"];
        args.extend_from_slice(&B2B_HOSTS);
        args.extend_from_slice(&[
            "--frame-size",
            "64",
            "--rate",
            "1000fps",
            "--duration",
            "4s",
            "--straggler-wait",
            "200ms",
            "--db",
            db,
            "--json",
            json,
        ]);
        let run = linerate_in(ns, &args);
        (filler.join().unwrap(), run)
    })
}

/// The disk fills during a run and is still full at its end, so not even
/// the run's end reaches the database: the run says the store is
/// incomplete and names the --json file as the record (exit 2), and
/// readers show the run as interrupted, never "process died" (the
/// process did not die): the end is kept in an empty file beside the
/// database, which needs no free block.
#[test]
fn a_disk_full_to_the_end_of_a_run_is_told_not_taken_for_a_death() {
    if !root_or_skip("a_disk_full_to_the_end_of_a_run_is_told_not_taken_for_a_death") {
        return;
    }
    let (ns, _guard) = back_to_back("fu", 1500);
    let fs = Tmpfs::new("full", "1m");
    let db = fs.0.join("full.sqlite").to_str().unwrap().to_string();
    let dir = TempDir::new("full");
    let json = dir.file("full.json");
    let (filled, run) = trial_filling_its_db(&ns, &db, &json, || fs.fill());
    assert!(filled, "the run's row never appeared: {}", run.dump());
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(!run.stderr.contains("stored as run"), "{}", run.dump());
    assert!(
        run.stderr.contains("stopped taking the run") && run.stderr.contains("full.json"),
        "{}",
        run.dump()
    );
    assert_eq!(u(&read_json(Path::new(&json)), "rx_frames"), 4_000);
    // The database took not even the run's end: it is in the empty file.
    let marks: Vec<String> = std::fs::read_dir(&fs.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("full.sqlite.run1.interrupted."))
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    // Still full: read as it is.
    let runs = linerate(&["runs", "--db", &db]);
    assert_eq!(runs.code, 0, "{}", runs.dump());
    assert!(
        runs.stdout.contains("incomplete (interrupted)") && !runs.stdout.contains("died"),
        "{}",
        runs.dump()
    );
    let show = linerate(&["show", "1", "--db", &db]);
    assert!(!show.stdout.contains("died"), "{}", show.dump());
}

/// As above, but not even the end mark beside the database can be made
/// (no inode left either): the run then says its end is not on record and
/// that readers will take it for a death, instead of "marked incomplete".
#[test]
fn a_run_whose_end_cannot_be_recorded_says_so() {
    if !root_or_skip("a_run_whose_end_cannot_be_recorded_says_so") {
        return;
    }
    let (ns, _guard) = back_to_back("fi", 1500);
    // Few inodes, so that they can all be used up.
    let fs = Tmpfs::with_options("inodes", "size=1m,nr_inodes=64,mode=0700");
    let db = fs.0.join("full.sqlite").to_str().unwrap().to_string();
    let dir = TempDir::new("inodes");
    let json = dir.file("inodes.json");
    let (filled, run) = trial_filling_its_db(&ns, &db, &json, || {
        fs.fill();
        fs.use_up_inodes();
    });
    assert!(filled, "the run's row never appeared: {}", run.dump());
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(
        run.stderr.contains("not even its end could be recorded")
            && !run.stderr.contains("marked incomplete")
            && run.stderr.contains("inodes.json"),
        "{}",
        run.dump()
    );
    let marks = std::fs::read_dir(&fs.0)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("full.sqlite.run1.")
        })
        .count();
    assert_eq!(marks, 0, "an end mark was made after all");
    assert_eq!(u(&read_json(Path::new(&json)), "rx_frames"), 4_000);
}
