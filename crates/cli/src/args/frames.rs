//! The frame-size options every packet command shares (`--sizes` alias
//! `--frame-size`, `--l3-length`, `--udp-payload`, `--imix`) and the one
//! place they become the frames a command sends. Users' scripts and
//! scenario files (keys = long options) depend on these names: keep them.
//!
//! Each command sets its own default sizes with
//! `#[command(mut_arg("sizes", |a| a.default_value(...)))]` (clap ignores a
//! default when checking conflicts, so `--imix` alone is never a conflict).

use clap::Args;
use linerate_session::error::{bail, Result, ResultExt};
use linerate_wire::{Encap, FrameMix, FrameSize, Frames};

/// What frames a test sends: frame sizes, IP lengths, UDP payloads or
/// frame-size mixes; one kind per run.
#[derive(Args, Debug, Clone, Default)]
pub struct FrameArgs {
    /// Frame sizes in bytes, FCS included (64..9018), e.g. 64,512,1518.
    #[arg(
        long,
        visible_alias = "frame-size",
        value_delimiter = ',',
        conflicts_with_all = ["l3_length", "udp_payload", "imix"]
    )]
    pub sizes: Option<Vec<u64>>,
    /// IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["udp_payload", "imix"])]
    pub l3_length: Option<Vec<u64>>,
    /// UDP payload sizes instead of frame sizes (as LanTraffic and iperf count; 1472 is the largest unfragmented on a 1500-byte MTU).
    #[arg(long, value_delimiter = ',', conflicts_with = "imix")]
    pub udp_payload: Option<Vec<u64>>,
    /// Frame-size mixes instead: imix0, imix1, imix2 (LANCOM), simple (7:4:1 of 64/594/1518), genome:aaaaaaaddddg (RFC 6985) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1); several as imix0,imix1,imix2 or by repeating --imix.
    #[arg(long)]
    pub imix: Vec<String>,
}

/// The default `--sizes` lists of the packet commands (the `mut_arg`
/// defaults in args.rs and method_args.rs; a unit test keeps them in step).
/// A list equal to one of them is taken as the default, so sizes below the
/// smallest frame of the layout (64 for IPv6) are raised to it with a note
/// instead of refused.
pub const DEFAULT_LISTS: [&[u64]; 3] = [
    &[64, 128, 256, 512, 1024, 1280, 1518],
    &[64, 512, 1518],
    &[64],
];

impl FrameArgs {
    /// The frame sizes or mixes asked for, in the order given, for test
    /// frames of `encap` (IPv4/IPv6, VLAN). `--imix`, `--udp-payload` and
    /// `--l3-length` exclude each other and `--sizes` (clap refuses the
    /// combinations), so at most one of them is set beside the command's
    /// default `--sizes`, and it wins over that.
    pub fn frames(&self, encap: &Encap) -> Result<Vec<Frames>> {
        self.frames_of(encap, true)
    }

    /// [`frames`](Self::frames); `may_be_default`: whether `--sizes` can
    /// hold the command's default list (not for commands without one).
    fn frames_of(&self, encap: &Encap, may_be_default: bool) -> Result<Vec<Frames>> {
        let frames = if !self.imix.is_empty() {
            let mixes = Frames::parse_mixes(&self.imix).context("--imix")?;
            mixes
                .into_iter()
                .map(|m| mix_in(m, encap).map(Frames::Mix))
                .collect::<Result<Vec<_>>>()?
        } else if let Some(payloads) = &self.udp_payload {
            sizes_of(payloads, "--udp-payload", |n| {
                FrameSize::from_udp_payload_in(n, encap)
            })?
        } else if let Some(l3) = &self.l3_length {
            sizes_of(l3, "--l3-length", |n| FrameSize::from_l3_in(n, encap))?
        } else {
            let sizes = self.sizes.as_deref().unwrap_or_default();
            sizes_in(sizes, encap, may_be_default)
                .context("--sizes")?
                .into_iter()
                .map(Frames::Size)
                .collect()
        };
        if frames.is_empty() {
            bail!(BadInput, "no frame size given: use --sizes 64,128,..., --l3-length 40,..., --udp-payload 18,... or --imix imix1");
        }
        Ok(frames)
    }

