//! Escaping text for HTML and SVG: the one leaf that the HTML report, its
//! tunnels sections and the charts all quote their text through.

/// `s` with `&`, `<`, `>` and `"` written as entities, safe in element
/// text and in double-quoted attributes.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
