//! The filter language (issue 24): any text either fails to parse with a path-naming error,
//! or parses into a filter that prints back to an equal filter, evaluates without panicking,
//! and compiles to a Milvus expression (literal and templated) without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_core::{ExclusionSet, Filter, Metadata};
use ragctx_milvus::filter::{predicate, TenantScope};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let filter = match Filter::parse(&text) {
        Ok(f) => f,
        Err(e) => {
            assert!(e.to_string().contains("filter"), "{e}");
            return;
        }
    };
    let back = Filter::parse(&filter.to_json_string()).expect("a printed filter parses");
    assert_eq!(back, filter, "{text}");
    let meta: Metadata = serde_json::from_str(r#"{"topic":"pests","year":2024,"tags":["a","b"],"ok":true}"#).unwrap();
    let _ = filter.matches("doc", &meta);
    for templates in [false, true] {
        for tenant in [TenantScope::All, TenantScope::Field("t2"), TenantScope::IdPrefix("default"), TenantScope::IdPrefix("t2")] {
            let _ = predicate(&filter, &ExclusionSet::default(), tenant, templates, true);
        }
    }
});