    /// The frame sizes of a command that measures per size and sends no
    /// mix (`command` names it in the error).
    pub fn sizes_only(&self, command: &str, encap: &Encap) -> Result<Vec<FrameSize>> {
        if !self.imix.is_empty() {
            bail!(BadInput, "{command} measures one frame size at a time and takes no --imix: give --sizes, --l3-length or --udp-payload");
        }
        Ok(self.frames(encap)?.iter().map(Frames::largest).collect())
    }

    /// The one frame size or mix of a command that sends one (`trial`).
    pub fn single(&self, command: &str, encap: &Encap) -> Result<Frames> {
        let nothing_given = self.sizes.is_none()
            && self.l3_length.is_none()
            && self.udp_payload.is_none()
            && self.imix.is_empty();
        if nothing_given {
            bail!(BadInput, "{command} needs a frame size: give --frame-size N (64..9018), --l3-length N (40..9000), --udp-payload N or --imix MIX");
        }
        let mut frames = self.frames_of(encap, false)?;
        if frames.len() > 1 {
            bail!(BadInput, "{command} sends one frame size or mix, and {} were given: give one value (or use rfc2544 for several)", frames.len());
        }
        Ok(frames.remove(0))
    }
}

/// A mix whose sizes carry `encap`'s frames (a 64-byte member is refused for IPv6).
fn mix_in(mix: FrameMix, encap: &Encap) -> Result<FrameMix> {
    let sizes = mix
        .sizes
        .iter()
        .map(|s| s.in_encap(encap))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--imix {}", mix.name))?;
    Ok(FrameMix { sizes, ..mix })
}

