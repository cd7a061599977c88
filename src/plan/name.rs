//! InstallPlan names: `install-` and five random characters, like the API server's
//! `generateName` gives OLM's plans (e.g. `install-h9666`).

use rand::Rng;

pub const NAME_PREFIX: &str = "install-";

/// The API server's `generateName` alphabet: lowercase consonants and digits without look-alikes,
/// so no word (or vowel-made slur) can appear in a generated name.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A fresh plan name drawn from `rng` (randomness is an input: tests pass a seeded one).
pub fn install_plan_name(rng: &mut impl Rng) -> String {
    let mut name = String::with_capacity(NAME_PREFIX.len() + 5);
    name.push_str(NAME_PREFIX);
    for _ in 0..5 {
        let i = rng.random_range(0..ALPHABET.len());
        name.push(char::from(ALPHABET[i]));
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn names_are_install_and_five_generate_name_characters() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let a = install_plan_name(&mut rng);
        let b = install_plan_name(&mut rng);
        assert_ne!(a, b);
        for name in [a, b] {
            assert_eq!(name.len(), 13);
            assert!(name.starts_with("install-"));
            assert!(name[8..].bytes().all(|c| ALPHABET.contains(&c)), "{name}");
        }
    }
}
