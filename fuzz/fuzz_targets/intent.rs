//! The intent classifier: any text, any history flag — an answer, the same one twice, and
//! `new` whenever there is no history.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_core::Intent;
use ragctx_engine::intent::classify;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let with = classify(&text, true);
    assert_eq!(with, classify(&text, true), "deterministic");
    assert_eq!(classify(&text, false), Intent::New, "no history: new");
});
