//! Static SAs as Linux gateways are configured with them: the arguments
//! of `ip xfrm state add`, one SA a line, as `ip -batch` reads them after
//! `xfrm state add` (a leading `ip xfrm state add` or `xfrm state add` is
//! taken too, so a gateway's own script can be given as it is). `#` starts
//! a comment; blank lines are skipped.
//!
//! ```text
//! src 198.18.1.2 dst 198.18.1.1 proto esp spi 0x2001 reqid 1 mode tunnel \
//!     enc 'cbc(des3_ede)' 0x<24 bytes> auth-trunc 'hmac(md5)' 0x<16 bytes> 96
//! ```
//!
//! What is read: `src`, `dst`, `proto esp|ah`, `spi`, `reqid`, `mode
//! tunnel`, one of `aead 'rfc4106(gcm(aes))' KEY 128` or `enc ALG KEY`
//! (`cbc(aes)`, `cbc(des3_ede)`, `cbc(des)`, `ecb(cipher_null)` with the key
//! `""`) with `auth-trunc ALG KEY BITS` or `auth ALG KEY` (`hmac(md5)`,
//! `hmac(sha1)`, `hmac(sha256)`, `hmac(sha384)`, `hmac(sha512)`, truncated
//! as RFC 2403/2404/4868 send them), and `encap espinudp SPORT DPORT OA`;
//! `replay-window N` and the flags that change nothing on the wire are
//! taken and left (`flag esn` is refused: no extended sequence numbers).
//! Anything else is refused by name, with its line: a static SA that is
//! read wrong fails only later, as ICV failures at the gateway.

use crate::keys::SaKeys;
use crate::suite::{EspCipher, EspIntegrity, EspSuite};
use std::net::IpAddr;

/// The protocol of a static SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XfrmProto {
    Esp,
    Ah,
}

/// The integrity of an AH SA (RFC 4302): an HMAC and its key (wiped when
/// dropped, never shown by `Debug`).
#[derive(Clone)]
pub struct AhKeys {
    pub integrity: EspIntegrity,
    pub key: Vec<u8>,
}

impl std::fmt::Debug for AhKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AhKeys")
            .field("integrity", &self.integrity)
            .finish_non_exhaustive()
    }
}

impl Drop for AhKeys {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

/// One line of the file: an SA in one direction.
#[derive(Debug, Clone)]
pub struct XfrmState {
    /// The line it was read from (1-based), for messages.
    pub line: usize,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: XfrmProto,
    pub spi: u32,
    pub reqid: Option<u32>,
    /// ESP: the suite and its keys.
    pub esp: Option<SaKeys>,
    /// AH: the integrity and its key.
    pub ah: Option<AhKeys>,
    /// `encap espinudp SPORT DPORT`: ESP in UDP (RFC 3948) on these ports.
    pub udp_encap: Option<(u16, u16)>,
}

/// A line that is no static SA linerate can take: its number and why, in
/// words that name the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct XfrmError {
    pub line: usize,
    pub message: String,
}

/// Reads every SA of `text` (see the module's documentation).
pub fn parse_states(text: &str) -> Result<Vec<XfrmState>, XfrmError> {
    let mut states = Vec::new();
    for (i, raw) in joined_lines(text) {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let error = |message: String| XfrmError { line: i, message };
        let words = words(line).map_err(error)?;
        states.push(parse_state(i, &words).map_err(error)?);
    }
    Ok(states)
}

/// The lines of `text` with a trailing `\` joined to the next, each with
/// the number of its first line.
fn joined_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let (body, continues) = match line.trim_end().strip_suffix('\\') {
            Some(body) => (body, true),
            None => (line, false),
        };
        match out.last_mut() {
            Some((_, joined)) if open => {
                joined.push(' ');
                joined.push_str(body);
            }
            _ => out.push((i + 1, body.to_string())),
        }
        open = continues;
    }
    out
}

/// The words of a line as a shell splits them: `'cbc(aes)'` and
/// `"cbc(aes)"` are one word, `""` an empty one.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            if c == '\'' || c == '"' {
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(other) => word.push(other),
                        None => return Err(format!("a {c} quote is not closed: close it")),
                    }
                }
            } else {
                word.push(c);
            }
        }
        out.push(word);
    }
    Ok(out)
}

