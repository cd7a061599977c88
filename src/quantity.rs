//! Kubernetes `resource.Quantity` (`512Mi`, `1.5Gi`, `100m`, `1e3`), the one parser of the crate:
//! parsed the way `k8s.io/apimachinery` v0.32 `ParseQuantity` parses, written the way
//! `Quantity.MarshalJSON` writes (docs/api-types.md §6.2 rule 7, for the hashes OLM computes), or
//! read as an integer the way `Quantity.Value()` reads it (a registry pod's memory target). The
//! arithmetic is exact (big integers), like Go's `inf.Dec`.
//!
//! Two Go details are kept on purpose because they change bytes:
//! * input that passes Go's quick "already canonical" test (int64 path, exponent a multiple of
//!   3, digits neither starting with `0` nor ending in `000`) is echoed verbatim, so `+1`, `01`
//!   and `1.` come back unchanged;
//! * a DecimalSI exponent above 18 has no suffix and is dropped (`1000E` → `1`), the v0.32
//!   behaviour fixed only in later apimachinery releases.

use num_bigint::{BigInt, Sign};
use num_traits::{One, Signed, Zero};

/// Why a quantity string was rejected (Go's `ErrFormatWrong`, `ErrSuffix`, `ErrNumeric`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity {0:?} does not match <sign><digits>[.<digits>]<suffix>")]
    Format(String),
    #[error("quantity {0:?} has an unknown suffix")]
    Suffix(String),
    #[error("quantity {0:?} has an unparsable number")]
    Numeric(String),
    /// An integer value was asked of a quantity below zero or beyond `u64`.
    #[error("quantity {0:?} is out of range")]
    OutOfRange(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// A parsed quantity: `mantissa * 10^exp10`, its format, and the verbatim text Go caches when
/// the input was already canonical.
#[derive(Debug, Clone)]
struct Quantity {
    mantissa: BigInt,
    exp10: i64,
    format: Format,
    cached: Option<String>,
}

/// The canonical text Go writes for the quantity `text` (without quotes).
pub fn canonical_quantity(text: &str) -> Result<String, QuantityError> {
    Ok(parse(text.trim())?.canonical())
}

/// The canonical text of a JSON number used as a quantity (Go reads the number's literal
/// text). `serde_json` keeps integers exact; floats come back in their shortest form, which
/// differs from the author's literal only for exponent notation such as `1e3`.
pub fn canonical_quantity_number(number: &serde_json::Number) -> Result<String, QuantityError> {
    canonical_quantity(&number.to_string())
}

/// The value of the quantity `text` as a non-negative integer, rounded up as Go's
/// `Quantity.Value()` rounds (`1500m` → 2, `1.5Gi` → 1610612736). Unlike Go, text without a
/// digit (`Mi`) is refused rather than read as zero.
pub fn unsigned_value(text: &str) -> Result<u64, QuantityError> {
    let text = text.trim();
    let out_of_range = || QuantityError::OutOfRange(text.to_owned());
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Err(QuantityError::Format(text.to_owned()));
    }
    let q = parse(text)?;
    if q.mantissa.sign() == Sign::Minus {
        return Err(out_of_range());
    }
    // Beyond u64 for any mantissa: refused before building a huge power of ten.
    if q.exp10 > 20 && !q.mantissa.is_zero() {
        return Err(out_of_range());
    }
    let value = if q.exp10 >= 0 {
        q.mantissa * pow10(q.exp10)
    } else if q.mantissa.is_zero() {
        q.mantissa
    } else {
        divide_rounding_up(&q.mantissa, -q.exp10)
    };
    u64::try_from(value).map_err(|_| out_of_range())
}

