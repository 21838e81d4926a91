//! Fuzzes the profile and order text formats (`sediment_profile::Profile::from_text`,
//! `FunctionOrder::from_text`): any bytes must give a value or an error, never a panic; and
//! whatever parses must survive a write/read round trip unchanged (the writer's escaping is the
//! promise that no name can break the line structure).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sediment_profile::{FunctionOrder, Profile};

fuzz_target!(|data: &[u8]| {
    // The CLI reads these files as UTF-8 text (fsio::read_text), so other bytes never get here.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(profile) = Profile::from_text(text) {
        assert!(profile.is_canonical(), "a parsed profile is not canonical");
        let again = Profile::from_text(&profile.to_text()).expect("written profile re-reads");
        assert_eq!(again, profile, "profile round trip changed the profile");
    }
    if let Ok(order) = FunctionOrder::from_text(text) {
        let again = FunctionOrder::from_text(&order.to_text()).expect("written order re-reads");
        assert_eq!(again, order, "order round trip changed the order");
    }
});