/// One SA from the words of its line.
fn parse_state(line: usize, words: &[String]) -> Result<XfrmState, String> {
    let mut w: Vec<&str> = words.iter().map(String::as_str).collect();
    // A gateway script's own lines: `ip xfrm state add ...`.
    for prefix in [
        &["ip", "xfrm", "state", "add"][..],
        &["xfrm", "state", "add"],
    ] {
        if w.starts_with(prefix) {
            w.drain(..prefix.len());
            break;
        }
    }
    let mut it = w.into_iter();
    let (mut src, mut dst, mut proto, mut spi, mut reqid) = (None, None, None, None, None);
    let (mut enc, mut aead, mut auth, mut udp_encap) = (None, None, None, None);
    let mut mode = None;
    while let Some(key) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .ok_or_else(|| format!("'{key}' needs {what} after it"))
        };
        match key {
            "src" | "dst" => {
                let text = value("an address")?;
                let addr: IpAddr = text
                    .parse()
                    .map_err(|_| format!("'{key} {text}': not an IP address"))?;
                if key == "src" {
                    src = Some(addr);
                } else {
                    dst = Some(addr);
                }
            }
            "proto" => {
                proto = Some(match value("esp or ah")? {
                    "esp" => XfrmProto::Esp,
                    "ah" => XfrmProto::Ah,
                    other => {
                        return Err(format!(
                            "'proto {other}': linerate takes esp and ah SAs (comp and route2 are no ESP)"
                        ))
                    }
                })
            }
            "spi" => spi = Some(number(value("a number")?, "spi")?),
            "reqid" => reqid = Some(number(value("a number")?, "reqid")?),
            "mode" => {
                let m = value("tunnel")?;
                if m != "tunnel" {
                    return Err(format!(
                        "'mode {m}': linerate is the peer of a gateway, in tunnel mode: write mode tunnel"
                    ));
                }
                mode = Some(m);
            }
            "enc" => {
                let alg = value("an algorithm and a key")?;
                enc = Some((alg, hex_key(value("a key")?, key)?));
            }
            "aead" => {
                let alg = value("an algorithm, a key and the ICV bits")?;
                let k = hex_key(value("a key")?, key)?;
                let bits = number(value("the ICV length in bits")?, "aead")?;
                aead = Some((alg, k, bits));
            }
            "auth" | "auth-trunc" => {
                let alg = value("an algorithm and a key")?;
                let k = hex_key(value("a key")?, key)?;
                let bits = if key == "auth-trunc" {
                    Some(number(value("the truncation in bits")?, key)?)
                } else {
                    None
                };
                auth = Some((key, alg, k, bits));
            }
            "encap" => {
                let kind = value("espinudp and two ports")?;
                if kind != "espinudp" {
                    return Err(format!(
                        "'encap {kind}': ESP travels in UDP as espinudp (RFC 3948): write encap espinudp 4500 4500 0.0.0.0"
                    ));
                }
                let sport = number(value("a source port")?, "encap")?;
                let dport = number(value("a destination port")?, "encap")?;
                let _original_address = value("the original address (0.0.0.0)")?;
                let port = |p: u32| {
                    u16::try_from(p).map_err(|_| format!("'encap espinudp': port {p} is above 65535"))
                };
                udp_encap = Some((port(sport)?, port(dport)?));
            }
            // The receiver's own window: linerate keeps its own (REPLAY_WINDOW).
            "replay-window" => {
                number(value("a number")?, key)?;
            }
            // Flags that change nothing on the wire are taken as a gateway's
            // file has them; extended sequence numbers would.
            "flag" => loop {
                match it.as_slice().first().copied() {
                    Some(
                        "noecn" | "decap-dscp" | "nopmtudisc" | "wildrecv" | "icmp" | "af-unspec"
                        | "align4",
                    ) => {
                        it.next();
                    }
                    Some("esn") => {
                        return Err("'flag esn': linerate's ESP has 32-bit sequence numbers: leave esn out on both ends".into())
                    }
                    _ => break,
                }
            },
            "sel" | "mark" | "if_id" | "output-mark" => {
                return Err(format!(
                    "'{key}' is not read for a static SA: leave it out (linerate's SAs are selected by address and SPI)"
                ));
            }
            other => {
                return Err(format!(
                    "'{other}' is not an ip xfrm state field linerate reads: use src, dst, proto, spi, reqid, mode, enc, auth, auth-trunc, aead, encap"
                ))
            }
        }
    }
    let missing =
        |what: &str| format!("no '{what}': every SA names src, dst, proto, spi and mode tunnel");
    let (src, dst) = (
        src.ok_or_else(|| missing("src"))?,
        dst.ok_or_else(|| missing("dst"))?,
    );
    let proto = proto.ok_or_else(|| missing("proto"))?;
    let spi = spi.ok_or_else(|| missing("spi"))?;
    mode.ok_or_else(|| missing("mode"))?;
    if spi < 256 {
        return Err(format!(
            "'spi {spi}': SPIs 0 to 255 are reserved (RFC 4303 §2.1): give one from 256 up"
        ));
    }
    let integrity = auth
        .map(|(key, alg, k, bits)| integrity_of(key, alg, bits).map(|i| (i, k)))
        .transpose()?;
    let (esp, ah) = match proto {
        XfrmProto::Ah => {
            if enc.is_some() || aead.is_some() {
                return Err("an AH SA encrypts nothing: leave enc and aead out".into());
            }
            let Some((integrity, key)) = integrity else {
                return Err(
                    "an AH SA needs auth-trunc ALG KEY BITS (e.g. 'hmac(md5)' 0x... 96)".into(),
                );
            };
            check_key_len(integrity_key_len(integrity), key.len(), "auth")?;
            (None, Some(AhKeys { integrity, key }))
        }
        XfrmProto::Esp => {
            let (suite, enc_key, auth_key) = match (aead, enc, integrity) {
                (Some((alg, key, bits)), None, None) => {
                    if alg != "rfc4106(gcm(aes))" {
                        return Err(format!(
                            "'aead {alg}': linerate's AEAD is AES-GCM: write aead 'rfc4106(gcm(aes))' KEY 128"
                        ));
                    }
                    if bits != 128 {
                        return Err(format!(
                            "'aead {alg} ... {bits}': linerate's AES-GCM has a 16-byte ICV: write 128"
                        ));
                    }
                    let key_len = match key.len() {
                        20 => 16,
                        36 => 32,
                        n => {
                            return Err(format!(
                                "'aead {alg}': a {n}-byte key; AES-GCM takes 20 bytes (AES-128 and a 4-byte salt) or 36 (AES-256 and salt)"
                            ))
                        }
                    };
                    let suite = EspSuite {
                        cipher: EspCipher::AesGcm16 { key_len },
                        integrity: EspIntegrity::Aead,
                    };
                    (suite, key, Vec::new())
                }
                (None, Some((alg, key)), Some((integrity, auth_key))) => {
                    let cipher = cipher_of(alg, key.len())?;
                    let suite = EspSuite { cipher, integrity };
                    check_key_len(suite.integrity_key_len(), auth_key.len(), "auth")?;
                    (suite, key, auth_key)
                }
                (Some(_), _, _) => {
                    return Err("aead already protects the packet: leave enc and auth out".into())
                }
                (None, Some(_), None) => {
                    return Err("an ESP SA without integrity is refused: linerate tells damaged frames by their ICV; add auth-trunc ALG KEY BITS".into())
                }
                (None, None, _) => {
                    return Err("an ESP SA needs enc ALG KEY and auth-trunc ALG KEY BITS, or aead 'rfc4106(gcm(aes))' KEY 128".into())
                }
            };
            let keys = SaKeys::new(suite, spi, enc_key, auth_key).map_err(|e| e.to_string())?;
            (Some(keys), None)
        }
    };
    Ok(XfrmState {
        line,
        src,
        dst,
        proto,
        spi,
        reqid,
        esp,
        ah,
        udp_encap,
    })
}

