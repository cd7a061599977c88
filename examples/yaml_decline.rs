fn main() {
    for f in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&f).unwrap();
        match olm_rs::catalog::fbc::yaml_fast::decline_line(&text) {
            None => {}
            Some(l) => {
                let lines: Vec<&str> = text.lines().collect();
                println!("{f}:{l}");
                for i in l.saturating_sub(4)..(l + 1).min(lines.len() as u32) {
                    println!("  {:5} {:?}", i + 1, &lines[i as usize].chars().take(100).collect::<String>());
                }
            }
        }
    }
}
