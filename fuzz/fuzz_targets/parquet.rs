//! Fuzzes the Parquet table importer (`sediment_parquet::read` and `by_binary`): any bytes must
//! give canonical profiles or a one-line error naming the file, never a panic; a table it reads
//! must write and read back to the same profiles.
//!
//! The seeds are tables `sediment export --format parquet` wrote (one profile, several
//! binaries, an empty profile), so mutations reach the page and row decoding past the footer.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// True for a panic raised in the Parquet decoding crates, which `sediment_parquet::read` catches.
fn in_parquet_decoder(info: &std::panic::PanicHookInfo<'_>) -> bool {
    info.location()
        .is_some_and(|l| l.file().contains("/parquet-") || l.file().contains("/bytes-"))
}

fuzz_target!(
    init: {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !in_parquet_decoder(info) {
                abort(info);
            }
        }));
    },
    |data: &[u8]| {
    match sediment_parquet::read("fuzz.parquet", data.to_vec()) {
        Ok(subs) => {
            for s in &subs {
                assert!(s.profile.is_canonical(), "parquet import gave a non-canonical profile");
            }
            let rows: Vec<(&str, f64, &str, &sediment_profile::Profile)> = subs
                .iter()
                .map(|s| (s.id.as_str(), s.weight, "fuzz", &s.profile))
                .collect();
            if let Ok(bytes) = sediment_parquet::write(&rows) {
                let back = sediment_parquet::read("again.parquet", bytes).expect("own output reads back");
                assert_eq!(back.len(), subs.len());
                for (a, b) in back.iter().zip(&subs) {
                    assert_eq!(a.profile, b.profile);
                }
            }
            let _ = sediment_parquet::by_binary("fuzz.parquet", subs);
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.starts_with("fuzz.parquet: "), "{m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }
});
