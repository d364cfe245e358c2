//! How the reports write numbers, shared by the workload harness and the `ferry bench`
//! suites so a figure reads the same in both.

/// Three significant-ish digits without scientific notation.
pub fn three_digits(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A whole number with its thousands split by `separator`, so rates are read at a glance.
pub fn grouped(v: f64, separator: char) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(separator);
        }
        out.push(c);
    }
    out
}
