//! A small client of strongSwan's vici protocol (the control socket charon
//! opens, `src/libcharon/plugins/vici/README.md` in strongSwan): enough to
//! stream `list-sas` and `list-conns`, whose answers the lab reads back as
//! a tree instead of parsing `swanctl`'s text (whose `--raw` form prints
//! values unquoted, so an identity with a space or a brace would break it).
//!
//! Transport: each segment is a 32-bit big-endian length, then that many
//! bytes. Packet: a type byte, for named types a name (8-bit length), then
//! a message. Message: elements, each a type byte; sections and lists
//! carry a name (8-bit length), values a blob (16-bit big-endian length).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

// Packet types.
const CMD_REQUEST: u8 = 0;
const CMD_RESPONSE: u8 = 1;
const CMD_UNKNOWN: u8 = 2;
const EVENT_REGISTER: u8 = 3;
const EVENT_UNREGISTER: u8 = 4;
const EVENT_CONFIRM: u8 = 5;
const EVENT_UNKNOWN: u8 = 6;
const EVENT: u8 = 7;

// Message element types.
const SECTION_START: u8 = 1;
const SECTION_END: u8 = 2;
const KEY_VALUE: u8 = 3;
const LIST_START: u8 = 4;
const LIST_ITEM: u8 = 5;
const LIST_END: u8 = 6;

/// vici's limit on one segment (512 KiB).
const MAX_SEGMENT: usize = 512 * 1024;
/// How long one answer may take: charon answers at once unless it is stuck.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One entry of a message: a value, a list of values or a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    Value(String),
    List(Vec<String>),
    Section(Section),
}

/// A section (or a whole message): its entries in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Section(pub(crate) Vec<(String, Item)>);

impl Section {
    fn get(&self, key: &str) -> Option<&Item> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value of `key`, if it is one.
    pub(crate) fn value(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Item::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The list `key` (empty if absent).
    pub(crate) fn list(&self, key: &str) -> &[String] {
        match self.get(key) {
            Some(Item::List(l)) => l,
            _ => &[],
        }
    }

    /// The subsection `key`.
    pub(crate) fn section(&self, key: &str) -> Option<&Section> {
        match self.get(key)? {
            Item::Section(s) => Some(s),
            _ => None,
        }
    }

    /// The subsections, with their names.
    pub(crate) fn sections(&self) -> impl Iterator<Item = (&str, &Section)> {
        self.0.iter().filter_map(|(k, v)| match v {
            Item::Section(s) => Some((k.as_str(), s)),
            _ => None,
        })
    }
}

/// Decodes a message.
pub(crate) fn decode(bytes: &[u8]) -> Result<Section, String> {
    let mut r = Reader { bytes, at: 0 };
    // The open sections, innermost last; the root is the first.
    let mut stack: Vec<(String, Section)> = vec![(String::new(), Section::default())];
    let mut list: Option<(String, Vec<String>)> = None;
    while r.at < bytes.len() {
        let kind = r.u8()?;
        match (kind, list.is_some()) {
            (LIST_ITEM, true) => {
                let v = r.value()?;
                list.as_mut().expect("open list").1.push(v);
            }
            (LIST_END, true) => {
                let (name, items) = list.take().expect("open list");
                push(&mut stack, name, Item::List(items));
            }
            (_, true) => return Err(format!("element type {kind} inside a list")),
            (SECTION_START, false) => {
                let name = r.name()?;
                stack.push((name, Section::default()));
            }
            (SECTION_END, false) => {
                if stack.len() < 2 {
                    return Err("a section ends that never started".into());
                }
                let (name, section) = stack.pop().expect("checked");
                push(&mut stack, name, Item::Section(section));
            }
            (KEY_VALUE, false) => {
                let name = r.name()?;
                let v = r.value()?;
                push(&mut stack, name, Item::Value(v));
            }
            (LIST_START, false) => list = Some((r.name()?, Vec::new())),
            _ => return Err(format!("unknown element type {kind}")),
        }
    }
    if list.is_some() || stack.len() != 1 {
        return Err("the message ends inside a section or list".into());
    }
    Ok(stack.pop().expect("root").1)
}

fn push(stack: &mut [(String, Section)], name: String, item: Item) {
    stack.last_mut().expect("root").1 .0.push((name, item));
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated at byte {}", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn name(&mut self) -> Result<String, String> {
        let n = self.u8()? as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    fn value(&mut self) -> Result<String, String> {
        let len = self.take(2)?;
        let n = u16::from_be_bytes([len[0], len[1]]) as usize;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }
}

/// A packet of `kind` named `name`, without a message, as one segment.
fn named_packet(kind: u8, name: &str) -> Vec<u8> {
    let mut packet = vec![kind, name.len() as u8];
    packet.extend_from_slice(name.as_bytes());
    let mut segment = (packet.len() as u32).to_be_bytes().to_vec();
    segment.extend(packet);
    segment
}

/// Reads one segment: (packet type, name if named, message bytes).
fn read_packet(stream: &mut UnixStream) -> Result<(u8, String, Vec<u8>), String> {
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| format!("reading from charon's vici socket: {e}"))?;
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_SEGMENT {
        return Err(format!("charon sent a vici segment of {len} bytes"));
    }
    let mut data = vec![0u8; len];
    stream
        .read_exact(&mut data)
        .map_err(|e| format!("reading from charon's vici socket: {e}"))?;
    let kind = data[0];
    let named = matches!(
        kind,
        CMD_REQUEST | EVENT_REGISTER | EVENT_UNREGISTER | EVENT
    );
    if !named {
        return Ok((kind, String::new(), data[1..].to_vec()));
    }
    let n = *data.get(1).ok_or("a named vici packet without its name")? as usize;
    let name = data
        .get(2..2 + n)
        .ok_or("a vici packet's name is truncated")?;
    Ok((
        kind,
        String::from_utf8_lossy(name).into_owned(),
        data[2 + n..].to_vec(),
    ))
}

