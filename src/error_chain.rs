//! An error and its causes as one line of text, for messages a user reads (a pull failure, a
//! registry that does not answer): `error sending request: … connection refused`.

/// `err`'s message followed by each cause's, `: `-separated; a cause whose text the message
/// already holds (libraries often repeat their source) is not repeated.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    #[test]
    fn causes_follow_the_message_unless_it_holds_them() {
        let root = Layer {
            text: "connection refused",
            source: None,
        };
        let repeat = Layer {
            text: "tcp connect: connection refused",
            source: Some(Box::new(root)),
        };
        let top = Layer {
            text: "error sending request",
            source: Some(Box::new(repeat)),
        };
        assert_eq!(
            error_chain(&top),
            "error sending request: tcp connect: connection refused"
        );
    }
}
