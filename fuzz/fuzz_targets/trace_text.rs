//! Fuzzes the reader of the text instruction-fetch trace (`sediment_sim::TraceReader`): any
//! bytes must give events up to the end or an error, never a panic, and every event read must
//! print as a line that reads back to the same event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_sim::{TraceEvent, TraceReader};

fuzz_target!(|data: &[u8]| {
    let events: Vec<TraceEvent> = TraceReader::new(data).map_while(Result::ok).collect();
    if events.is_empty() {
        return;
    }
    let mut text = sediment_sim::trace::header();
    text.push('\n');
    for e in &events {
        text.push_str(&format!("{e}\n"));
    }
    let back: Vec<TraceEvent> = TraceReader::new(text.as_bytes())
        .collect::<Result<_, _>>()
        .expect("printed events read back");
    assert_eq!(back, events, "trace round trip");
});
