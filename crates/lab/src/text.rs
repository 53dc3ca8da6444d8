//! Numbers as the lab's messages and descriptions write them, shared by the
//! placement note (`placement.rs`) and the scenarios' descriptions and
//! checks (`scenario`).

/// 4096 as "4,096".
pub(crate) fn thousands(n: impl Into<u64>) -> String {
    let digits = n.into().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped_by_commas() {
        assert_eq!(thousands(0u32), "0");
        assert_eq!(thousands(999u32), "999");
        assert_eq!(thousands(4096u32), "4,096");
        assert_eq!(thousands(900_000u32), "900,000");
        assert_eq!(thousands(1_234_567u64), "1,234,567");
    }
}
