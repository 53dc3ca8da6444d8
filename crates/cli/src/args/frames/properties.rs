//! --sizes, --l3-length, --udp-payload and --imix becoming frames: no
//! panic on any values or mix text; every frame accepted is a valid size
//! (64..=9018 bytes with FCS on a plain IPv4 layout); a frame size given
//! comes back as itself.

use super::*;
use linerate_session::test_support::{config, text};
use proptest::prelude::*;

fn values() -> impl Strategy<Value = Option<Vec<u64>>> {
    proptest::option::of(proptest::collection::vec(
        prop_oneof![0u64..10_000, any::<u64>()],
        0..4,
    ))
}

fn mix_text() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        Just("imix0".to_string()),
        "genome:[a-hA-Z]{0,12}",
        "([0-9]{1,5}:[0-9]{1,4},){0,3}[0-9]{1,5}:[0-9]{1,4}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn frames_are_valid_or_refused(
        sizes in values(),
        l3_length in values(),
        udp_payload in values(),
        imix in proptest::collection::vec(mix_text(), 0..3),
    ) {
        let args = FrameArgs { sizes, l3_length, udp_payload, imix };
        let encap = Encap::default();
        if let Ok(frames) = args.frames(&encap) {
            for f in &frames {
                let n = f.largest().frame();
                prop_assert!((64..=9018).contains(&n), "{args:?} -> {n}");
            }
            // Buffers hold the frame without its FCS.
            prop_assert!(frames.is_empty() || linerate_session::plan::max_frame_len(&frames) >= 60);
        }
        let _ = args.sizes_only("cpu-target", &encap);
        let _ = args.single("trial", &encap);
    }

    #[test]
    fn a_frame_size_comes_back(n in 64u64..=9018) {
        let args = FrameArgs { sizes: Some(vec![n]), l3_length: None, udp_payload: None, imix: vec![] };
        let frames = args.sizes_only("trial", &Encap::default()).unwrap();
        prop_assert_eq!(frames.len(), 1);
        prop_assert_eq!(u64::from(frames[0].frame()), n);
    }
}
