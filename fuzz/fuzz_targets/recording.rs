//! Fuzzes the reader of saved recordings (`sediment_sim::Saved::from_bytes`, the file of
//! `order --refine-recording`): any bytes must give a recording or an error, never a panic; a
//! recording read must write back to the same bytes and replay without error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_sim::{Saved, SetAssocLru};

fuzz_target!(|data: &[u8]| {
    if let Ok(saved) = Saved::from_bytes(data) {
        assert_eq!(saved.to_bytes(), data, "a saved recording writes back unchanged");
        let r = &saved.recording;
        let mut arrays = vec![vec![SetAssocLru::new(64, 64, 4).expect("geometry")]];
        r.replay(r.starts(), &[0], &mut arrays).expect("replays as recorded");
        r.exec_profile(r.starts()).expect("counts inside their functions");
    }
});
