//! `linerate run FILE.toml`: replays a sequence of tests written as a
//! scenario file, as LanTraffic's automation tool replays a test plan.
//!
//! A test is a table whose keys are the command's long options, so every
//! option of every command can be written in a file without a second
//! vocabulary to learn or keep in step:
//!
//! ```toml
//! # Options every test gets unless it sets them itself.
//! [defaults]
//! lab = true
//! engine = "xdp"
//!
//! [[test]]
//! name = "RFC 2544 throughput"     # optional, printed as a heading
//! command = "rfc2544"
//! sizes = [64, 512, 1518]          # a list repeats the option
//! trial-duration = "2s"
//! json = "throughput.json"
//!
//! [[test]]
//! command = "rfc2544"
//! imix = ["imix0", "imix1", "imix2"]
//! ```
//!
//! `true` writes the flag, `false` leaves it out; a list gives the option
//! once per element. Each test is parsed exactly as its command line would
//! be, and every test's values are checked as its command checks them
//! before the first one runs (`--dry-run` checks too), so a typo in the
//! last test does not cost the hour the first ones take. Tests run in
//! order; a failed threshold does not stop the run, an error or an
//! interruption does. The exit code is the worst of the tests'.

use crate::args::Cli;
use clap::Parser;
use linerate_session::error::{bail, err, Result, ResultExt};
use linerate_session::exit::Outcome;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// One test of the file, as the command line it stands for.
struct PlannedTest {
    name: String,
    argv: Vec<String>,
}

pub fn run(file: &Path, dry_run: bool, stop: &AtomicBool) -> Result<Outcome> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading scenario file {}", file.display()))?;
    let tests = plan(&text).with_context(|| format!("scenario file {}", file.display()))?;
    // Check every test's options before running any.
    let mut parsed = Vec::new();
    for (i, t) in tests.iter().enumerate() {
        let cli = Cli::try_parse_from(&t.argv).map_err(|e| {
            err!(
                BadInput,
                "test {} ({}): {}",
                i + 1,
                t.name,
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ")
            )
        })?;
        parsed.push(cli);
    }
    // Then every test's values, as its command checks them before touching
    // the machine: a bad value in the last test costs nothing.
    for (i, (t, cli)) in tests.iter().zip(&parsed).enumerate() {
        crate::check(cli).with_context(|| format!("test {} ({})", i + 1, t.name))?;
    }
    let total = tests.len();
    if dry_run {
        for t in &tests {
            println!("{}", shell_words(&t.argv));
        }
        return Ok(Outcome::Passed);
    }
    let mut failed = Vec::new();
    for (i, (t, cli)) in tests.iter().zip(parsed).enumerate() {
        eprintln!(
            "linerate: test {}/{total}: {}\nlinerate:   {}",
            i + 1,
            t.name,
            shell_words(&t.argv)
        );
        println!("== {} ==", t.name);
        match crate::run(&cli, stop).with_context(|| format!("test {} ({})", i + 1, t.name))? {
            Outcome::Passed => {}
            Outcome::ThresholdFailed(why) => {
                eprintln!("linerate: test {} ({}): {why}", i + 1, t.name);
                failed.push(format!("{} ({why})", t.name));
            }
            Outcome::Interrupted(what) => {
                return Ok(Outcome::Interrupted(format!(
                    "in test {} of {total} ({}): {what}; the tests after it did not run",
                    i + 1,
                    t.name
                )))
            }
        }
        println!();
    }
    if failed.is_empty() {
        Ok(Outcome::Passed)
    } else {
        Ok(Outcome::ThresholdFailed(format!(
            "{} of {total} tests failed a threshold: {}",
            failed.len(),
            failed.join("; ")
        )))
    }
}

