//! Resolve over gRPC: order, toolsets, aliases, suggestions, the exact
//! warning text, strict failures with rich details, and hostile names.

use prost::Message;
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;
use toolgate::proto::v1::{ResolveFailure, ResolveRequest, UnknownName};

use crate::common::{TestGateway, SEARCH_REGISTRY};

fn request(names: &[&str], strict: Option<bool>) -> ResolveRequest {
    ResolveRequest { names: names.iter().map(|n| n.to_string()).collect(), strict }
}

async fn gateway(strict: bool) -> TestGateway {
    TestGateway::registry(SEARCH_REGISTRY).strict(strict).start().await
}

fn names(tools: &[toolgate::proto::v1::Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

const WARNING: &str = "Unknown tool 'web_serch'. Did you mean 'web_search' or 'web_fetch'? Run 'toolgate tools list'. \
                       Unknown tool 'zzz'. Run 'toolgate tools list'.";

#[tokio::test]
async fn non_strict_keeps_order_expands_toolsets_and_warns() {
    let mut gw = gateway(false).await;
    let asked = ["web_serch", "courier", "calculator", "move_delivery", "web_search", "zzz", "search_the_web"];
    let response = gw.client.resolve(request(&asked, None)).await.unwrap().into_inner();
    // Request order; the toolset expanded in its order; the alias resolved to
    // a tool already present is not repeated; each tool once.
    assert_eq!(names(&response.tools), ["track_parcel", "reschedule_delivery", "calculator", "web_search"]);
    assert_eq!(
        response.unknown,
        [
            UnknownName { name: "web_serch".into(), suggestions: vec!["web_search".into(), "web_fetch".into()] },
            UnknownName { name: "zzz".into(), suggestions: vec![] },
        ]
    );
    assert_eq!(response.message, WARNING);
    assert!(!response.catalog_version.is_empty());
}

#[tokio::test]
async fn resolved_tools_carry_their_contract() {
    let mut gw = gateway(false).await;
    let response = gw.client.resolve(request(&["search_the_web", "calc"], None)).await.unwrap().into_inner();
    assert_eq!(names(&response.tools), ["web_search", "calculator"]);
    let web = &response.tools[0];
    assert_eq!(web.description, "Search the web.");
    assert_eq!(web.aliases, ["search_the_web"]);
    assert_eq!(web.source, "registry");
    assert!(!web.idempotent);
    // Key order of the schema as written.
    assert!(web.parameters_json.starts_with(r#"{"type":"object","properties":{"query":{"type":"string"},"limit""#));
    let calc = &response.tools[1];
    assert_eq!((calc.source.as_str(), calc.idempotent), ("builtin", true));
    assert!(calc.aliases.contains(&"calc".to_string()));
    assert!(response.unknown.is_empty() && response.message.is_empty());
}

#[tokio::test]
async fn case_and_separator_drift_is_suggested_not_resolved() {
    let mut gw = gateway(false).await;
    let response = gw.client.resolve(request(&["WebSearch", "functions.track_parcel"], None)).await.unwrap();
    let response = response.into_inner();
    assert!(response.tools.is_empty());
    assert_eq!(response.unknown[0].suggestions[0], "web_search");
    assert_eq!(response.unknown[1].suggestions, ["track_parcel"]);
}

/// The `toolgate.v1.ResolveFailure` and `google.rpc.ErrorInfo` of a status,
/// and the message of the `google.rpc.Status` they came in.
fn details(status: &Status) -> (ResolveFailure, tonic_types::ErrorInfo, String) {
    let rich = status.get_error_details();
    let info = rich.error_info().expect("ErrorInfo detail").clone();
    let rpc = tonic_types::pb::Status::decode(status.details()).expect("google.rpc.Status");
    let any = rpc.details.iter().find(|a| a.type_url == "type.googleapis.com/toolgate.v1.ResolveFailure");
    let failure = ResolveFailure::decode(any.expect("ResolveFailure detail").value.as_slice()).unwrap();
    (failure, info, rpc.message)
}

#[tokio::test]
async fn strict_request_fails_with_rich_details() {
    let mut gw = gateway(false).await;
    let status = gw.client.resolve(request(&["web_search", "web_serch", "zzz"], Some(true))).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(status.message(), WARNING);
    let (failure, info, message) = details(&status);
    assert_eq!(message, status.message(), "details carry the status message");
    assert_eq!(info.reason, "TOOL_NOT_FOUND");
    assert_eq!(info.domain, "toolgate");
    assert_eq!(info.metadata.get("unknown_total").map(String::as_str), Some("2"));
    assert_eq!(failure.unknown_total, 2);
    assert_eq!(failure.unknown[0].name, "web_serch");
    assert_eq!(failure.unknown[0].suggestions, ["web_search", "web_fetch"]);
    assert_eq!(failure.unknown[1], UnknownName { name: "zzz".into(), suggestions: vec![] });
}

#[tokio::test]
async fn the_request_field_overrides_the_configured_policy() {
    let mut strict = gateway(true).await;
    let status = strict.client.resolve(request(&["nope"], None)).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let relaxed = strict.client.resolve(request(&["nope", "echo"], Some(false))).await.unwrap().into_inner();
    assert_eq!(names(&relaxed.tools), ["echo"]);
    assert_eq!(relaxed.message, "Unknown tool 'nope'. Run 'toolgate tools list'.");
    // Strict with only known names succeeds.
    let ok = strict.client.resolve(request(&["research"], None)).await.unwrap().into_inner();
    assert_eq!(names(&ok.tools), ["web_search", "exa_search", "web_fetch"]);
}

#[tokio::test]
async fn past_twenty_unknown_names_the_rest_are_counted() {
    let mut gw = gateway(false).await;
    let asked: Vec<String> = (0..25).map(|i| format!("missing_{i}")).collect();
    let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    let status = gw.client.resolve(request(&asked, Some(true))).await.unwrap_err();
    assert!(status.message().ends_with("… and 5 more unknown names."), "{}", status.message());
    assert!(status.message().contains("'missing_19'") && !status.message().contains("'missing_20'"));
    let (failure, info, message) = details(&status);
    assert_eq!(message, status.message());
    assert_eq!(failure.unknown.len(), 20);
    assert_eq!(failure.unknown_total, 25);
    assert_eq!(info.metadata["unknown_total"], "25");
    // Non-strict: every unknown name is listed, the message is capped alike.
    let response = gw.client.resolve(request(&asked, None)).await.unwrap().into_inner();
    assert_eq!(response.unknown.len(), 25);
    assert_eq!(response.message, status.message());
}

/// What the status takes of the trailers: `grpc-message` percent-encoded,
/// `grpc-status-details-bin` in base64.
fn trailer_bytes(status: &Status) -> usize {
    let message: usize =
        status.message().bytes().map(|b| if (0x20..0x7f).contains(&b) && b != b'%' { 1 } else { 3 }).sum();
    message + status.details().len().div_ceil(3) * 4
}

#[tokio::test]
async fn long_hostile_names_never_overflow_the_trailers() {
    let mut gw = gateway(false).await;
    // 25 names of about 1,000 bytes: CJK (3 bytes each), controls and bidi marks.
    let asked: Vec<String> = (0..25).map(|i| format!("{i}{}", "語\u{202e}\u{1}".repeat(140))).collect();
    let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
    let status = gw.client.resolve(request(&asked, Some(true))).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    let bytes = trailer_bytes(&status);
    assert!(bytes <= 7 * 1024, "{bytes} bytes of trailers: C-core clients allow 8 KiB in all");
    let (failure, _, message) = details(&status);
    assert_eq!(message, status.message());
    assert_eq!(failure.unknown_total, 25);
    let shown = failure.unknown.len();
    assert!((1..20).contains(&shown), "{shown}");
    assert_eq!(failure.unknown[0].name, asked[0], "names in the details are as sent");
    assert!(status.message().ends_with(&format!("… and {} more unknown names.", 25 - shown)), "{}", status.message());
    // Twenty ordinary names all fit.
    let ordinary: Vec<String> = (0..20).map(|i| format!("some_missing_tool_{i}")).collect();
    let ordinary: Vec<&str> = ordinary.iter().map(String::as_str).collect();
    let status = gw.client.resolve(request(&ordinary, Some(true))).await.unwrap_err();
    assert_eq!(details(&status).0.unknown.len(), 20);
}

#[tokio::test]
async fn ten_thousand_names_are_answered() {
    let mut gw = gateway(false).await;
    let mut asked: Vec<String> = (0..9_996).map(|i| format!("tool_number_{i}")).collect();
    asked.extend(["web_serch", "courier", "calculator", "tool_number_1"].map(String::from));
    let response = gw.client.resolve(ResolveRequest { names: asked, strict: None }).await.unwrap().into_inner();
    assert_eq!(names(&response.tools), ["track_parcel", "reschedule_delivery", "calculator"]);
    assert_eq!(response.unknown.len(), 9_997, "each unknown name once");
    assert_eq!(response.unknown[9_996].suggestions, ["web_search", "web_fetch"]);
}

#[tokio::test]
async fn malformed_name_lists_are_invalid_argument_and_the_server_keeps_serving() {
    let mut gw = gateway(false).await;
    let too_many = ResolveRequest { names: vec!["x".into(); 10_001], strict: None };
    let cases = [
        (too_many, "too many names: 10001; at most 10000"),
        (request(&["echo", ""], None), "names[1] is empty"),
        (ResolveRequest { names: vec!["a".repeat(100 * 1024)], strict: None }, "names[0] is 102400 bytes long"),
    ];
    for (req, expected) in cases {
        let status = gw.client.resolve(req).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains(expected), "{}", status.message());
    }
    let ok = gw.client.resolve(request(&["echo"], None)).await.unwrap().into_inner();
    assert_eq!(names(&ok.tools), ["echo"]);
}

#[tokio::test]
async fn hostile_names_are_escaped_and_cut_in_messages() {
    let mut gw = gateway(false).await;
    let long = format!("{}tail", "w".repeat(70));
    let asked = ["evil\u{202e}name", "line\nbreak\u{0}", long.as_str(), "\u{fffd}\u{ffff}\u{200d}", "👩‍💻_tool"];
    let response = gw.client.resolve(request(&asked, None)).await.unwrap().into_inner();
    assert_eq!(response.unknown.len(), 5);
    assert_eq!(response.unknown[0].name, "evil\u{202e}name", "names come back as sent");
    let message = &response.message;
    assert!(message.contains("Unknown tool 'evil\\u202ename'."), "{message}");
    assert!(message.contains("Unknown tool 'line\\u000abreak\\u0000'."), "{message}");
    assert!(message.contains(&format!("Unknown tool '{}…'.", "w".repeat(64))), "{message}");
    assert!(!message.contains('\u{202e}') && !message.contains('\n'));
    // A joiner inside an emoji is a formatting character, not a control or bidi one: kept as sent.
    assert!(message.contains("'👩\u{200d}💻_tool'"), "{message}");
}

/// A ResolveRequest whose `names` (field 1) are raw bytes, to send invalid UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct RawNames {
    #[prost(bytes = "vec", repeated, tag = "1")]
    names: Vec<Vec<u8>>,
}

#[tokio::test]
async fn invalid_utf8_is_invalid_argument() {
    let gw = gateway(false).await;
    let mut grpc = tonic::client::Grpc::new(gw.channel().await);
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/toolgate.v1.ToolGatewayService/Resolve");
    let codec = tonic_prost::ProstCodec::<RawNames, toolgate::proto::v1::ResolveResponse>::default();
    let raw = RawNames { names: vec![b"web\xff\xfesearch".to_vec()] };
    let status = grpc.unary(Request::new(raw), path, codec).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("malformed request"), "{}", status.message());
    // Still serving.
    let mut client = gw.client.clone();
    assert!(client.resolve(request(&["echo"], None)).await.is_ok());
}
