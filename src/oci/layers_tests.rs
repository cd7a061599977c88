use std::io::Write;

use super::*;

/// One raw tar entry; the path is written as given (tar::Builder would refuse `..`).
enum Raw<'a> {
    File(&'a str, &'a [u8]),
    Symlink(&'a str, &'a str),
    HardLink(&'a str, &'a str),
    Dir(&'a str),
}

fn tar_of(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let mut h = tar::Header::new_gnu();
        let (path, kind, data, link): (&str, EntryType, &[u8], Option<&str>) = match e {
            Raw::File(p, d) => (p, EntryType::Regular, d, None),
            Raw::Symlink(p, l) => (p, EntryType::Symlink, &[], Some(l)),
            Raw::HardLink(p, l) => (p, EntryType::Link, &[], Some(l)),
            Raw::Dir(p) => (p, EntryType::Directory, &[], None),
        };
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(l) = link {
            h.as_old_mut().linkname[..l.len()].copy_from_slice(l.as_bytes());
        }
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    }
    b.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn unpack(layers: &[Vec<u8>], limits: &Limits) -> Result<UnpackedFiles, LayerError> {
    let digests: Vec<String> = (0..layers.len()).map(|i| format!("sha256:{i}")).collect();
    let blobs: Vec<LayerBlob<'_>> = layers
        .iter()
        .zip(&digests)
        .map(|(data, digest)| LayerBlob {
            digest,
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
            data,
        })
        .collect();
    unpack_layers(&blobs, limits)
}

const CSV: &[u8] = b"kind: ClusterServiceVersion\n";

#[test]
fn keeps_only_manifests_and_metadata_from_gzip_plain_and_zstd_layers() {
    let layer = tar_of(&[
        Raw::Dir("manifests/"),
        Raw::File("./manifests/csv.yaml", CSV),
        Raw::File("metadata/annotations.yaml", b"annotations: {}\n"),
        Raw::File("etc/passwd", b"root"),
        Raw::Symlink("bin/sh", "/bin/busybox"),
    ]);
    let zstd =
        ruzstd::encoding::compress_to_vec(&layer[..], ruzstd::encoding::CompressionLevel::Fastest);
    for data in [gzip(&layer), layer.clone(), zstd] {
        let files = unpack(&[data], &Limits::default()).unwrap();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["manifests/csv.yaml", "metadata/annotations.yaml"]
        );
        assert_eq!(files["manifests/csv.yaml"], CSV);
    }
}

#[test]
fn later_layers_override_and_whiteouts_remove_earlier_files() {
    let base = tar_of(&[
        Raw::File("manifests/csv.yaml", b"old"),
        Raw::File("manifests/crd.yaml", b"crd"),
        Raw::File("metadata/annotations.yaml", b"a"),
        Raw::File("metadata/extra.yaml", b"x"),
    ]);
    let top = tar_of(&[
        Raw::File("manifests/csv.yaml", CSV),
        Raw::File("manifests/.wh.crd.yaml", b""),
        Raw::File("metadata/.wh..wh..opq", b""),
        Raw::File("metadata/annotations.yaml", b"new"),
    ]);
    let files = unpack(&[gzip(&base), gzip(&top)], &Limits::default()).unwrap();
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["manifests/csv.yaml", "metadata/annotations.yaml"]
    );
    assert_eq!(files["manifests/csv.yaml"], CSV);
    assert_eq!(files["metadata/annotations.yaml"], b"new");
}

fn refused(layers: &[Vec<u8>], limits: &Limits) -> String {
    unpack(layers, limits).unwrap_err().to_string()
}

#[test]
fn path_traversal_and_absolute_paths_are_refused_naming_the_file() {
    for path in [
        "../../etc/cron.d/x",
        "manifests/../../escape.yaml",
        "/manifests/csv.yaml",
    ] {
        let e = refused(
            &[gzip(&tar_of(&[Raw::File(path, CSV)]))],
            &Limits::default(),
        );
        assert!(e.contains(path), "{e}");
        assert!(e.contains("refused"), "{e}");
    }
}

#[test]
fn links_in_the_bundle_are_refused_never_followed() {
    let cases = [
        Raw::Symlink("manifests/csv.yaml", "/etc/shadow"),
        Raw::Symlink("manifests", "../../.."),
        Raw::HardLink("metadata/annotations.yaml", "etc/passwd"),
    ];
    for case in cases {
        let layer = tar_of(&[Raw::File("etc/passwd", b"root"), case]);
        let e = refused(&[gzip(&layer)], &Limits::default());
        assert!(e.contains("links in a bundle are not followed"), "{e}");
    }
}

#[test]
fn oversized_files_and_totals_are_refused() {
    let limits = Limits {
        max_file_bytes: 100,
        max_total_bytes: 150,
        ..Limits::default()
    };
    let big = vec![b'x'; 101];
    let e = refused(
        &[gzip(&tar_of(&[Raw::File("manifests/big.yaml", &big)]))],
        &limits,
    );
    assert!(
        e.contains("manifests/big.yaml") && e.contains("101 bytes"),
        "{e}"
    );
    let eighty = vec![b'x'; 80];
    let e = refused(
        &[gzip(&tar_of(&[
            Raw::File("manifests/a.yaml", &eighty),
            Raw::File("manifests/b.yaml", &eighty),
        ]))],
        &limits,
    );
    assert!(e.contains("160 bytes"), "{e}");
}

#[test]
fn gzip_bombs_are_refused_without_unpacking_them() {
    // 64 MiB of zeros outside the bundle: compresses to ~64 KiB.
    let zeros = vec![0u8; 64 * 1024 * 1024];
    let layer = gzip(&tar_of(&[Raw::File("filler.bin", &zeros)]));
    assert!(layer.len() < 1024 * 1024);
    let limits = Limits {
        max_unpacked_layer_bytes: 8 * 1024 * 1024,
        ..Limits::default()
    };
    let e = refused(&[layer], &limits);
    assert!(e.contains("decompresses to more than 8388608 bytes"), "{e}");
}

#[test]
fn too_many_layers_are_refused() {
    let layer = gzip(&tar_of(&[Raw::File("manifests/csv.yaml", CSV)]));
    let limits = Limits {
        max_layers: 2,
        ..Limits::default()
    };
    let e = refused(&[layer.clone(), layer.clone(), layer], &limits);
    assert!(e.contains("3 layers, more than the 2 allowed"), "{e}");
}

#[test]
fn garbage_is_not_a_layer() {
    let e = refused(
        &[b"this is not a tar archive at all".repeat(40)],
        &Limits::default(),
    );
    assert!(e.contains("layer sha256:0"), "{e}");
}
