//! The scenario file (`plan`): never panics on any text or any TOML, and
//! a plan it accepts has a named command line per test.

use super::*;
use linerate_session::test_support::{config, text};
use proptest::prelude::*;

/// TOML-ish documents: section headers, keys of the real vocabulary and
/// values of every type.
fn toml_doc() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("[defaults]".to_string()),
        Just("[[test]]".to_string()),
        "\\[[a-z_.]{0,8}\\]",
        (
            prop_oneof![
                Just("command"),
                Just("name"),
                Just("sizes"),
                Just("lab"),
                Just("duration"),
                Just("rate"),
                Just("loss"),
                Just("args"),
                Just("x"),
            ],
            prop_oneof![
                "\"\\PC{0,10}\"",
                "-?[0-9]{1,20}(\\.[0-9]{0,4})?",
                Just("true".to_string()),
                "\\[([0-9]{1,5}, ?){0,3}\\]",
                "\\[(\"[a-z0-9%.]{0,6}\", ?){0,3}\\]",
                "\\{ ?[a-z]{1,4} = [0-9]{1,3} ?\\}",
            ],
        )
            .prop_map(|(k, v)| format!("{k} = {v}")),
        text(),
    ];
    proptest::collection::vec(line, 0..10).prop_map(|l| l.join("\n"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn plans_never_panic(doc in prop_oneof![text(), toml_doc()]) {
        if let Ok(tests) = plan(&doc) {
            for t in &tests {
                prop_assert!(!t.argv.is_empty(), "{doc:?}");
            }
        }
    }
}
