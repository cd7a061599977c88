//! Logging set-up shared by every subcommand.
//!
//! Logs go to stderr so that subcommands that print data (`olm-rs crds`, `catalog render -o json`)
//! keep stdout clean for scripts. Secret material is never passed to a log macro anywhere in the
//! crate; this module only decides the format.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

impl FromStr for LogFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            other => Err(format!(
                "unknown log format {other:?}: expected \"text\" or \"json\""
            )),
        }
    }
}

/// Installs the global subscriber. `level` is an `EnvFilter` directive (`info`,
/// `olm_rs=debug,kube=warn`, ...); `RUST_LOG`, when set, wins so operators can raise verbosity
/// without editing the Deployment's arguments. Calling it twice is harmless (the second call is a
/// no-op), which keeps tests that start several controllers simple.
pub fn init_logging(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.with_target(true).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_format_parses_the_two_documented_values_only() {
        assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert_eq!("json".parse::<LogFormat>(), Ok(LogFormat::Json));
        let err = "yaml".parse::<LogFormat>().unwrap_err();
        assert!(err.contains("yaml"), "{err}");
    }
}
