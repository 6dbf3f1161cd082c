//! Text for the page: HTML escaping, and numbers, durations, bytes and shares as people
//! read them.

/// `s` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text, SVG text and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number with about three significant digits, thousands as `k`, millions as `M`.
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.3}G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}M", x / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", x / 1e3)
    } else if a >= 100.0 || x == x.trunc() {
        format!("{x:.0}")
    } else if a >= 1.0 {
        trim(format!("{x:.2}"))
    } else {
        trim(format!("{x:.3}"))
    }
}

/// `1.50` as `1.5`, `0.600` as `0.6`.
fn trim(s: String) -> String {
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A duration in seconds with its unit: `1.25 s`, `3.4 ms`, `870 µs`, `95 ns`.
pub fn seconds(s: f64) -> String {
    let a = s.abs();
    if !s.is_finite() {
        "–".into()
    } else if a == 0.0 {
        "0 s".into()
    } else if a >= 100.0 {
        format!("{s:.0} s")
    } else if a >= 1.0 {
        format!("{s:.2} s")
    } else if a >= 1e-3 {
        format!("{} ms", trim(format!("{:.3}", s * 1e3)))
    } else if a >= 1e-6 {
        format!("{:.0} µs", s * 1e6)
    } else {
        format!("{:.0} ns", s * 1e9)
    }
}

/// An optional duration; `–` when not measured.
pub fn maybe_seconds(s: Option<f64>) -> String {
    s.map_or_else(|| "–".into(), seconds)
}

/// Bytes with a binary unit: `512 B`, `1.5 MiB`.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A share as a percentage: `0.973` is `97%`, small ones keep a decimal (`0.4%`).
pub fn percent(f: f64) -> String {
    let p = f * 100.0;
    if !p.is_finite() {
        "–".into()
    } else if p.abs() < 10.0 && p != 0.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
    }

    #[test]
    fn formats_numbers_people_read() {
        assert_eq!(number(55.9), "55.9");
        assert_eq!(number(0.6000000000000001), "0.6");
        assert_eq!(number(12_345.0), "12.3k");
        assert_eq!(number(3.0), "3");
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(2.5e-5), "25 µs");
        assert_eq!(seconds(18.3), "18.30 s");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(percent(0.973), "97%");
        assert_eq!(percent(0.004), "0.4%");
    }
}