struct Parts<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`: sign, leading zeros, numerator, `.` denominator, suffix.
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    if pos < end {
        match b[0] {
            b'-' => {
                positive = false;
                pos += 1;
            }
            b'+' => pos += 1,
            _ => {}
        }
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[num_start..pos];
    if pos >= end {
        return Ok(Parts {
            positive,
            value: s,
            num,
            denom: "",
            suffix: "",
        });
    }
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
        if pos >= end {
            return Ok(Parts {
                positive,
                value: s,
                num,
                denom,
                suffix: "",
            });
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format(s.to_owned()));
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Go's suffix table: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i64, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ if suffix.len() > 1 && (suffix.starts_with('e') || suffix.starts_with('E')) => {
            // Go: strconv.ParseInt(s[1:], 10, 64) then a truncating int32 conversion.
            let parsed: i64 = suffix[1..].parse().ok()?;
            Some((10, i64::from(parsed as i32), Format::DecimalExponent))
        }
        _ => None,
    }
}

fn parse(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format(String::new()));
    }
    if s == "0" {
        return Ok(Quantity {
            mantissa: BigInt::zero(),
            exp10: 0,
            format: Format::DecimalSI,
            cached: Some("0".to_owned()),
        });
    }
    let parts = split(s)?;
    let (base, exponent, format) =
        interpret(parts.suffix).ok_or_else(|| QuantityError::Suffix(s.to_owned()))?;

    if let Some(q) = fast_path(s, &parts, exponent, format) {
        return Ok(q);
    }
    slow_path(s, &parts, base, exponent, format)
}

/// Go's int64 path: few enough digits, no finer than nano, no overflow. Exact, uncapped.
fn fast_path(s: &str, p: &Parts<'_>, exponent: i64, format: Format) -> Option<Quantity> {
    let digits = (p.num.len() + p.denom.len()) as i64;
    let (mut scale, mantissa_factor, precision) = match format {
        Format::DecimalExponent | Format::DecimalSI => (exponent, 1i64, 18 - digits),
        Format::BinarySI if exponent >= 0 && p.denom.is_empty() => {
            // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1; exponent is a multiple
            // of 10 here, so the float product is exact.
            let precision = 15 - p.num.len() as i64 - exponent * 3 / 10 - 1;
            (
                0,
                1i64.checked_shl(u32::try_from(exponent).ok()?)?,
                precision,
            )
        }
        Format::BinarySI => return None,
    };
    if precision < 0 {
        return None;
    }
    scale -= p.denom.len() as i64;
    if scale < -9 {
        return None;
    }
    let shifted = format!("{}{}", p.num, p.denom);
    let value: i64 = shifted.parse().ok()?;
    let mut result = value.checked_mul(mantissa_factor)?;
    if !p.positive {
        result = -result;
    }
    let canonical_input = match format {
        Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
        _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
    };
    Some(Quantity {
        mantissa: BigInt::from(result),
        exp10: scale,
        format,
        cached: canonical_input.then(|| s.to_owned()),
    })
}

/// Go's `inf.Dec` path: exact value, rounded up to nano units; BinarySI capped at 2^63-1.
fn slow_path(
    s: &str,
    p: &Parts<'_>,
    base: u32,
    exponent: i64,
    mut format: Format,
) -> Result<Quantity, QuantityError> {
    let (mut mantissa, mut exp10) =
        parse_decimal(p.value).ok_or_else(|| QuantityError::Numeric(s.to_owned()))?;
    if base == 10 {
        exp10 += exponent;
    } else {
        mantissa <<= usize::try_from(exponent).map_err(|_| QuantityError::Suffix(s.to_owned()))?;
    }
    let negative = mantissa.sign() == Sign::Minus;
    let mut magnitude = mantissa.abs();
    if !magnitude.is_zero() && exp10 < -9 {
        magnitude = divide_rounding_up(&magnitude, -9 - exp10);
        exp10 = -9;
    }
    if format == Format::BinarySI {
        let max = BigInt::from(i64::MAX);
        if compare_scaled(&magnitude, exp10, &max) == std::cmp::Ordering::Greater {
            magnitude = max;
            exp10 = 0;
        }
        let below_one = compare_scaled(&magnitude, exp10, &BigInt::one()).is_lt();
        if below_one && !magnitude.is_zero() {
            format = Format::DecimalSI;
        }
    }
    let mantissa = if negative { -magnitude } else { magnitude };
    Ok(Quantity {
        mantissa,
        exp10,
        format,
        cached: None,
    })
}

/// `inf.Dec.SetString`: optional sign, digits with at most one `.`, at least one digit.
fn parse_decimal(text: &str) -> Option<(BigInt, i64)> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (int_part, frac_part) = rest.split_once('.').unwrap_or((rest, ""));
    let all_digits = |t: &str| t.bytes().all(|c| c.is_ascii_digit());
    if !all_digits(int_part) || !all_digits(frac_part) || int_part.len() + frac_part.len() == 0 {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let magnitude = BigInt::parse_bytes(digits.as_bytes(), 10)?;
    let mantissa = if negative { -magnitude } else { magnitude };
    Some((mantissa, -(frac_part.len() as i64)))
}

/// ceil(magnitude / 10^shift) for a positive magnitude, without building huge powers.
fn divide_rounding_up(magnitude: &BigInt, shift: i64) -> BigInt {
    let digit_count = magnitude.to_string().len() as i64;
    if shift > digit_count {
        return BigInt::one();
    }
    let divisor = pow10(shift);
    let quotient = magnitude / &divisor;
    if (&quotient * &divisor) == *magnitude {
        quotient
    } else {
        quotient + 1
    }
}

fn pow10(exp: i64) -> BigInt {
    num_traits::pow(BigInt::from(10), usize::try_from(exp).unwrap_or(0))
}

/// Compares `magnitude * 10^exp10` with `other` (an integer); only used for BinarySI values,
/// whose exponent lies in [-9, 0].
fn compare_scaled(magnitude: &BigInt, exp10: i64, other: &BigInt) -> std::cmp::Ordering {
    if exp10 >= 0 {
        (magnitude * pow10(exp10)).cmp(other)
    } else {
        magnitude.cmp(&(other * pow10(-exp10)))
    }
}

impl Quantity {
    /// `Quantity.MarshalJSON` without the quotes.
    fn canonical(&self) -> String {
        if let Some(cached) = &self.cached {
            return cached.clone();
        }
        if self.mantissa.is_zero() {
            return "0".to_owned();
        }
        let mut format = self.format;
        let mut integer = None;
        if format == Format::BinarySI {
            let lower = compare_scaled(&self.mantissa, self.exp10, &BigInt::from(-1024)).is_gt();
            let upper = compare_scaled(&self.mantissa, self.exp10, &BigInt::from(1024)).is_lt();
            if lower && upper {
                format = Format::DecimalSI;
            } else {
                integer = self.exact_integer();
                if integer.is_none() {
                    format = Format::DecimalSI;
                }
            }
        }
        match (format, integer) {
            (Format::BinarySI, Some(value)) => {
                let (amount, power) = remove_factors(value, 1024);
                let suffix = match power {
                    1 => "Ki",
                    2 => "Mi",
                    3 => "Gi",
                    4 => "Ti",
                    5 => "Pi",
                    6 => "Ei",
                    _ => "",
                };
                format!("{amount}{suffix}")
            }
            _ => {
                let (amount, exponent) = self.canonical_decimal();
                let suffix = match (format, exponent) {
                    (Format::DecimalExponent, 0) => String::new(),
                    (Format::DecimalExponent, e) => format!("e{e}"),
                    (_, e) => decimal_si_suffix(e).to_owned(),
                };
                format!("{amount}{suffix}")
            }
        }
    }

    fn exact_integer(&self) -> Option<BigInt> {
        if self.exp10 >= 0 {
            return Some(&self.mantissa * pow10(self.exp10));
        }
        let divisor = pow10(-self.exp10);
        let quotient = &self.mantissa / &divisor;
        ((&quotient * &divisor) == self.mantissa).then_some(quotient)
    }

    /// Mantissa without trailing zeros, exponent lowered to a multiple of 3.
    fn canonical_decimal(&self) -> (BigInt, i64) {
        let (mut amount, times) = remove_factors(self.mantissa.clone(), 10);
        let mut exponent = self.exp10 + times;
        while exponent % 3 != 0 {
            amount *= 10;
            exponent -= 1;
        }
        (amount, exponent)
    }
}

fn decimal_si_suffix(exponent: i64) -> &'static str {
    match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        // v0.32 ignores the missing suffix (see the module comment).
        _ => "",
    }
}

fn remove_factors(mut value: BigInt, factor: u32) -> (BigInt, i64) {
    let factor = BigInt::from(factor);
    let mut times = 0;
    while !value.is_zero() && (&value % &factor).is_zero() {
        value /= &factor;
        times += 1;
    }
    (value, times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalisation_table() {
        // Expected values follow apimachinery's own quantity tests and the spec examples.
        let table: &[(&str, &str)] = &[
            ("0.1", "100m"),
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("100m", "100m"),
            ("10m", "10m"),
            ("64Mi", "64Mi"),
            ("32Mi", "32Mi"),
            ("1", "1"),
            ("0", "0"),
            ("0m", "0"),
            ("0Gi", "0"),
            ("-0.0", "0"),
            ("1.5", "1500m"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("0.5Ki", "512"),
            ("1Ki", "1Ki"),
            ("1023", "1023"),
            ("1024", "1024"),
            ("1000", "1k"),
            ("1000000", "1M"),
            ("1100", "1100"),
            ("1.1k", "1100"),
            ("12e6", "12e6"),
            ("12000e3", "12e6"),
            ("1e3", "1e3"),
            ("100e-3", "100e-3"),
            ("1.5e3", "1500"),
            ("2E3", "2E3"),
            ("0.0005", "500u"),
            ("0.0000005", "500n"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("1.0000000001", "1000000001n"),
            ("-1", "-1"),
            ("-100m", "-100m"),
            ("-1.5Gi", "-1536Mi"),
            ("+1", "+1"),
            // Go echoes any input its cache test accepts, even these two.
            ("01", "01"),
            ("1.", "1."),
            (".5", "500m"),
            ("1G", "1G"),
            ("1000M", "1G"),
            ("1Ti", "1Ti"),
            ("1025Ki", "1025Ki"),
            ("1.1Ki", "1126400m"),
            ("8Ei", "9223372036854775807"),
            ("1E", "1E"),
            ("1000E", "1"),
            ("12345678901234567890", "12345678901234567890"),
            ("5Gi", "5Gi"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("129M", "129M"),
            ("123Mi", "123Mi"),
        ];
        for (input, want) in table {
            assert_eq!(
                canonical_quantity(input).as_deref(),
                Ok(*want),
                "input {input:?}"
            );
        }
    }

    #[test]
    fn whitespace_is_trimmed() {
        assert_eq!(canonical_quantity(" 1000m ").as_deref(), Ok("1"));
    }

    #[test]
    fn numbers_are_read_from_their_text() {
        let half: serde_json::Number = serde_json::from_str("0.5").expect("number");
        assert_eq!(canonical_quantity_number(&half).as_deref(), Ok("500m"));
        let two: serde_json::Number = serde_json::from_str("2").expect("number");
        assert_eq!(canonical_quantity_number(&two).as_deref(), Ok("2"));
    }

    #[test]
    fn bad_quantities_are_rejected() {
        assert!(matches!(
            canonical_quantity(""),
            Err(QuantityError::Format(_))
        ));
        assert!(matches!(
            canonical_quantity("1x"),
            Err(QuantityError::Format(_))
        ));
        assert!(matches!(
            canonical_quantity("1Zi"),
            Err(QuantityError::Format(_))
        ));
        assert!(matches!(
            canonical_quantity("1KiB"),
            Err(QuantityError::Format(_))
        ));
        assert!(matches!(
            canonical_quantity("1ki"),
            Err(QuantityError::Suffix(_))
        ));
        assert!(matches!(
            canonical_quantity("1e"),
            Err(QuantityError::Suffix(_))
        ));
        assert!(matches!(
            canonical_quantity("1.2.3"),
            Err(QuantityError::Format(_))
        ));
    }

    #[test]
    fn unsigned_values_round_up_like_go_value() {
        for (q, b) in [
            ("512Mi", 512 << 20),
            ("1Gi", 1 << 30),
            ("1.5Gi", 3 << 29),
            ("500M", 500_000_000),
            ("1G", 1_000_000_000),
            ("100", 100),
            ("1e3", 1000),
            ("1500m", 2),
            ("+4Ki", 4096),
            (" 0 ", 0),
        ] {
            assert_eq!(unsigned_value(q), Ok(b), "{q}");
        }
        for bad in ["", "Mi", "-1Mi", "1Xi", "1.2.3Mi", "abc", "1e30", "20E"] {
            assert!(unsigned_value(bad).is_err(), "{bad}");
        }
    }
}
