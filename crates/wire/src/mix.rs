//! Frame-size mixes (IMIX): several frame sizes in one trial, in a fixed
//! repeating sequence.
//!
//! A mix is written as:
//! - a named pattern: `imix0`, `imix1`, `imix2` (the LANCOM techpapers'
//!   IMIX 0/1/2, exactly as printed there) or `simple` (the classic simple
//!   IMIX, 7:4:1 of 64/594/1518 bytes);
//! - an RFC 6985 genome, `genome:aaaaaaaddddg`: one letter per frame, sent
//!   in that order (a=64 b=128 c=256 d=512 e=1024 f=1280 g=1518 h=2112
//!   i=9000 j=16000 — `j` and RFC 6985's `z` (the MTU) are refused: 16000
//!   is above any Ethernet MTU linerate sends, and `z` depends on the port;
//!   write the size as custom weights instead);
//! - custom weights, `64:7,594:4,1518:1` (size:weight, weights in any unit;
//!   percentages work).
//!
//! Weighted mixes are sent *spread*, not in blocks: the sequence is built
//! by smooth weighted round robin (each slot goes to the size furthest
//! behind its share), so 7:4:1 becomes `a d a a d a g a d a a d`-like
//! rather than seven 64s in a row. Weights are reduced by their greatest
//! common divisor, so the sequence is as short as the ratio allows (12 for
//! 7:4:1, 100 for IMIX 0). A genome is sent exactly as written.
//!
//! Frame `n` of a stream has the size `sequence[n % len]`: the share of
//! each size is exact over every whole sequence, and off by less than one
//! sequence in a trial that ends mid-sequence.

use crate::flows::gcd;
use crate::template::{FlowSpec, FrameTemplate};
use crate::units::{FrameSize, Layer, UnitError, PREAMBLE_AND_GAP};
use serde::{Deserialize, Serialize};

/// Longest sequence a mix may have (the xdp engine keeps the sequence in a
/// BPF map of this many slots).
pub const MAX_SEQUENCE: usize = 128;
/// Most distinct frame sizes in one mix.
pub const MAX_SIZES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    #[error("frame mix '{0}' is not understood: use imix0, imix1, imix2, simple, genome:LETTERS (RFC 6985, e.g. genome:aaaaaaaddddg) or SIZE:WEIGHT,... (e.g. 64:7,594:4,1518:1)")]
    Syntax(String),
    #[error("genome letter '{0}' is not supported: use a..i (64, 128, 256, 512, 1024, 1280, 1518, 2112, 9000 bytes), or give the size as SIZE:WEIGHT")]
    GenomeLetter(char),
    #[error("frame mix '{0}' has more than {MAX_SIZES} sizes: use at most {MAX_SIZES}")]
    TooManySizes(String),
    #[error("frame mix '{0}' repeats every {1} frames, more than {MAX_SEQUENCE}: use smaller weights (e.g. percentages) or a shorter genome")]
    TooLong(String, usize),
    #[error("frame mix '{0}': every weight must be a whole number above 0")]
    Weight(String),
    #[error(transparent)]
    Size(#[from] UnitError),
}

/// A repeating sequence of frame sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameMix {
    /// How the user named it ("IMIX 1", "genome aaaaaaaddddg", "64:7,594:4,1518:1").
    pub name: String,
    /// The distinct sizes, in order of first appearance in the sequence.
    pub sizes: Vec<FrameSize>,
    /// Index into `sizes` for each frame of one repetition.
    pub sequence: Vec<u8>,
}

/// The LANCOM techpapers' IMIX patterns (LCOS 10.80, "IPSec routing with
/// different IMIX"), as printed there.
const IMIX0: &[(u64, u32)] = &[
    (64, 45),
    (128, 20),
    (256, 5),
    (512, 3),
    (1024, 2),
    (1280, 1),
    (1364, 24),
];
const IMIX1: &[(u64, u32)] = &[(64, 7), (570, 4), (1418, 1)];
const IMIX2: &[(u64, u32)] = &[(90, 58), (92, 2), (594, 24), (1418, 16)];
/// The classic "simple IMIX" (7:4:1 of 64/594/1518).
const SIMPLE: &[(u64, u32)] = &[(64, 7), (594, 4), (1518, 1)];

