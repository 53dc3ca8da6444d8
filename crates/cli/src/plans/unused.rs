//! Options that mean nothing in the mode the other options chose (a port
//! address in the lab, an IPsec option without `--ipsec`, the search's
//! duration where no search runs, ...) are refused in one line that names
//! the option, says why it means nothing there and what to do, instead of
//! being silently ignored.
//!
//! Each command lists, when its plan is made, the options whose meaning
//! depends on the mode, each with whether it was given and whether it
//! means something in the mode chosen ([`Rule`]); [`refuse`] checks the
//! list in this one place. Plans are made for the command line, for every
//! test of a scenario file (`run`) and for the Python package alike, so
//! all three refuse the same way (Python names the keyword for the
//! option). Combinations clap can say exactly (`conflicts_with`,
//! `requires` on options without a default) stay with clap.

use linerate_session::error::{bail, Result};

/// One row of a command's table: `option` as the command line names it,
/// whether it was `given`, whether it `applies` in the mode the other
/// options chose, and `why`: the rest of the message when it does not
/// (why it means nothing there, and what to do), e.g. "is for ports you
/// name ...: leave it out".
pub(crate) struct Rule {
    pub option: &'static str,
    pub given: bool,
    pub applies: bool,
    pub why: String,
}

impl Rule {
    pub fn new(option: &'static str, given: bool, applies: bool, why: impl Into<String>) -> Rule {
        Rule {
            option,
            given,
            applies,
            why: why.into(),
        }
    }
}

/// Refuses the first option of `rules` that was given where it does not
/// apply: "OPTION WHY" as a usage error (exit 2).
pub(crate) fn refuse(rules: &[Rule]) -> Result<()> {
    match rules.iter().find(|r| r.given && !r.applies) {
        Some(r) => bail!(BadInput, "{} {}", r.option, r.why),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_option_given_out_of_its_mode_is_named() {
        let rules = [
            Rule::new("--a", false, false, "is never given"),
            Rule::new("--b", true, true, "applies"),
            Rule::new("--c", true, false, "means nothing here: leave it out"),
            Rule::new("--d", true, false, "comes second"),
        ];
        let e = refuse(&rules).unwrap_err();
        assert_eq!(e.kind(), linerate_session::Kind::BadInput);
        assert_eq!(e.to_string(), "--c means nothing here: leave it out");
        assert!(refuse(&rules[..2]).is_ok());
    }
}
