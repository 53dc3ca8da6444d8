//! An address with a prefix length as it is written (`198.18.0.2/24`,
//! `2001:2::2/64`): the one parser every option and configuration that
//! takes a network or a host's address in it goes through. Each caller
//! words the refusal with its own option and adds its own bounds (a /0
//! allowed or not, IPv4 only).

use std::net::IpAddr;
use std::str::FromStr;

/// `ADDRESS/PREFIX`: an IPv4 or IPv6 address and a prefix length no longer
/// than the address (0 allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

/// Why text is no [`Cidr`], in the order it is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CidrError {
    /// No `/`.
    NoPrefix,
    /// The text before the `/` (given) is no IP address.
    BadAddress(String),
    /// The prefix length is no number, or longer than `max` (32 or 128).
    BadPrefix { max: u8 },
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Cidr, CidrError> {
        let (addr_text, prefix) = text.split_once('/').ok_or(CidrError::NoPrefix)?;
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| CidrError::BadAddress(addr_text.to_string()))?;
        let max = if addr.is_ipv6() { 128 } else { 32 };
        let prefix_len = prefix
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or(CidrError::BadPrefix { max })?;
        Ok(Cidr { addr, prefix_len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn networks_and_hosts_in_them_parse() {
        assert_eq!(
            "198.18.0.2/24".parse(),
            Ok(Cidr {
                addr: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
                prefix_len: 24
            })
        );
        assert_eq!(
            "2001:2::2/64".parse(),
            Ok(Cidr {
                addr: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2)),
                prefix_len: 64
            })
        );
        assert_eq!("0.0.0.0/0".parse::<Cidr>().map(|c| c.prefix_len), Ok(0));
    }

    #[test]
    fn refusals_say_which_part_is_wrong() {
        let no = |t: &str| t.parse::<Cidr>().unwrap_err();
        assert_eq!(no("198.18.0.2"), CidrError::NoPrefix);
        assert_eq!(no("198.18.0/24"), CidrError::BadAddress("198.18.0".into()));
        assert_eq!(
            no(" 198.18.0.2/24"),
            CidrError::BadAddress(" 198.18.0.2".into())
        );
        assert_eq!(no("198.18.0.2/33"), CidrError::BadPrefix { max: 32 });
        assert_eq!(no("2001:2::2/129"), CidrError::BadPrefix { max: 128 });
        assert_eq!(no("198.18.0.2/x"), CidrError::BadPrefix { max: 32 });
        assert_eq!(no("198.18.0.2/-1"), CidrError::BadPrefix { max: 32 });
    }
}