/// A decimal or `0x` hexadecimal number.
fn number(text: &str, key: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("'{key} {text}': not a number (write 1234 or 0x4d2)"))
}

/// A key as `ip xfrm` writes it: `0x` and hexadecimal digits, or `""` (no
/// key, NULL encryption).
fn hex_key(text: &str, key: &str) -> Result<Vec<u8>, String> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let bad = || format!("'{key}': the key must be 0x and an even number of hex digits");
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .ok_or_else(bad)?;
    if digits.len() % 2 != 0 {
        return Err(bad());
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).map_err(|_| bad()))
        .collect()
}

/// The cipher of `enc ALG` with a key of `key_len` bytes.
fn cipher_of(alg: &str, key_len: usize) -> Result<EspCipher, String> {
    let wrong = |takes: &str| {
        Err(format!(
            "'enc {alg}': a {key_len}-byte key; {alg} takes {takes}"
        ))
    };
    match alg {
        "cbc(aes)" | "aes" => match key_len {
            16 | 24 | 32 => Ok(EspCipher::AesCbc {
                key_len: key_len as u8,
            }),
            _ => wrong("16, 24 or 32 bytes"),
        },
        "cbc(des3_ede)" | "des3_ede" => match key_len {
            24 => Ok(EspCipher::TripleDesCbc),
            _ => wrong("24 bytes"),
        },
        "cbc(des)" | "des" => match key_len {
            8 => Ok(EspCipher::DesCbc),
            _ => wrong("8 bytes"),
        },
        "ecb(cipher_null)" | "cipher_null" => match key_len {
            0 => Ok(EspCipher::Null),
            _ => wrong("no key: write \"\""),
        },
        other => Err(format!(
            "'enc {other}': linerate encrypts with cbc(aes), cbc(des3_ede), cbc(des) or ecb(cipher_null)"
        )),
    }
}

