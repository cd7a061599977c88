//! Go's `time.ParseDuration`, for the durations OLM's users write in Go's syntax: a
//! CatalogSource's `spec.updateStrategy.registryPoll.interval` (docs/catalog.md §3.4), the
//! OperatorGroup's `operatorframework.io/bundle-unpack-timeout` annotation and the
//! `--bundle-unpack-timeout` flag. A leaf: the core and the shell both read it.

use std::time::Duration;

/// A Go duration that does not parse, worded as Go's `time.ParseDuration` words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("time: invalid duration {text:?}")]
    Invalid { text: String },
    #[error("time: missing unit in duration {text:?}")]
    MissingUnit { text: String },
    #[error("time: unknown unit {unit:?} in duration {text:?}")]
    UnknownUnit { unit: String, text: String },
}

/// Go's `time.ParseDuration`: `[-+]?(<number><unit>)+` with units ns, us (µs, μs), ms, s, m, h;
/// a bare `0` is allowed. Errors are worded as Go words them. Negative values are returned as
/// zero (a poll interval cannot be negative).
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid {
        text: text.to_owned(),
    };
    let mut s = text;
    let negative = if let Some(rest) = s.strip_prefix('-') {
        s = rest;
        true
    } else {
        s = s.strip_prefix('+').unwrap_or(s);
        false
    };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total_nanos: f64 = 0.0;
    while !s.is_empty() {
        let number_len = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let number = &s[..number_len];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        s = &s[number_len..];
        let unit_len = s
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(s.len());
        let unit = &s[..unit_len];
        if unit.is_empty() {
            return Err(DurationError::MissingUnit {
                text: text.to_owned(),
            });
        }
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => {
                return Err(DurationError::UnknownUnit {
                    unit: unit.to_owned(),
                    text: text.to_owned(),
                });
            }
        };
        total_nanos += value * nanos_per_unit;
        s = &s[unit_len..];
    }
    if total_nanos > i64::MAX as f64 {
        return Err(invalid());
    }
    if negative {
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_nanos(total_nanos.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok = [
            ("15m", 900.0),
            ("1h30m", 5400.0),
            ("45s", 45.0),
            ("1.5h", 5400.0),
            ("300ms", 0.3),
            ("0", 0.0),
            ("+2m", 120.0),
            ("1m30s500ms", 90.5),
        ];
        for (text, secs) in ok {
            assert_eq!(
                parse_go_duration(text),
                Ok(Duration::from_secs_f64(secs)),
                "{text}"
            );
        }
        assert_eq!(parse_go_duration("-5m"), Ok(Duration::ZERO));
        let parse_go_duration = |t| super::parse_go_duration(t).map_err(|e| e.to_string());
        assert_eq!(
            parse_go_duration(""),
            Err("time: invalid duration \"\"".into())
        );
        assert_eq!(
            parse_go_duration("10"),
            Err("time: missing unit in duration \"10\"".into())
        );
        assert_eq!(
            parse_go_duration("10x"),
            Err("time: unknown unit \"x\" in duration \"10x\"".into())
        );
        assert_eq!(
            parse_go_duration("m"),
            Err("time: invalid duration \"m\"".into())
        );
    }
}
