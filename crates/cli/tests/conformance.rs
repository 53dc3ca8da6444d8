//! One conformance suite, every engine and receiver: the same trials with
//! the same expected counts on each backend. An engine passes only if it counts
//! exactly what a wire delivers (back to back) and exactly what a DUT with
//! a known drop pattern drops. Needs root; run with --test-threads=1.

mod common;

use common::*;

/// Engines under test; each runs the whole suite.
const ENGINES: [&str; 3] = ["af_packet", "af_xdp", "xdp"];

/// A lossless 1 s trial back to back, with every count exact.
fn back_to_back_is_exact(engine: &str, receiver: &str, frame: &str, fps: u64) {
    let (ns, _guard) = back_to_back(&format!("c{}{}", &engine[..2], &receiver[..1]), 1500);
    let args = [
        "--engine",
        engine,
        "--receiver",
        receiver,
        "--frame-size",
        frame,
    ];
    let (_, t) = b2b_trial(&ns, &args, fps);
    assert_exact(&t, fps);
    assert_eq!(t["engine"], engine, "{t}");
    assert_eq!(t["receiver"], receiver, "{t}");
    assert_eq!(u(&t, "frame_size").to_string(), frame, "{t}");
    // Every engine says how far its generator fell behind schedule.
    let stall = u(&t, "generator_max_stall_ns");
    assert!(
        stall < 1_000_000_000,
        "{engine}: fell {stall} ns behind in a 1 s trial: {t}"
    );
    let l = &t["latency_ns"];
    assert!(
        u(l, "min") > 0 && u(l, "max") < 1_000_000_000,
        "{engine}: latency {l}"
    );
    // Below a million frames/s every engine measures every frame.
    let tx = u(&t, "tx_frames");
    assert_eq!((u(l, "samples"), u(l, "every")), (tx, 1), "{engine}: {l}");
}

/// The xdp engine measures latency on a sample when told to (or above a
/// million frames/s): every frame still counted, exactly the frames whose
/// sequence number is a multiple of the interval measured.
#[test]
fn xdp_samples_latency_and_still_counts_every_frame() {
    if !root_or_skip("xdp_samples_latency_and_still_counts_every_frame") {
        return;
    }
    let (ns, _guard) = back_to_back("cxs", 1500);
    let extra = ["--engine", "xdp", "--frame-size", "64", "--latency-every"];
    let (run, t) = b2b_trial(&ns, &[&extra[..], &["8"]].concat(), 50_000);
    assert_exact(&t, 50_000);
    let l = &t["latency_ns"];
    // Sequence numbers 0, 8, .. 49 992 of 0 .. 49 999 (of those sent).
    let samples = u(&t, "tx_frames").div_ceil(8);
    assert_eq!((u(l, "samples"), u(l, "every")), (samples, 8), "{l}");
    assert!(u(l, "min") > 0 && u(l, "min") <= u(l, "max"), "{l}");
    assert!(
        run.stdout.contains(&format!(
            "measured on every 8th frame of each stream ({} frames",
            linerate_results::report::thousands(samples)
        )),
        "{}",
        run.dump()
    );
    // auto at 1.5 Mpps intended: every 2nd frame, whatever arrives.
    let auto = [&extra[..], &["auto", "--loss", "99%"]].concat();
    let (_, t) = b2b_trial(&ns, &auto, 1_500_000);
    let l = &t["latency_ns"];
    assert_eq!(u(l, "every"), 2, "{l}");
    let samples = u(l, "samples");
    assert!(samples > 0 && samples <= u(&t, "rx_frames"), "{t}");
    assert!(samples <= u(&t, "tx_frames").div_ceil(2), "{t}");
}

/// The lab router with an nftables rule dropping every 100th forwarded
/// packet: the engine's loss must equal the rule's drop counter exactly.
fn known_loss_is_exact(engine: &str, receiver: &str) {
    let (lab, _guard) = lab_up(&format!("k{}{}", &engine[..2], &receiver[..1]));
    let dut = format!("lr-{lab}-dut");
    nft_load(&dut, EVERY_100TH);
    let json = TempFile::new("conformance-loss");
    let run = linerate(&[
        "trial",
        "--engine",
        engine,
        "--receiver",
        receiver,
        "--lab",
        "--lab-name",
        &lab,
        "--frame-size",
        "128",
        "--rate",
        "20000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--loss",
        "5%",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{engine}: {}", run.dump());
    let t = json.json();
    assert_trial_consistent(&t);
    assert_eq!(t["engine"], engine, "{t}");
    assert_eq!(t["receiver"], receiver, "{t}");
    assert_eq!(nft_counters(&dut), vec![20_000, 200], "{engine}: {t}");
    assert_eq!(u(&t, "tx_frames"), 20_000, "{t}");
    assert_eq!(u(&t, "lost_frames"), 200, "{t}");
    assert_eq!(u(&t, "rx_frames"), 19_800, "{t}");
    assert_eq!((u(&t, "reordered"), u(&t, "duplicated")), (0, 0), "{t}");
}

macro_rules! suite {
    ($($name:ident: $engine:literal, $receiver:literal;)*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn back_to_back_64_bytes() {
                if root_or_skip(concat!($engine, " ", $receiver, " back_to_back_64_bytes")) {
                    back_to_back_is_exact($engine, $receiver, "64", 50_000);
                }
            }

            #[test]
            fn back_to_back_1518_bytes() {
                if root_or_skip(concat!($engine, " ", $receiver, " back_to_back_1518_bytes")) {
                    back_to_back_is_exact($engine, $receiver, "1518", 50_000);
                }
            }

            #[test]
            fn dut_drops_are_counted_exactly() {
                if root_or_skip(concat!($engine, " ", $receiver, " dut_drops_are_counted_exactly")) {
                    known_loss_is_exact($engine, $receiver);
                }
            }
        }
    )*};
}

// Every engine with each receiver: the in-kernel counter (the default
// wherever it attaches) and the engine's own socket.
suite! {
    af_packet: "af_packet", "kernel";
    af_xdp: "af_xdp", "kernel";
    xdp: "xdp", "kernel";
    af_packet_socket: "af_packet", "socket";
    af_xdp_socket: "af_xdp", "socket";
}

#[test]
fn every_engine_is_in_the_suite() {
    let help = run_program(LINERATE, &["trial", "--help"], RUN_LIMIT).stdout;
    for engine in ENGINES {
        assert!(
            help.contains(engine),
            "{engine} not offered by --engine:\n{help}"
        );
    }
}
