//! `linerate overhead` against the reference reports' worked examples.
//! Arithmetic only: needs no root and sends nothing.

mod common;

use common::*;

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["overhead", "--json"];
    all.extend_from_slice(args);
    let run = run_program(LINERATE, &all, RUN_LIMIT);
    assert_eq!(run.code, 0, "{}", run.dump());
    serde_json::from_str(&run.stdout).expect("JSON on stdout")
}

#[test]
fn lancom_aes_example() {
    // LANCOM: a 46-byte IP packet under AES grows to a 122-byte frame.
    let v = json(&["--l3-length", "46", "--esp", "aes", "--auth", "sha1"]);
    assert_eq!(u(&v, "inner_frame_size"), 64, "{v}");
    assert_eq!(u(&v, "outer_frame_size"), 122, "{v}");
}

#[test]
fn ah_md5_adds_44_bytes() {
    let v = json(&["--frame-size", "512", "--ah", "md5"]);
    assert_eq!(
        u(&v, "outer_frame_size") - u(&v, "inner_frame_size"),
        44,
        "{v}"
    );
    // The same frame rate costs more on the tunnel side, in proportion.
    let (inner, outer) = (f(&v, "inner_mbps_l2"), f(&v, "outer_mbps_l2"));
    assert!((outer / inner - 556.0 / 512.0).abs() < 1e-9, "{v}");
}

#[test]
fn a_table_of_sizes_is_an_array() {
    let v = json(&["--frame-size", "64,1518", "--gre", "--vlan"]);
    let rows = v.as_array().expect("array for several sizes");
    assert_eq!(rows.len(), 2);
    assert_eq!(u(&rows[1], "outer_frame_size"), 1518 + 24 + 4, "{v}");
}

#[test]
fn unknown_algorithms_are_refused_in_one_line() {
    for args in [
        vec![
            "overhead",
            "--frame-size",
            "64",
            "--esp",
            "rot13",
            "--auth",
            "sha1",
        ],
        vec!["overhead", "--frame-size", "64", "--esp", "aes"],
        vec!["overhead", "--frame-size", "64", "--nat-t"],
        vec!["overhead", "--frame-size", "20"],
    ] {
        assert_bad_input(&run_program(LINERATE, &args, RUN_LIMIT));
    }
}

/// An AEAD cipher carries its own ICV: a separate HMAC on top is refused
/// (it used to add 12 bytes that no ESP packet carries), `--auth none` or
/// no `--auth` give the RFC 4106 layout.
#[test]
fn aes_gcm_takes_no_separate_integrity() {
    for auth in ["sha1", "md5", "sha256", "sha512"] {
        let run = run_program(
            LINERATE,
            &[
                "overhead",
                "--l3-length",
                "46",
                "--esp",
                "aes-gcm",
                "--auth",
                auth,
            ],
            RUN_LIMIT,
        );
        assert_bad_input(&run);
        assert!(
            run.stderr.contains("AEAD") && run.stderr.contains(&format!("leave out --auth {auth}")),
            "{}",
            run.dump()
        );
        assert!(run.stdout.is_empty(), "{}", run.dump());
    }
    // ESP 8 + IV 8 + 46 + 2 trailer (a multiple of 4) + ICV 16 + outer IP 20
    // = 100; + 18 Ethernet with FCS = 118.
    for extra in [&[][..], &["--auth", "none"][..]] {
        let mut args = vec!["--l3-length", "46", "--esp", "aes-gcm"];
        args.extend_from_slice(extra);
        let v = json(&args);
        assert_eq!(u(&v, "outer_l3_length"), 100, "{v}");
        assert_eq!(u(&v, "outer_frame_size"), 118, "{v}");
    }
}

/// WireGuard by hand: outer IPv4 20 + UDP 8 + header 16 + the packet padded
/// to 16 + Poly1305 tag 16; `unpadded` as boringtun sends it; anything else
/// is refused in one line.
#[test]
fn wireguard_pads_to_16_unless_told_not_to() {
    // 46 -> 48: 20 + 8 + 16 + 48 + 16 = 108; + 18 = 126.
    let v = json(&["--l3-length", "46", "--wireguard"]);
    assert_eq!(u(&v, "outer_l3_length"), 108, "{v}");
    assert_eq!(u(&v, "outer_frame_size"), 126, "{v}");
    let v = json(&["--l3-length", "46", "--wireguard", "unpadded"]);
    assert_eq!(u(&v, "outer_frame_size"), 18 + 60 + 46, "{v}");
    // 1500 -> 1504: 1564 + 18 = 1582.
    let v = json(&["--frame-size", "1518", "--wireguard", "padded"]);
    assert_eq!(u(&v, "outer_frame_size"), 1582, "{v}");
    let run = run_program(
        LINERATE,
        &["overhead", "--frame-size", "64", "--wireguard", "sideways"],
        RUN_LIMIT,
    );
    assert_bad_input(&run);
    assert!(
        run.stderr.contains("--wireguard 'sideways'"),
        "{}",
        run.dump()
    );
}
