//! Fuzzes the decoder of sedtrace's binary trace (`sediment_sim::bintrace`): any bytes must
//! decode to the end or stop with an error, never panic, and the runs decoded replay into a
//! `Capture`.
//!
//! Speed: a run record may cover up to 4 GiB (a `u32` length), which the capture walks line by
//! line; a few such records made every execution take tens of milliseconds (20 executions per
//! second) without reaching new decoder code. The runs are therefore replayed only while their
//! bytes add up to at most [`REPLAY_BYTES`]; the decoder still reads every record. The trace
//! comes from Sediment's own valgrind tool through a pipe, never from a stranger's file, so
//! the capture's cost per byte of a run is not a hostile-input concern.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_sim::bintrace::{BinTraceReader, Record};
use sediment_sim::{Capture, SetAssocLru};

/// Bytes of runs replayed into the capture per input.
const REPLAY_BYTES: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = BinTraceReader::new(data) else {
        return;
    };
    let mut capture = Capture::new(vec![SetAssocLru::new(64, 64, 4).expect("geometry")]);
    capture.set_text(0x1000, 0x10_0000).expect("text range");
    let mut replayed = 0u64;
    loop {
        match reader.next_record() {
            Ok(Some(Record::Run { start, len, count })) => {
                replayed = replayed.saturating_add(len);
                if replayed <= REPLAY_BYTES {
                    capture.run(start, start + len, count);
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => return,
        }
    }
    capture.finish();
    let _ = capture.exec_profile();
});
