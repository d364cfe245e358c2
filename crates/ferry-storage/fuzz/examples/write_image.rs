//! Unpacks a `recovery_scan` input into a directory, checksums fixed as the target fixes
//! them, to look at a finding with ordinary tools or to copy its files into a test.
//!
//!     cargo run --manifest-path crates/ferry-storage/fuzz/Cargo.toml \
//!         --example write_image -- <input file> <empty directory>

use ferry_storage_fuzz::DirImage;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(dir)) = (args.next(), args.next()) else {
        eprintln!("usage: write_image <input file> <empty directory>");
        std::process::exit(2);
    };
    let image = DirImage::parse(&std::fs::read(&input).expect("the input file"));
    std::fs::create_dir_all(&dir).expect("the directory");
    image.write_to(dir.as_ref()).expect("the files");
    println!("repair: {}", image.repair);
    for f in &image.files {
        println!(
            "{:?} {} ({} bytes)",
            f.kind,
            f.kind.file_name(f.base),
            f.bytes.len()
        );
    }
}