/// Frame sizes for `encap` from `sizes`. A command's default list (one of
/// [`DEFAULT_LISTS`], when `may_be_default`) is adapted to the layout: a
/// size below its smallest frame becomes that frame (64 becomes 78 for
/// IPv6), with a note; other sizes too small are refused. clap does not
/// tell a default from the same list typed by the user, so `--sizes 64`
/// on a command whose default is 64 is adapted too (the note says so).
/// Repeats are dropped.
fn sizes_in(sizes: &[u64], encap: &Encap, may_be_default: bool) -> Result<Vec<FrameSize>> {
    let is_default = may_be_default && DEFAULT_LISTS.contains(&sizes);
    let min = encap.min_frame() as u64;
    if is_default && sizes.iter().any(|&n| n < min) {
        eprintln!(
            "linerate: note: {encap} test frames are at least {min} bytes: the default sizes start at {min}"
        );
    }
    let mut out: Vec<FrameSize> = Vec::new();
    for &n in sizes {
        let n = if is_default { n.max(min) } else { n };
        let f = FrameSize::from_frame_in(n, encap)?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

/// Frame sizes from `values` of `option`, each converted by `size`.
fn sizes_of<E>(
    values: &[u64],
    option: &str,
    size: impl Fn(u64) -> Result<FrameSize, E>,
) -> Result<Vec<Frames>>
where
    E: Into<linerate_session::error::Error>,
{
    values
        .iter()
        .map(|&n| {
            size(n)
                .map(Frames::Size)
                .with_context(|| option.to_string())
        })
        .collect()
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// A command flattening the options, as every packet command does.
    #[derive(Parser, Debug)]
    #[command(mut_arg("sizes", |a| a.default_value("64,1518")))]
    struct WithDefault {
        #[command(flatten)]
        frames: FrameArgs,
    }

    /// A command without default sizes, as `trial`.
    #[derive(Parser, Debug)]
    struct NoDefault {
        #[command(flatten)]
        frames: FrameArgs,
    }

    fn parse(args: &[&str]) -> Result<FrameArgs, clap::Error> {
        let argv = std::iter::once("x").chain(args.iter().copied());
        WithDefault::try_parse_from(argv).map(|c| c.frames)
    }

    fn sizes(frames: &[Frames]) -> Vec<u16> {
        frames.iter().map(|f| f.largest().frame()).collect()
    }

    #[test]
    fn every_kind_of_size_parses_as_before() {
        let f = |args: &[&str]| sizes(&parse(args).unwrap().frames(&Encap::default()).unwrap());
        assert_eq!(f(&[]), vec![64, 1518], "the command's default");
        assert_eq!(f(&["--sizes", "64,512"]), vec![64, 512]);
        assert_eq!(f(&["--frame-size", "128"]), vec![128], "trial's name");
        assert_eq!(f(&["--sizes", "64", "--sizes", "256"]), vec![64, 256]);
        assert_eq!(f(&["--l3-length", "46,1500"]), vec![64, 1518]);
        assert_eq!(f(&["--udp-payload", "18,1472"]), vec![64, 1518]);
    }

    #[test]
    fn mixes_parse_as_rfc2544_took_them() {
        let frames = parse(&["--imix", "imix0,imix1", "--imix", "64:7,594:4,1518:1"])
            .unwrap()
            .frames(&Encap::default())
            .unwrap();
        let names: Vec<&str> = frames
            .iter()
            .map(|f| f.mix().unwrap().name.as_str())
            .collect();
        assert_eq!(names, ["IMIX 0", "IMIX 1", "64:7,594:4,1518:1"]);
    }

    #[test]
    fn two_kinds_at_once_are_refused_by_clap() {
        for args in [
            &["--sizes", "64", "--l3-length", "46"][..],
            &["--sizes", "64", "--imix", "imix1"][..],
            &["--frame-size", "64", "--udp-payload", "18"][..],
            &["--l3-length", "46", "--imix", "imix1"][..],
            &["--udp-payload", "18", "--imix", "imix1"][..],
            &["--sizes", "sixty"][..],
        ] {
            assert!(parse(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn bad_sizes_are_one_line_naming_the_option() {
        for (args, option) in [
            (&["--sizes", "60"][..], "--sizes"),
            (&["--l3-length", "39"][..], "--l3-length"),
            (&["--udp-payload", "9999"][..], "--udp-payload"),
            (&["--imix", "huge"][..], "--imix"),
        ] {
            let e = parse(args).unwrap().frames(&Encap::default()).unwrap_err();
            let text = linerate_session::exit::one_line(&e);
            assert!(text.starts_with(option), "{args:?}: {text}");
            assert!(!text.contains('\n'));
        }
    }

    #[test]
    fn a_single_frame_command_takes_exactly_one() {
        let single = |args: &[&str]| {
            let argv = std::iter::once("x").chain(args.iter().copied());
            NoDefault::try_parse_from(argv)
                .unwrap()
                .frames
                .single("trial", &Encap::default())
        };
        assert_eq!(
            single(&["--frame-size", "64"]).unwrap().largest().frame(),
            64
        );
        assert_eq!(
            single(&["--imix", "64:7,594:4,1518:1"])
                .unwrap()
                .mix()
                .unwrap()
                .name,
            "64:7,594:4,1518:1"
        );
        let none = single(&[]).unwrap_err().to_string();
        assert!(none.contains("--frame-size N"), "{none}");
        let two = single(&["--frame-size", "64,128"]).unwrap_err().to_string();
        assert!(two.contains("give one value"), "{two}");
    }

    #[test]
    fn a_per_size_command_refuses_mixes() {
        let e = parse(&["--imix", "imix1"])
            .unwrap()
            .sizes_only("cpu-target", &Encap::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cpu-target") && e.contains("--sizes"), "{e}");
        let sizes = parse(&["--l3-length", "46"])
            .unwrap()
            .sizes_only("cpu-target", &Encap::default())
            .unwrap();
        assert_eq!(sizes[0].frame(), 64);
    }

    #[test]
    fn default_sizes_follow_the_layout_and_given_ones_are_refused() {
        let v6 = Encap {
            ip: linerate_wire::IpVersion::V6,
            vlan: None,
        };
        // rfc2544's default list: 64 becomes IPv6's smallest frame, 78.
        let f = parse(&["--sizes", "64,128,256,512,1024,1280,1518"]).unwrap();
        let got = sizes(&f.frames(&v6).unwrap());
        assert_eq!(got, vec![78, 128, 256, 512, 1024, 1280, 1518]);
        // A list of the user's own with a frame too small: refused, naming it.
        let e = parse(&["--sizes", "64,1518"])
            .unwrap()
            .frames(&v6)
            .unwrap_err();
        let text = linerate_session::exit::one_line(&e);
        assert!(text.starts_with("--sizes"), "{text}");
        assert!(text.contains("78"), "{text}");
    }
}
