//! API request decoding: any body and session id give a decoded request or a 4xx error,
//! never a panic; accepted turn settings are valid and accepted sessions parse.
#![no_main]
use libfuzzer_sys::fuzz_target;
use ragctx_core::SessionId;
use ragctx_engine::TurnSettings;
use ragctx_server::openai::decode_chat;

fuzz_target!(|data: &[u8]| {
    let (session, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (String::from_utf8_lossy(&data[..i]).into_owned(), &data[i + 1..]),
        None => ("s".to_owned(), data),
    };
    let base = TurnSettings::default();
    // The handler's own decoding (`POST /v1/sessions/{id}/turns` calls it), keyless and in a
    // bare key's namespace.
    for ns in [None, Some("f83868769a66".to_owned())] {
        match ragctx_server::decode_turn(body, &ns, &session, &base) {
            Ok(turn) => {
                turn.settings.validate().expect("decoded settings are valid");
                SessionId::parse(&session).expect("decoded session parses");
                assert!(!turn.question.trim().is_empty(), "a blank question is refused");
            }
            Err(e) => assert!(e.status.is_client_error(), "{e:?}"),
        }
    }
    match decode_chat(body, Some(&session).filter(|s| !s.is_empty()).map(|s| s.as_str())) {
        Ok(turn) => {
            SessionId::parse(&turn.session).expect("decoded session parses");
        }
        Err(e) => assert!(e.status.is_client_error(), "{e:?}"),
    }
});
