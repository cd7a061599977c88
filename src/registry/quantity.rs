//! Kubernetes resource quantities (`512Mi`, `1G`, `1.5Gi`) as byte counts, and the `GOMEMLIMIT`
//! text OLM derives from `grpcPodConfig.memoryTarget` (docs/catalog.md §3.2).

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{quantity:?} is not a memory quantity (e.g. 512Mi, 1Gi, 500M)")]
pub struct QuantityError {
    pub quantity: String,
}

/// The number of bytes a memory quantity stands for (rounded up, as Kubernetes rounds).
pub fn bytes(quantity: &str) -> Result<u64, QuantityError> {
    let err = || QuantityError {
        quantity: quantity.to_owned(),
    };
    let text = quantity.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    if number.is_empty() || number.starts_with('-') {
        return Err(err());
    }
    let number = number.strip_prefix('+').unwrap_or(number);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(err());
    }
    // value = digits / 10^scale * multiplier, computed in u128 to stay exact.
    let digits: u128 = format!("{whole}{fraction}").parse().map_err(|_| err())?;
    let scale = fraction.len() as u32;
    let (multiplier, divisor_exp): (u128, u32) = match suffix {
        "" => (1, 0),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        "k" => (1_000, 0),
        "M" => (1_000_000, 0),
        "G" => (1_000_000_000, 0),
        "T" => (1_000_000_000_000, 0),
        "P" => (1_000_000_000_000_000, 0),
        "E" => (1_000_000_000_000_000_000, 0),
        "m" => (1, 3),
        s if s.starts_with(['e', 'E']) => {
            let exp: u32 = s[1..].parse().map_err(|_| err())?;
            (10u128.checked_pow(exp).ok_or_else(err)?, 0)
        }
        _ => return Err(err()),
    };
    let numerator = digits.checked_mul(multiplier).ok_or_else(err)?;
    let denominator = 10u128.pow(scale + divisor_exp);
    let value = numerator.div_ceil(denominator);
    u64::try_from(value).map_err(|_| err())
}

/// `GOMEMLIMIT` for a memory target: the byte count in the largest binary unit that divides it
/// exactly, with a `B` suffix (`512Mi` → `512MiB`, `1G` → `1000000000B`).
pub fn go_mem_limit(quantity: &str) -> Result<String, QuantityError> {
    let value = bytes(quantity)?;
    const UNITS: [(&str, u64); 6] = [
        ("Ei", 1 << 60),
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if value >= size && value % size == 0 {
            return Ok(format!("{}{unit}B", value / size));
        }
    }
    Ok(format!("{value}B"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binary_decimal_and_fractional_quantities() {
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
        ] {
            assert_eq!(bytes(q), Ok(b), "{q}");
        }
        for bad in ["", "Mi", "-1Mi", "1Xi", "1.2.3Mi", "abc"] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn go_mem_limit_uses_the_largest_exact_binary_unit() {
        assert_eq!(go_mem_limit("512Mi").unwrap(), "512MiB");
        assert_eq!(go_mem_limit("1Gi").unwrap(), "1GiB");
        assert_eq!(go_mem_limit("1024Mi").unwrap(), "1GiB");
        assert_eq!(go_mem_limit("1.5Gi").unwrap(), "1536MiB");
        assert_eq!(go_mem_limit("1G").unwrap(), "1000000000B");
        assert_eq!(go_mem_limit("100").unwrap(), "100B");
    }
}
