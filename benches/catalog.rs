//! Catalog benchmarks (filled in below as the engine grows).
fn main() {}