/// Runs `command` (without arguments) on charon's vici socket `socket` and
/// returns the `event` messages it streamed before its response.
pub(crate) fn stream(socket: &Path, command: &str, event: &str) -> Result<Vec<Section>, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        format!(
            "connecting to charon's vici socket {}: {e}",
            socket.display()
        )
    })?;
    s.set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    let send = |s: &mut UnixStream, bytes: Vec<u8>| {
        s.write_all(&bytes)
            .map_err(|e| format!("writing to charon's vici socket: {e}"))
    };
    send(&mut s, named_packet(EVENT_REGISTER, event))?;
    match read_packet(&mut s)? {
        (EVENT_CONFIRM, ..) => {}
        (EVENT_UNKNOWN, ..) => return Err(format!("charon has no vici event '{event}'")),
        (kind, ..) => {
            return Err(format!(
                "vici answered registering '{event}' with type {kind}"
            ))
        }
    }
    send(&mut s, named_packet(CMD_REQUEST, command))?;
    let mut events = Vec::new();
    loop {
        match read_packet(&mut s)? {
            (EVENT, name, message) if name == event => events.push(decode(&message)?),
            (EVENT, ..) => {}
            (CMD_RESPONSE, ..) => break,
            (CMD_UNKNOWN, ..) => return Err(format!("charon has no vici command '{command}'")),
            (kind, ..) => return Err(format!("vici answered '{command}' with type {kind}")),
        }
    }
    // Closing the connection unregisters too; this is the polite way.
    let _ = send(&mut s, named_packet(EVENT_UNREGISTER, event));
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's encoding example.
    const EXAMPLE: &[u8] = &[
        3, 4, b'k', b'e', b'y', b'1', 0, 6, b'v', b'a', b'l', b'u', b'e', b'1', //
        1, 8, b's', b'e', b'c', b't', b'i', b'o', b'n', b'1', //
        1, 11, b's', b'u', b'b', b'-', b's', b'e', b'c', b't', b'i', b'o', b'n', //
        3, 4, b'k', b'e', b'y', b'2', 0, 6, b'v', b'a', b'l', b'u', b'e', b'2', //
        2,    //
        4, 5, b'l', b'i', b's', b't', b'1', //
        5, 0, 5, b'i', b't', b'e', b'm', b'1', //
        5, 0, 5, b'i', b't', b'e', b'm', b'2', //
        6, 2,
    ];

    #[test]
    fn decodes_the_readme_example() {
        let m = decode(EXAMPLE).unwrap();
        assert_eq!(m.value("key1"), Some("value1"));
        let s1 = m.section("section1").unwrap();
        assert_eq!(
            s1.section("sub-section").unwrap().value("key2"),
            Some("value2")
        );
        assert_eq!(s1.list("list1"), ["item1", "item2"]);
        assert_eq!(s1.list("absent"), [] as [String; 0]);
        assert_eq!(m.sections().count(), 1);
    }

    #[test]
    fn refuses_broken_messages() {
        for (bytes, needle) in [
            (&EXAMPLE[..EXAMPLE.len() - 1], "ends inside"),
            (&EXAMPLE[..10], "truncated"),
            (&[2u8][..], "never started"),
            (&[9u8][..], "unknown element"),
            (&[4, 1, b'l', 3][..], "inside a list"),
            (&[3, 200][..], "truncated"),
        ] {
            let err = decode(bytes).unwrap_err();
            assert!(err.contains(needle), "{bytes:?}: {err}");
        }
        assert_eq!(decode(&[]).unwrap(), Section::default());
    }

    #[test]
    fn named_packets_are_length_prefixed() {
        assert_eq!(
            named_packet(CMD_REQUEST, "list-sas"),
            [0, 0, 0, 10, 0, 8, b'l', b'i', b's', b't', b'-', b's', b'a', b's']
        );
    }
}