/// The integrity of `auth ALG` or `auth-trunc ALG KEY BITS`: the HMACs as
/// ESP and AH truncate them (RFC 2403, 2404, 4868). Linux's untruncated
/// `auth 'hmac(sha256)'` sends 96 bits, which no RFC does: refused.
fn integrity_of(key: &str, alg: &str, bits: Option<u32>) -> Result<EspIntegrity, String> {
    let (integrity, rfc_bits) = match alg {
        "hmac(md5)" | "md5" => (EspIntegrity::Md5, 96),
        "hmac(sha1)" | "sha1" => (EspIntegrity::Sha1, 96),
        "hmac(sha256)" | "sha256" => (EspIntegrity::Sha256, 128),
        "hmac(sha384)" | "sha384" => (EspIntegrity::Sha384, 192),
        "hmac(sha512)" | "sha512" => (EspIntegrity::Sha512, 256),
        other => {
            return Err(format!(
                "'{key} {other}': linerate's integrity is hmac(md5), hmac(sha1), hmac(sha256), hmac(sha384) or hmac(sha512)"
            ))
        }
    };
    match bits {
        Some(b) if b == rfc_bits => Ok(integrity),
        None if rfc_bits == 96 => Ok(integrity),
        given => Err(format!(
            "'{key} {alg}': {} bits, where RFC 2403/2404/4868 send {rfc_bits}: write auth-trunc '{alg}' KEY {rfc_bits}",
            given.map_or("96 (the kernel's default)".to_string(), |b| b.to_string())
        )),
    }
}

/// The HMAC key length ESP and AH take for `integrity` (its hash's output).
fn integrity_key_len(integrity: EspIntegrity) -> usize {
    EspSuite {
        cipher: EspCipher::Null,
        integrity,
    }
    .integrity_key_len()
}