/// RFC 6985 section 4: genome letters and the frame sizes they stand for.
const GENOME: &[(char, u64)] = &[
    ('a', 64),
    ('b', 128),
    ('c', 256),
    ('d', 512),
    ('e', 1024),
    ('f', 1280),
    ('g', 1518),
    ('h', 2112),
    ('i', 9000),
];

impl FrameMix {
    /// Parses a mix as described in the module documentation.
    pub fn parse(text: &str) -> Result<FrameMix, MixError> {
        let t = text.trim();
        let named = |name: &str, w: &[(u64, u32)]| FrameMix::from_weights(name, w);
        match t.to_ascii_lowercase().replace([' ', '_', '-'], "").as_str() {
            "imix0" => return named("IMIX 0", IMIX0),
            "imix1" => return named("IMIX 1", IMIX1),
            "imix2" => return named("IMIX 2", IMIX2),
            "simple" | "simpleimix" | "imix" => return named("simple IMIX", SIMPLE),
            _ => {}
        }
        if let Some(genome) = t.strip_prefix("genome:") {
            return FrameMix::from_genome(genome);
        }
        if !t.contains(':') {
            return Err(MixError::Syntax(t.to_string()));
        }
        let mut weights = Vec::new();
        for part in t.split(',') {
            let (size, weight) = part
                .split_once(':')
                .ok_or_else(|| MixError::Syntax(t.to_string()))?;
            let size: u64 = size
                .trim()
                .parse()
                .map_err(|_| MixError::Syntax(t.to_string()))?;
            let weight: u32 = weight
                .trim()
                .parse()
                .map_err(|_| MixError::Weight(t.to_string()))?;
            weights.push((size, weight));
        }
        FrameMix::from_weights(t, &weights)
    }

    /// A spread sequence with the given (frame size, weight) pairs.
    pub fn from_weights(name: &str, weights: &[(u64, u32)]) -> Result<FrameMix, MixError> {
        if weights.is_empty() {
            return Err(MixError::Syntax(name.to_string()));
        }
        if weights.iter().any(|&(_, w)| w == 0) {
            return Err(MixError::Weight(name.to_string()));
        }
        let mut sizes: Vec<FrameSize> = Vec::new();
        // u64: the weights of a repeated size are summed, and two u32
        // weights overflow a u32 (which gave that size a wrong share, or
        // none at all).
        let mut merged: Vec<u64> = Vec::new();
        for &(size, w) in weights {
            let f = FrameSize::from_frame(size)?;
            let w = w as u64;
            match sizes.iter().position(|&s| s == f) {
                Some(i) => merged[i] += w,
                None => {
                    sizes.push(f);
                    merged.push(w);
                }
            }
        }
        if sizes.len() > MAX_SIZES {
            return Err(MixError::TooManySizes(name.to_string()));
        }
        let g = merged.iter().copied().fold(0, gcd);
        let weights: Vec<u64> = merged.iter().map(|&w| w / g).collect();
        let len: u64 = weights.iter().sum();
        if len as usize > MAX_SEQUENCE {
            return Err(MixError::TooLong(name.to_string(), len as usize));
        }
        Ok(FrameMix {
            name: name.to_string(),
            sizes,
            sequence: spread(&weights),
        })
    }

    /// An RFC 6985 genome: one letter per frame, in the order sent.
    pub fn from_genome(genome: &str) -> Result<FrameMix, MixError> {
        let name = format!("genome {genome}");
        let mut sizes: Vec<FrameSize> = Vec::new();
        let mut sequence = Vec::new();
        for c in genome.chars() {
            let size = GENOME
                .iter()
                .find(|(l, _)| *l == c)
                .map(|&(_, s)| s)
                .ok_or(MixError::GenomeLetter(c))?;
            let f = FrameSize::from_frame(size)?;
            let i = match sizes.iter().position(|&s| s == f) {
                Some(i) => i,
                None => {
                    sizes.push(f);
                    sizes.len() - 1
                }
            };
            sequence.push(i as u8);
        }
        if sequence.is_empty() {
            return Err(MixError::Syntax(name));
        }
        // As for weights: the generators hold at most MAX_SIZES templates
        // per class (a two-class drop test of a 9-size genome tripped the
        // xdp generator's assertion).
        if sizes.len() > MAX_SIZES {
            return Err(MixError::TooManySizes(name));
        }
        if sequence.len() > MAX_SEQUENCE {
            return Err(MixError::TooLong(name, sequence.len()));
        }
        Ok(FrameMix {
            name,
            sizes,
            sequence,
        })
    }

