//! Fuzzes the decoder of sedtrace's binary trace (`sediment_sim::bintrace`): any bytes must
//! decode to the end or stop with an error, never panic, and replay into a `Capture`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_sim::bintrace::BinTraceReader;
use sediment_sim::{Capture, SetAssocLru};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = BinTraceReader::new(data) else {
        return;
    };
    let mut capture = Capture::new(vec![SetAssocLru::new(64, 64, 4).expect("geometry")]);
    capture.set_text(0x1000, 0x10_0000).expect("text range");
    if reader.replay(&mut capture, None).is_ok() {
        capture.finish();
        let _ = capture.exec_profile();
    }
});
