//! Base 62 text of a SHA-224 digest (docs/api-types.md §6.1): the form of every OLM name hash
//! (`olm.og.*` ClusterRoles, install-plan RBAC names, `olm.permissions.hash`,
//! `olm.deployment-spec-hash`, `olm.webhook-description-hash`).

use sha2::{Digest, Sha224};

const ALPHABET: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Longest possible text for a 28-byte digest (62^38 > 2^224). Shorter texts are common (about
/// 7.7 % of digests), so callers must use the actual length (docs/api-types.md §6.1).
pub const SHA224_BASE62_MAX_LEN: usize = 38;

/// SHA-224 of `bytes`, written in base 62.
pub fn sha224_base62(bytes: &[u8]) -> String {
    base62_encode(&Sha224::digest(bytes))
}

/// `bytes` read as one unsigned big-endian integer, written in base 62, most significant digit
/// first, no padding; zero is `"0"`.
pub fn base62_encode(bytes: &[u8]) -> String {
    // Schoolbook division by 62 over the big-endian bytes; the inputs are 28 bytes long.
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut digits = Vec::with_capacity(SHA224_BASE62_MAX_LEN);
    while !number.is_empty() {
        let mut remainder: u32 = 0;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let acc = (remainder << 8) | u32::from(*byte);
            let q = acc / 62;
            remainder = acc % 62;
            if !(quotient.is_empty() && q == 0) {
                // q < 256 because remainder < 62 and so acc < 62 * 256.
                quotient.push(q as u8);
            }
        }
        digits.push(ALPHABET[remainder as usize]);
        number = quotient;
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    // Every pushed byte comes from ALPHABET, which is ASCII.
    digits.into_iter().map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(text: &str) -> Vec<u8> {
        // Big-endian base-256 accumulator: n = n * 62 + digit.
        let mut number: Vec<u8> = Vec::new();
        for c in text.bytes() {
            let digit = ALPHABET
                .iter()
                .position(|a| *a == c)
                .expect("alphabet digit") as u32;
            let mut carry = digit;
            for byte in number.iter_mut().rev() {
                let acc = u32::from(*byte) * 62 + carry;
                *byte = (acc & 0xff) as u8;
                carry = acc >> 8;
            }
            while carry > 0 {
                number.insert(0, (carry & 0xff) as u8);
                carry >>= 8;
            }
        }
        number
    }

    #[test]
    fn worked_values_from_real_olm() {
        // docs/api-types.md §6.4 (OperatorGroup ClusterRole hashes)
        assert_eq!(
            sha224_base62(b"demo/demo-og/admin"),
            "86yceVG1OUIPZEmmehd1WTzivsPEB9JIfZpQA8"
        );
        let edit = sha224_base62(b"demo/demo-og/edit");
        assert_eq!(edit, "iX86eZdG8qXQYdgBi3na9RrzZm37VFBCTOw5O");
        assert_eq!(edit.len(), 37);
        assert_eq!(
            sha224_base62(b"demo/demo-og/view"),
            "3wJrIlYFBawzBy3isgQNbb5ExNdP1h7ZcoWrnk"
        );
    }

    #[test]
    fn small_numbers() {
        assert_eq!(base62_encode(&[]), "0");
        assert_eq!(base62_encode(&[0, 0]), "0");
        assert_eq!(base62_encode(&[61]), "Z");
        assert_eq!(base62_encode(&[62]), "10");
        assert_eq!(base62_encode(&[1, 0]), "48"); // 256 = 4 * 62 + 8
    }

    proptest! {
        #[test]
        fn digest_round_trips_and_fits(input in proptest::collection::vec(any::<u8>(), 0..64)) {
            let digest = Sha224::digest(&input);
            let text = base62_encode(&digest);
            prop_assert!(text.len() <= SHA224_BASE62_MAX_LEN);
            prop_assert!(text == "0" || !text.starts_with('0'));
            let significant: Vec<u8> = digest.iter().copied().skip_while(|b| *b == 0).collect();
            prop_assert_eq!(decode(&text), significant);
        }
    }
}