fn check_key_len(expected: usize, got: usize, what: &str) -> Result<(), String> {
    if expected == got {
        Ok(())
    } else {
        Err(format!(
            "'{what}': a {got}-byte key where the algorithm takes {expected} bytes"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn hex(n: usize, byte: u8) -> String {
        format!("0x{}", format!("{byte:02x}").repeat(n))
    }

    #[test]
    fn the_cisco_reports_sas_read_as_a_linux_gateway_takes_them() {
        let text = format!(
            "# 3DES with HMAC-MD5, out and in\n\
             src 198.18.1.2 dst 198.18.1.1 proto esp spi 0x2001 reqid 1 mode tunnel enc 'cbc(des3_ede)' {k24} auth-trunc 'hmac(md5)' {k16} 96\n\
             \n\
             ip xfrm state add src 198.18.1.1 dst 198.18.1.2 proto esp spi 8194 reqid 1 mode tunnel \\\n\
                 enc \"cbc(des3_ede)\" {k24} auth 'hmac(md5)' {k16} encap espinudp 4500 4500 0.0.0.0\n\
             src 198.18.1.2 dst 198.18.1.1 proto ah spi 0x3001 reqid 1 mode tunnel auth-trunc 'hmac(md5)' {k16} 96\n\
             src 198.18.1.2 dst 198.18.1.1 proto esp spi 0x4001 mode tunnel replay-window 32 flag noecn af-unspec enc 'ecb(cipher_null)' \"\" auth-trunc 'hmac(sha512)' {k64} 256\n\
             src 198.18.1.2 dst 198.18.1.1 proto esp spi 0x5001 mode tunnel aead 'rfc4106(gcm(aes))' {k36} 128\n",
            k24 = hex(24, 0x11),
            k16 = hex(16, 0x22),
            k64 = hex(64, 0x33),
            k36 = hex(36, 0x44),
        );
        let s = parse_states(&text).unwrap();
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].line, 2);
        assert_eq!(s[0].src, IpAddr::V4(Ipv4Addr::new(198, 18, 1, 2)));
        assert_eq!(
            (s[0].proto, s[0].spi, s[0].reqid),
            (XfrmProto::Esp, 0x2001, Some(1))
        );
        let esp = s[0].esp.as_ref().unwrap();
        assert_eq!(esp.suite, EspSuite::TripleDesMd5);
        assert_eq!(esp.encryption_key, vec![0x11; 24]);
        assert_eq!(esp.integrity_key, vec![0x22; 16]);
        assert_eq!(s[0].udp_encap, None);
        // The continued line, its number that of its first line.
        assert_eq!((s[1].line, s[1].spi), (4, 8194));
        assert_eq!(s[1].udp_encap, Some((4500, 4500)));
        assert_eq!(s[1].esp.as_ref().unwrap().suite, EspSuite::TripleDesMd5);
        let ah = s[2].ah.as_ref().unwrap();
        assert_eq!(
            (s[2].proto, ah.integrity),
            (XfrmProto::Ah, EspIntegrity::Md5)
        );
        assert!(s[2].esp.is_none());
        assert_eq!(
            s[3].esp.as_ref().unwrap().suite,
            EspSuite::parse("null-sha512").unwrap()
        );
        assert_eq!(s[4].esp.as_ref().unwrap().suite, EspSuite::Aes256Gcm16);
    }

    #[test]
    fn refusals_name_the_line_and_the_fix() {
        let k16 = hex(16, 1);
        let k32 = hex(32, 1);
        let base = "src 10.0.0.1 dst 10.0.0.2 proto esp spi 0x1000 mode tunnel";
        for (line, says) in [
            (format!("{base} enc 'cbc(aes)' {k16}"), "without integrity"),
            (
                format!("{base} enc 'cbc(aes)' {k16} auth 'hmac(sha256)' {k32}"),
                "write auth-trunc 'hmac(sha256)' KEY 128",
            ),
            (
                format!("{base} enc 'cbc(aes)' {k16} auth-trunc 'hmac(sha256)' {k32} 96"),
                "RFC 2403/2404/4868 send 128",
            ),
            (
                format!("{base} enc 'cbc(des3_ede)' {k16} auth-trunc 'hmac(md5)' {k16} 96"),
                "takes 24 bytes",
            ),
            (
                format!("{base} enc 'cbc(aes)' {k16} auth-trunc 'hmac(md5)' {k32} 96"),
                "takes 16 bytes",
            ),
            (
                format!("{base} enc 'cbc(camellia)' {k16} auth-trunc 'hmac(md5)' {k16} 96"),
                "cbc(aes), cbc(des3_ede)",
            ),
            (
                format!("{base} aead 'rfc4106(gcm(aes))' {} 64", hex(20, 1)),
                "16-byte ICV",
            ),
            (
                format!("{base} enc 'cbc(aes)' 0x123 auth-trunc 'hmac(md5)' {k16} 96"),
                "even number of hex digits",
            ),
            (
                "src 10.0.0.1 dst 10.0.0.2 proto esp spi 0x1000 mode transport".to_string(),
                "mode tunnel",
            ),
            (
                "src 10.0.0.1 dst 10.0.0.2 proto esp spi 7 mode tunnel".to_string(),
                "reserved",
            ),
            (
                "src 10.0.0.1 proto esp spi 0x1000 mode tunnel".to_string(),
                "no 'dst'",
            ),
            (format!("{base} mark 7"), "leave it out"),
            (
                format!("{base} flag esn enc 'cbc(aes)' {k16} auth-trunc 'hmac(md5)' {k16} 96"),
                "esn",
            ),
            (format!("{base} enc 'cbc(aes)"), "quote is not closed"),
            (format!("{base} frobnicate 1"), "'frobnicate' is not"),
            (
                "src 10.0.0.1 dst 10.0.0.2 proto ah spi 0x1000 mode tunnel".to_string(),
                "auth-trunc",
            ),
        ] {
            let e = parse_states(&format!("# comment\n{line}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{line}");
            assert!(e.to_string().contains(says), "{line}: {e}");
            assert!(e.to_string().starts_with("line 2: "), "{e}");
        }
    }

    #[test]
    fn no_key_is_shown_by_debug() {
        let text = format!(
            "src 10.0.0.1 dst 10.0.0.2 proto ah spi 0x1000 mode tunnel auth-trunc 'hmac(sha1)' {k} 96\n\
             src 10.0.0.1 dst 10.0.0.2 proto esp spi 0x1001 mode tunnel enc 'cbc(aes)' {k16} auth-trunc 'hmac(sha1)' {k} 96\n",
            k = hex(20, 0xab),
            k16 = hex(16, 0xab),
        );
        let shown = format!("{:?}", parse_states(&text).unwrap());
        assert!(
            !shown.to_lowercase().contains("ab, ") && !shown.contains("171"),
            "{shown}"
        );
    }
}
