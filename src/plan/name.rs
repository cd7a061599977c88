//! InstallPlan names: `install-` and five characters of the API server's `generateName`
//! alphabet, the format of OLM's plans (e.g. `install-h9666`).
//!
//! OLM draws the five characters at random. olm-rs derives them from the plan's resolution key
//! (and a salt that moves past names already taken): two decisions for the same resolution name
//! the same plan, so a decision made on a store that has not yet seen the plan it created a
//! moment ago fails to create a second one (409) instead of duplicating it
//! (docs/subscription-plans.md, "Plan names").

use sha2::{Digest, Sha256};

pub const NAME_PREFIX: &str = "install-";

/// The API server's `generateName` alphabet: lowercase consonants and digits without look-alikes,
/// so no word (or vowel-made slur) can appear in a generated name.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The name of the plan for the resolution `key`, at `salt` (0 unless a name is taken).
pub fn install_plan_name(key: &str, salt: u32) -> String {
    let digest = Sha256::digest(format!("{key}#{salt}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    let mut n = u64::from_be_bytes(bytes);
    let base = ALPHABET.len() as u64;
    let mut name = String::with_capacity(NAME_PREFIX.len() + 5);
    name.push_str(NAME_PREFIX);
    for _ in 0..5 {
        // `n % base` < 27, a valid index.
        name.push(char::from(ALPHABET[(n % base) as usize]));
        n /= base;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_install_and_five_generate_name_characters_drawn_from_the_key() {
        let a = install_plan_name("3f0c9d2a", 0);
        assert_eq!(a, install_plan_name("3f0c9d2a", 0), "a function of the key");
        let others = [
            install_plan_name("3f0c9d2a", 1),
            install_plan_name("3f0c9d2b", 0),
        ];
        for other in &others {
            assert_ne!(&a, other);
        }
        for name in others.iter().chain([&a]) {
            assert_eq!(name.len(), 13);
            assert!(name.starts_with("install-"));
            assert!(name[8..].bytes().all(|c| ALPHABET.contains(&c)), "{name}");
        }
    }

    #[test]
    fn names_spread_over_the_alphabet() {
        let names: std::collections::HashSet<String> = (0..2000)
            .map(|i| install_plan_name(&format!("key-{i}"), 0))
            .collect();
        assert!(names.len() > 1990, "{} distinct of 2000", names.len());
        let used: std::collections::HashSet<u8> =
            names.iter().flat_map(|n| n.bytes().skip(8)).collect();
        assert_eq!(used.len(), ALPHABET.len());
    }
}