    /// The size of frame `n` of a stream.
    #[inline]
    pub fn size_of(&self, n: u64) -> FrameSize {
        self.sizes[self.sequence[(n % self.sequence.len() as u64) as usize] as usize]
    }

    /// The largest size: what buffers must hold.
    pub fn largest(&self) -> FrameSize {
        *self.sizes.iter().max().expect("a mix has a size")
    }

    /// Frames of each size in one repetition, in the order of `sizes`.
    pub fn counts(&self) -> Vec<u64> {
        let mut c = vec![0u64; self.sizes.len()];
        for &i in &self.sequence {
            c[i as usize] += 1;
        }
        c
    }

    /// Mean bytes per frame at a layer over one repetition.
    pub fn mean_bytes(&self, layer: Layer) -> f64 {
        let total: u64 = self
            .sequence
            .iter()
            .map(|&i| self.sizes[i as usize].bytes_at(layer))
            .sum();
        total as f64 / self.sequence.len() as f64
    }

    /// Megabits per second that `fps` frames per second of this mix make at a layer.
    pub fn mbps(&self, fps: f64, layer: Layer) -> f64 {
        fps * self.mean_bytes(layer) * 8.0 / 1e6
    }

    /// The most frames per second of this mix a link of `line_bps` carries.
    pub fn line_rate_fps(&self, line_bps: u64) -> f64 {
        line_bps as f64 / (8.0 * self.mean_bytes(Layer::L1))
    }

    /// Bytes on the wire (L1) of the first `frames` frames of a stream.
    pub fn l1_bytes(&self, frames: u64) -> u64 {
        let len = self.sequence.len() as u64;
        let per_rep: u64 = self
            .sequence
            .iter()
            .map(|&i| self.sizes[i as usize].frame() as u64 + PREAMBLE_AND_GAP as u64)
            .sum();
        let rest: u64 = (0..frames % len)
            .map(|n| self.size_of(n).frame() as u64 + PREAMBLE_AND_GAP as u64)
            .sum();
        frames / len * per_rep + rest
    }

    /// "45% 64, 20% 128, ..." : the composition, for reports.
    pub fn composition(&self) -> String {
        let n = self.sequence.len() as f64;
        self.sizes
            .iter()
            .zip(self.counts())
            .map(|(s, c)| format!("{}x{}", c, s.frame()))
            .collect::<Vec<_>>()
            .join(" ")
            + &format!(" per {n} frames")
    }
}

/// What a trial sends: frames of one size, or a mix of sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frames {
    Size(FrameSize),
    Mix(FrameMix),
}

impl Frames {
    /// The largest frame sent (what buffers and MTUs must hold).
    pub fn largest(&self) -> FrameSize {
        match self {
            Frames::Size(f) => *f,
            Frames::Mix(m) => m.largest(),
        }
    }

    pub fn mix(&self) -> Option<&FrameMix> {
        match self {
            Frames::Size(_) => None,
            Frames::Mix(m) => Some(m),
        }
    }

    /// Bytes per frame at a layer (the mean, for a mix).
    pub fn bytes_at(&self, layer: Layer) -> f64 {
        match self {
            Frames::Size(f) => f.bytes_at(layer) as f64,
            Frames::Mix(m) => m.mean_bytes(layer),
        }
    }

    /// The most frames per second a link of `line_bps` carries.
    pub fn line_rate_fps(&self, line_bps: u64) -> f64 {
        line_bps as f64 / (8.0 * self.bytes_at(Layer::L1))
    }

    /// A rate as frames per second of these frames.
    pub fn fps(&self, rate: crate::Rate, line_bps: u64) -> f64 {
        rate.to_fps_mean(|l| self.bytes_at(l), line_bps)
    }

    /// "64-byte frames" or "IMIX 1", for messages.
    pub fn describe(&self) -> String {
        match self {
            Frames::Size(f) => format!("{}-byte frames", f.frame()),
            Frames::Mix(m) => m.name.clone(),
        }
    }

