//! FNV-1a, 64 bit: the hash behind `olm.api.<hash>`, the OperatorGroup aggregation labels and
//! `operatorframework.io/installed-alongside-<hash>` (docs/api-types.md §6).

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64-bit of `bytes`: xor each byte in, then multiply (wrapping).
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    })
}

/// FNV-1a 64-bit of the UTF-8 bytes of `text` as OLM writes it: lowercase hex, no leading zeros
/// (Go's `strconv.FormatUint(h, 16)`), so usually 16 characters but sometimes fewer.
pub fn fnv1a_hex(text: &str) -> String {
    format!("{:x}", fnv1a_64(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reference implementation written from the FNV specification (xor, then multiply, over
    /// u128 reduced mod 2^64) so the property test compares two independent derivations.
    fn reference(bytes: &[u8]) -> u64 {
        let mut h: u128 = 14_695_981_039_346_656_037;
        for b in bytes {
            h ^= u128::from(*b);
            h = (h * 1_099_511_628_211) % (1u128 << 64);
        }
        h as u64
    }

    #[test]
    fn worked_values_from_real_olm() {
        // docs/api-types.md §6.4
        assert_eq!(fnv1a_hex("Demo.v1alpha1.example.com"), "7f1c1bed79b097e1");
        assert_eq!(fnv1a_hex("demo/demo-operator.v0.3.0"), "6c4a32a7ecb91cf8");
        assert_eq!(fnv1a_hex("demo/demo-operator.v0.3.1"), "6c4a33a7ecb91eab");
    }

    #[test]
    fn empty_input_is_the_offset_basis() {
        assert_eq!(fnv1a_hex(""), "cbf29ce484222325");
    }

    #[test]
    fn leading_zeros_are_dropped() {
        // Search a small space for an input whose hash has a zero top nibble; the text form must
        // then be shorter than 16 characters, exactly like Go's FormatUint.
        let short = (0..10_000u32)
            .map(|i| format!("k{i}"))
            .find(|s| fnv1a_64(s.as_bytes()) >> 60 == 0)
            .expect("a zero top nibble occurs about once in 16 inputs");
        let hex = fnv1a_hex(&short);
        assert!(hex.len() < 16, "{short} -> {hex}");
        assert!(!hex.starts_with('0'));
        assert_eq!(
            u64::from_str_radix(&hex, 16).ok(),
            Some(fnv1a_64(short.as_bytes()))
        );
    }

    proptest! {
        #[test]
        fn matches_reference(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            prop_assert_eq!(fnv1a_64(&bytes), reference(&bytes));
        }
    }
}