/// The command lines a scenario file stands for.
fn plan(text: &str) -> Result<Vec<PlannedTest>> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| err!(BadInput, "{}", e.message()))?;
    for key in doc.keys() {
        if key != "defaults" && key != "test" {
            bail!(
                BadInput,
                "unknown section '{key}': a scenario file has [defaults] and [[test]] tables"
            );
        }
    }
    let defaults = match doc.get("defaults") {
        None => toml::Table::new(),
        Some(toml::Value::Table(t)) => t.clone(),
        Some(_) => bail!(BadInput, "'defaults' must be a table: write [defaults]"),
    };
    let tests =
        match doc.get("test") {
            Some(toml::Value::Array(a)) if !a.is_empty() => a,
            _ => bail!(BadInput,
            "no test: add at least one [[test]] table with a command, e.g. command = \"rfc2544\""
        ),
        };
    let mut out = Vec::new();
    for (i, t) in tests.iter().enumerate() {
        let toml::Value::Table(t) = t else {
            bail!(
                BadInput,
                "test {} is not a table: write each test as [[test]]",
                i + 1
            );
        };
        let command = match t.get("command") {
            Some(toml::Value::String(c)) => c.clone(),
            _ => bail!(
                BadInput,
                "test {} has no command: add e.g. command = \"rfc2544\"",
                i + 1
            ),
        };
        if command == "run" {
            bail!(
                BadInput,
                "test {}: a scenario file cannot run another one",
                i + 1
            );
        }
        let name = match t.get("name") {
            Some(toml::Value::String(n)) => n.clone(),
            _ => command.clone(),
        };
        let mut argv = vec!["linerate".to_string(), command.clone()];
        // The test's own keys win over the defaults.
        let mut merged = defaults.clone();
        for (k, v) in t {
            merged.insert(k.clone(), v.clone());
        }
        for (key, value) in &merged {
            if key == "command" || key == "name" {
                continue;
            }
            push_option(&mut argv, key, value)
                .with_context(|| format!("test {} ({name})", i + 1))?;
        }
        out.push(PlannedTest { name, argv });
    }
    Ok(out)
}

fn push_option(argv: &mut Vec<String>, key: &str, value: &toml::Value) -> Result<()> {
    let flag = format!("--{key}");
    match value {
        toml::Value::Boolean(true) => argv.push(flag),
        toml::Value::Boolean(false) => {}
        toml::Value::Array(items) => {
            for item in items {
                push_option(argv, key, item)?;
            }
        }
        toml::Value::String(s) => argv.extend([flag, s.clone()]),
        toml::Value::Integer(n) => argv.extend([flag, n.to_string()]),
        toml::Value::Float(x) => argv.extend([flag, x.to_string()]),
        toml::Value::Datetime(_) | toml::Value::Table(_) => {
            bail!(
                BadInput,
                "option '{key}' must be a string, number, true/false or a list of them"
            )
        }
    }
    Ok(())
}

/// A command line as a user could paste it.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=,%@".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn argvs(text: &str) -> Vec<String> {
        plan(text)
            .unwrap()
            .iter()
            .map(|t| shell_words(&t.argv))
            .collect()
    }

    #[test]
    fn tests_become_their_command_lines() {
        let text = r#"
            [defaults]
            lab = true
            engine = "xdp"
            trial-duration = "2s"

            [[test]]
            name = "throughput"
            command = "rfc2544"
            sizes = [64, 1518]
            json = "a b.json"

            [[test]]
            command = "rfc2544"
            imix = ["imix0", "64:7,594:4,1518:1"]
            lab = false
            port-a = "eth1"
            trial-duration = "10s"
        "#;
        assert_eq!(
            argvs(text),
            vec![
                "linerate rfc2544 --engine xdp --json 'a b.json' --lab --sizes 64 --sizes 1518 --trial-duration 2s",
                "linerate rfc2544 --engine xdp --imix imix0 --imix 64:7,594:4,1518:1 --port-a eth1 --trial-duration 10s",
            ]
        );
        let t = plan(text).unwrap();
        assert_eq!(
            (t[0].name.as_str(), t[1].name.as_str()),
            ("throughput", "rfc2544")
        );
        // What the file says is what the command line parser gets.
        assert!(Cli::try_parse_from(&t[0].argv).is_ok());
    }

    #[test]
    fn bad_files_say_what_to_fix() {
        let err =
            |text: &str| linerate_session::exit::one_line(&plan(text).err().expect("an error"));
        assert!(err("").contains("no test"));
        assert!(err("[[test]]\nsizes = [64]").contains("no command"));
        assert!(err("[[test]]\ncommand = \"run\"").contains("cannot run another"));
        assert!(err("[tests]\ncommand = 1").contains("unknown section 'tests'"));
        assert!(err("[[test]]\ncommand = \"trial\"\nx = { a = 1 }").contains("option 'x'"));
        assert!(err("[[test]\n").contains("expected"));
    }
}