    /// Parses `--imix` values: each value is one mix, except that a value
    /// made only of named patterns and genomes may list several separated
    /// by commas (`imix0,imix1,imix2`); custom weights use commas
    /// themselves (`64:7,594:4,1518:1`) and are always one mix.
    pub fn parse_mixes(values: &[String]) -> Result<Vec<FrameMix>, MixError> {
        let mut out = Vec::new();
        for v in values {
            let parts: Vec<&str> = v.split(',').collect();
            let listed: Option<Vec<FrameMix>> = (parts.len() > 1)
                .then(|| {
                    parts
                        .iter()
                        .map(|p| {
                            (!p.contains(':') || p.trim().starts_with("genome:"))
                                .then(|| FrameMix::parse(p).ok())
                                .flatten()
                        })
                        .collect()
                })
                .flatten();
            match listed {
                Some(mixes) => out.extend(mixes),
                None => out.push(FrameMix::parse(v)?),
            }
        }
        Ok(out)
    }
}

/// Most templates a [`FrameSet`] holds: every size of a mix, in each of
/// two traffic classes.
pub const MAX_SET_TEMPLATES: usize = 2 * MAX_SIZES;
/// Longest repetition of a [`FrameSet`]: a mix's sequence, once per class.
pub const MAX_SET_SEQUENCE: usize = 2 * MAX_SEQUENCE;

/// A trial's frames: one template per size and the order frames take them
/// in (frame `n` is built from `get(n)`). A single size is a set of one.
///
/// A set may hold two traffic classes (a drop test: class 0 is the
/// legitimate traffic, class 1 the traffic the DUT is configured to drop).
/// The generator gives class `c` the stream id `stream + c * streams`, so
/// the receiver counts each class apart. Frame `n` keeps its sequence
/// number `n` whatever its class, so a class sees only its own numbers
/// (every other one); counts stay exact, since they are counts of distinct
/// numbers, and [`frames_of_class`](Self::frames_of_class) says how many
/// of the first `n` frames each class has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSet {
    templates: Vec<FrameTemplate>,
    sequence: Vec<u8>,
    /// The traffic class of each template (all 0 in a one-class set).
    classes: Vec<u8>,
}

impl FrameSet {
    /// Every frame from one template.
    pub fn single(template: FrameTemplate) -> FrameSet {
        FrameSet {
            templates: vec![template],
            sequence: vec![0],
            classes: vec![0],
        }
    }

    /// The templates of `flow` at each size of `mix`, in the mix's order.
    pub fn new(flow: &FlowSpec, mix: &FrameMix) -> FrameSet {
        FrameSet {
            templates: mix
                .sizes
                .iter()
                .map(|&s| FrameTemplate::new(flow, s))
                .collect(),
            sequence: mix.sequence.clone(),
            classes: vec![0; mix.sizes.len()],
        }
    }

    /// Two classes taking turns frame by frame: `legit` (class 0) on even
    /// frames, `other` (class 1) on odd ones, each in its own set's order
    /// of sizes, so both classes have the same sizes in the same shares.
    /// Both must be one-class sets of the same sizes (the same set built
    /// for two flows).
    pub fn two_classes(legit: FrameSet, other: FrameSet) -> FrameSet {
        assert_eq!(
            legit.sequence, other.sequence,
            "the same sizes in both classes"
        );
        assert!(legit.classes() == 1 && other.classes() == 1);
        let k = legit.templates.len() as u8;
        let sequence = legit.sequence.iter().flat_map(|&s| [s, s + k]).collect();
        let classes = [vec![0; k as usize], vec![1; k as usize]].concat();
        let mut templates = legit.templates;
        templates.extend(other.templates);
        FrameSet {
            templates,
            sequence,
            classes,
        }
    }

    /// The template of frame `n` of a stream.
    #[inline]
    pub fn get(&self, n: u64) -> &FrameTemplate {
        &self.templates[self.template_index(n)]
    }

    /// The index into [`templates`](Self::templates) of frame `n`.
    #[inline]
    pub fn template_index(&self, n: u64) -> usize {
        if self.templates.len() == 1 {
            return 0;
        }
        let slot = (n % self.sequence.len() as u64) as usize;
        self.sequence[slot] as usize
    }

    /// The traffic class of frame `n`.
    #[inline]
    pub fn class_of(&self, n: u64) -> u8 {
        self.classes[self.template_index(n)]
    }

    /// The traffic class of each template.
    pub fn template_classes(&self) -> &[u8] {
        &self.classes
    }

    /// How many traffic classes the set sends (1 or 2).
    pub fn classes(&self) -> u8 {
        self.classes.iter().max().map_or(1, |&c| c + 1)
    }

