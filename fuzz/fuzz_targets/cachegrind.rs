//! Fuzzes the reader of `cachegrind.out` totals (`sediment_measure::cachegrind::totals`): any
//! text must give the totals or an error naming a line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The measure stage reads cachegrind output as UTF-8 text.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = sediment_measure::cachegrind::totals(text) {
        assert!(e.line <= text.lines().count() + 1, "error past the end");
    }
});
