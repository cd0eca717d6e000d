//! The pdf reader alone, from seeds of its own format (fuzz/seeds/pdf), so that mutations stay
//! close enough to the format to reach the parser; checked as `common/reader.rs` says.
#![no_main]
#[path = "common/reader.rs"]
mod reader;

libfuzzer_sys::fuzz_target!(|data: &[u8]| reader::check(data, ragctx_ingest::DocumentFormat::Pdf));