    /// How many of frames `0 .. n` belong to `class`.
    pub fn frames_of_class(&self, n: u64, class: u8) -> u64 {
        let in_class = |slots: &[u8]| {
            slots
                .iter()
                .filter(|&&t| self.classes[t as usize] == class)
                .count() as u64
        };
        let len = self.sequence.len() as u64;
        (n / len) * in_class(&self.sequence) + in_class(&self.sequence[..(n % len) as usize])
    }

    pub fn templates(&self) -> &[FrameTemplate] {
        &self.templates
    }

    /// Index into [`templates`](Self::templates) for each frame of one repetition.
    pub fn sequence(&self) -> &[u8] {
        &self.sequence
    }

    /// The longest template: what a buffer must hold.
    pub fn largest(&self) -> &FrameTemplate {
        self.templates
            .iter()
            .max_by_key(|t| t.len())
            .expect("a frame set has a template")
    }
}

/// Smooth weighted round robin: each slot goes to the index whose running
/// credit is highest (ties to the lower index), which then pays the total.
/// Every index gets exactly its weight of slots, as evenly spaced as the
/// weights allow.
fn spread(weights: &[u64]) -> Vec<u8> {
    let total: i64 = weights.iter().sum::<u64>() as i64;
    let mut credit = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, &w) in credit.iter_mut().zip(weights) {
            *c += w as i64;
        }
        let best = (0..credit.len())
            .max_by_key(|&i| (credit[i], std::cmp::Reverse(i)))
            .expect("weights are not empty");
        credit[best] -= total;
        out.push(best as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes_of(m: &FrameMix) -> Vec<u16> {
        m.sequence
            .iter()
            .map(|&i| m.sizes[i as usize].frame())
            .collect()
    }

    #[test]
    fn the_lancom_patterns_have_their_printed_ratios() {
        let m = FrameMix::parse("imix0").unwrap();
        assert_eq!(m.name, "IMIX 0");
        assert_eq!(m.sequence.len(), 100);
        let by_size: Vec<(u16, u64)> = m.sizes.iter().map(|s| s.frame()).zip(m.counts()).collect();
        assert_eq!(
            by_size,
            vec![
                (64, 45),
                (128, 20),
                (256, 5),
                (512, 3),
                (1024, 2),
                (1280, 1),
                (1364, 24)
            ]
        );
        let m = FrameMix::parse("IMIX 1").unwrap();
        assert_eq!(m.counts(), vec![7, 4, 1]);
        assert_eq!(m.largest().frame(), 1418);
        let m = FrameMix::parse("imix2").unwrap();
        assert_eq!(m.counts(), vec![29, 1, 12, 8], "58:2:24:16 reduced by 2");
        let m = FrameMix::parse("simple").unwrap();
        assert_eq!(sizes_of(&m).len(), 12);
        // Mean L2 size of 7:4:1 of 64/594/1518: (448 + 2376 + 1518) / 12.
        assert!((m.mean_bytes(Layer::L2) - 4342.0 / 12.0).abs() < 1e-9);
        assert!((m.mean_bytes(Layer::L1) - (4342.0 / 12.0 + 20.0)).abs() < 1e-9);
    }

    #[test]
    fn weighted_mixes_are_spread_not_sent_in_blocks() {
        let m = FrameMix::parse("64:7,594:4,1518:1").unwrap();
        let s = sizes_of(&m);
        // Never more than two 64-byte frames in a row for 7 of 12.
        let longest_run = s.windows(3).filter(|w| w.iter().all(|&x| x == 64)).count();
        assert_eq!(longest_run, 0, "{s:?}");
        // The large frame's neighbours are small ones: no two large frames meet.
        let m = FrameMix::parse("64:1,1518:1").unwrap();
        assert_eq!(sizes_of(&m), vec![64, 1518]);
        // Percentages reduce to the shortest sequence.
        let m = FrameMix::parse("64:50,1518:50").unwrap();
        assert_eq!(m.sequence.len(), 2);
        // A repeated size merges.
        let m = FrameMix::parse("64:1,128:1,64:2").unwrap();
        assert_eq!(m.counts(), vec![3, 1]);
    }

    #[test]
    fn spread_gives_each_index_exactly_its_weight() {
        for weights in [
            vec![45, 20, 5, 3, 2, 1, 24],
            vec![1],
            vec![3, 5, 7],
            vec![1, 99],
        ] {
            let s = spread(&weights);
            for (i, &w) in weights.iter().enumerate() {
                assert_eq!(s.iter().filter(|&&x| x as usize == i).count() as u64, w);
            }
            // Evenly spaced: in any window of length L, index i appears
            // within two of its share w * L / total (a block would be off by
            // up to half the window).
            let total: u64 = weights.iter().sum();
            let l = (total / 2).max(1) as usize;
            for (i, &w) in weights.iter().enumerate() {
                for start in 0..s.len() - l + 1 {
                    let n = s[start..start + l]
                        .iter()
                        .filter(|&&x| x as usize == i)
                        .count() as f64;
                    let want = w as f64 * l as f64 / total as f64;
                    assert!(
                        (n - want).abs() <= 2.0 + 1e-9,
                        "{weights:?} i={i} {n} {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn genomes_are_sent_as_written() {
        let m = FrameMix::parse("genome:aaaaaaaddddg").unwrap();
        assert_eq!(
            sizes_of(&m),
            vec![64, 64, 64, 64, 64, 64, 64, 512, 512, 512, 512, 1518]
        );
        assert_eq!(m.name, "genome aaaaaaaddddg");
        let m = FrameMix::parse("genome:gab").unwrap();
        assert_eq!(sizes_of(&m), vec![1518, 64, 128]);
        assert_eq!(m.size_of(4).frame(), 64);
        assert_eq!(
            FrameMix::parse("genome:abz"),
            Err(MixError::GenomeLetter('z'))
        );
        assert_eq!(
            FrameMix::parse("genome:aj"),
            Err(MixError::GenomeLetter('j'))
        );
        assert!(matches!(
            FrameMix::parse("genome:"),
            Err(MixError::Syntax(_))
        ));
        let long = "a".repeat(MAX_SEQUENCE + 1);
        assert!(matches!(
            FrameMix::parse(&format!("genome:{long}")),
            Err(MixError::TooLong(_, _))
        ));
    }

    #[test]
    fn bad_mixes_are_refused_with_the_reason() {
        assert!(matches!(FrameMix::parse("imix9"), Err(MixError::Syntax(_))));
        assert!(matches!(
            FrameMix::parse("64:0,128:1"),
            Err(MixError::Weight(_))
        ));
        assert!(matches!(FrameMix::parse("64:x"), Err(MixError::Weight(_))));
        assert!(matches!(FrameMix::parse("32:1"), Err(MixError::Size(_))));
        assert!(matches!(
            FrameMix::parse("64:1,65:1,66:1,67:1,68:1,69:1,70:1,71:1,72:1"),
            Err(MixError::TooManySizes(_))
        ));
        assert!(matches!(
            FrameMix::parse("64:100,128:29"),
            Err(MixError::TooLong(_, 129))
        ));
        // A repeated size's weights are summed without overflow: 1 + 2^32 - 1
        // of 1518 against 1 of 64 (the sum wrapped to 0 in a u32, and 1518
        // was listed but never sent).
        assert!(matches!(
            FrameMix::parse("1518:1,64:1,1518:4294967295"),
            Err(MixError::TooLong(_, _))
        ));
        let m = FrameMix::parse("64:4294967295,128:4294967295,64:4294967295").unwrap();
        assert_eq!(m.counts(), vec![2, 1]);
        // Nine letters are nine sizes, one more than a mix may have.
        assert!(matches!(
            FrameMix::parse("genome:abcdefghi"),
            Err(MixError::TooManySizes(_))
        ));
    }

    #[test]
    fn a_frame_set_builds_each_frame_from_its_sizes_template() {
        use crate::MacAddr;
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "198.18.0.2".parse().unwrap(),
            dst_ip: "198.19.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            ttl: 64,
            vlan: None,
        };
        let mix = FrameMix::parse("genome:aga").unwrap();
        let set = FrameSet::new(&flow, &mix);
        let lens: Vec<usize> = (0..6).map(|n| set.get(n).len()).collect();
        assert_eq!(lens, vec![60, 1514, 60, 60, 1514, 60]);
        assert_eq!(set.largest().len(), 1514);
        // A smaller size's frame is the largest one cut short, except for
        // the headers (lengths, checksums): what the xdp engine relies on.
        let (small, big) = (set.get(0).bytes(), set.get(1).bytes());
        assert_eq!(small[54..], big[54..60]);
        let single = FrameSet::single(set.get(1).clone());
        assert_eq!(single.get(7).len(), 1514);
    }

    #[test]
    fn mix_lists_split_only_where_commas_separate_mixes() {
        let names = |v: &[&str]| -> Vec<String> {
            let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            Frames::parse_mixes(&v)
                .unwrap()
                .into_iter()
                .map(|m| m.name)
                .collect()
        };
        assert_eq!(
            names(&["imix0,imix1,imix2"]),
            vec!["IMIX 0", "IMIX 1", "IMIX 2"]
        );
        assert_eq!(names(&["64:7,594:4,1518:1"]), vec!["64:7,594:4,1518:1"]);
        assert_eq!(
            names(&["simple", "genome:ag,genome:ga"]),
            vec!["simple IMIX", "genome ag", "genome ga"]
        );
        assert!(Frames::parse_mixes(&["imix0,bogus".to_string()]).is_err());
        // A rate in % of line for a mix counts its mean L1 frame.
        let m = Frames::Mix(FrameMix::parse("genome:ag").unwrap());
        let fps = m.fps(crate::Rate::PercentOfLine(50.0), 1_000_000_000);
        assert!((fps - 0.5 * 1e9 / (8.0 * (84.0 + 1538.0) / 2.0)).abs() < 1e-6);
        assert_eq!(m.largest().frame(), 1518);
    }

    #[test]
    fn l1_bytes_follow_the_sequence() {
        let m = FrameMix::parse("genome:ag").unwrap();
        assert_eq!(m.l1_bytes(0), 0);
        assert_eq!(m.l1_bytes(1), 84);
        assert_eq!(m.l1_bytes(2), 84 + 1538);
        assert_eq!(m.l1_bytes(5), 2 * (84 + 1538) + 84);
        // Line rate of the simple IMIX at 10G: 1e10 / (8 x mean L1 bytes).
        let s = FrameMix::parse("simple").unwrap();
        let want = 1e10 / (8.0 * (4342.0 / 12.0 + 20.0));
        assert!((s.line_rate_fps(10_000_000_000) - want).abs() < 1e-6);
    }

    #[test]
    fn two_classes_take_turns_with_the_same_sizes() {
        let flow = |last: u8| crate::FlowSpec {
            src_mac: crate::MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: crate::MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: std::net::Ipv4Addr::new(198, 18, 0, last).into(),
            dst_ip: std::net::Ipv4Addr::new(198, 19, 0, 2).into(),
            src_port: 9,
            dst_port: 9,
            ttl: 64,
            vlan: None,
        };
        let mix = FrameMix::parse("64:7,594:4,1518:1").unwrap();
        let set =
            FrameSet::two_classes(FrameSet::new(&flow(2), &mix), FrameSet::new(&flow(9), &mix));
        assert_eq!(set.classes(), 2);
        assert_eq!(set.templates().len(), 6);
        assert_eq!(set.sequence().len(), 2 * mix.sequence.len());
        for n in 0..200u64 {
            // Classes alternate; both halves of a pair have the same size
            // and the legitimate one is the mix's frame n / 2.
            assert_eq!(set.class_of(n), (n % 2) as u8);
            assert_eq!(set.get(n).len(), set.get(n - n % 2).len());
            let legit = FrameSet::new(&flow(2), &mix);
            assert_eq!(set.get(n - n % 2), legit.get(n / 2));
            let src = if n % 2 == 0 { 2 } else { 9 };
            assert_eq!(set.get(n).bytes()[29], src, "frame {n}: source address");
        }
        // Counting by formula agrees with counting frame by frame.
        for n in [0u64, 1, 2, 23, 24, 25, 1000, 1001] {
            for c in 0..2 {
                let by_hand = (0..n).filter(|&i| set.class_of(i) == c).count() as u64;
                assert_eq!(set.frames_of_class(n, c), by_hand, "{n} frames, class {c}");
            }
        }
        // A one-class set has everything in class 0.
        let one = FrameSet::new(&flow(2), &mix);
        assert_eq!(one.classes(), 1);
        assert_eq!(one.frames_of_class(1001, 0), 1001);
        assert_eq!(one.frames_of_class(1001, 1), 0);
    }
}
