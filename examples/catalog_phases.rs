use std::time::Instant;
fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let t = Instant::now();
    let files = olm_rs::catalog::fbc::catalog_files(&root).unwrap();
    let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    println!("read {:?}", t.elapsed());
    calibrate(&texts);
    for (f, text) in files.iter().zip(&texts) { let t = Instant::now(); let _ = olm_rs::catalog::fbc::yaml_fast::to_json_documents(text); let e = t.elapsed(); if e.as_millis() > 5 { println!("  {} {} bytes {:?}", f.display(), text.len(), e); } }
    let t = Instant::now();
    let mut docs = 0;
    let mut bytes = 0;
    for text in &texts {
        let d = olm_rs::catalog::fbc::yaml_fast::to_json_documents(text).unwrap();
        docs += d.len();
        bytes += d.iter().map(|(j, _)| j.len()).sum::<usize>();
    }
    println!("yaml_fast {docs} docs {bytes} bytes {:?}", t.elapsed());
    let t = Instant::now();
    for (f, text) in files.iter().zip(&texts) {
        let (_c, p) = olm_rs::catalog::fbc::load_text(f.to_string_lossy().as_ref().into(), text);
        assert!(p.is_empty());
    }
    println!("load_text (split+blobs) {:?}", t.elapsed());
    let t = Instant::now();
    let loaded = olm_rs::catalog::fbc::load_dir(&root).unwrap();
    println!("load_dir parallel {:?}", t.elapsed());
    let t = Instant::now();
    let problems = olm_rs::catalog::validate::validate(&loaded.config);
    println!("validate {:?} {}", t.elapsed(), problems.len());
    let t = Instant::now();
    let idx = olm_rs::catalog::CatalogIndex::new(loaded.config);
    println!("index {:?} {}", t.elapsed(), idx.bundle_count());
}

#[allow(dead_code)]
fn calibrate(texts: &[String]) {
    let t = Instant::now();
    let mut n = 0;
    for text in texts {
        n += text.bytes().filter(|&b| b == b'\n').count();
    }
    println!("count lines {n} {:?}", t.elapsed());
    let t = Instant::now();
    for text in texts {
        let v: Vec<&serde_json::value::RawValue> = vec![];
        drop(v);
        let _ = olm_rs::catalog::fbc::yaml_fast::to_json_documents(&text[..text.len() / 2]);
    }
    println!("half {:?}", t.elapsed());
}
