//! ListTools over gRPC: the full list, filtering by names, aliases and
//! toolsets, and the provider formats.

use serde_json::Value;
use tonic::Code;
use toolgate::proto::v1::{ListToolsRequest, ResolveRequest, ToolFormat};

use crate::common::{TestGateway, SEARCH_REGISTRY};

async fn gateway() -> TestGateway {
    TestGateway::registry(SEARCH_REGISTRY).start().await
}

fn list(tools: &[&str], format: ToolFormat) -> ListToolsRequest {
    ListToolsRequest { tools: tools.iter().map(|t| t.to_string()).collect(), format: format as i32 }
}

#[tokio::test]
async fn lists_every_tool_sorted_with_the_catalog_version() {
    let mut gw = gateway().await;
    let response = gw.client.list_tools(list(&[], ToolFormat::Unspecified)).await.unwrap().into_inner();
    let names: Vec<&str> = response.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "calculator",
            "current_time",
            "echo",
            "exa_search",
            "reschedule_delivery",
            "track_parcel",
            "web_fetch",
            "web_search"
        ]
    );
    assert_eq!(response.formatted_json, "", "the native format renders nothing");
    let resolved = gw.client.resolve(ResolveRequest { names: vec!["echo".into()], strict: None }).await.unwrap();
    assert_eq!(response.catalog_version, resolved.into_inner().catalog_version);
}

#[tokio::test]
async fn filters_by_names_aliases_and_toolsets() {
    let mut gw = gateway().await;
    let response = gw.client.list_tools(list(&["research", "move_delivery", "exa_search"], ToolFormat::Unspecified));
    let names: Vec<String> = response.await.unwrap().into_inner().tools.into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["web_search", "exa_search", "web_fetch", "reschedule_delivery"]);
}

#[tokio::test]
async fn an_unknown_name_in_the_filter_is_not_found_with_suggestions() {
    let mut gw = gateway().await;
    let status = gw.client.list_tools(list(&["web_serch"], ToolFormat::Openai)).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        status.message(),
        "Unknown tool 'web_serch'. Did you mean 'web_search' or 'web_fetch'? Run 'toolgate tools list'."
    );
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("formatted_json is JSON")
}

#[tokio::test]
async fn openai_format_is_the_chat_completions_tools_array() {
    let mut gw = gateway().await;
    let response = gw.client.list_tools(list(&["web_search", "echo"], ToolFormat::Openai)).await.unwrap();
    let value = json(&response.into_inner().formatted_json);
    let tools = value.as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["type"], "function");
    let function = &tools[0]["function"];
    assert_eq!(function["name"], "web_search");
    assert_eq!(function["description"], "Search the web.");
    assert_eq!(function["parameters"]["required"], serde_json::json!(["query"]));
    let keys: Vec<&String> = function.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["name", "description", "parameters"]);
    assert_eq!(tools[1]["function"]["parameters"], serde_json::json!({"type": "object"}));
}

#[tokio::test]
async fn anthropic_format_uses_input_schema() {
    let mut gw = gateway().await;
    let response = gw.client.list_tools(list(&["exa_search"], ToolFormat::Anthropic)).await.unwrap();
    let value = json(&response.into_inner().formatted_json);
    assert_eq!(
        value,
        serde_json::json!([{
            "name": "exa_search",
            "description": "Search with Exa.",
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
        }])
    );
}

#[tokio::test]
async fn mcp_format_is_a_tools_list_result() {
    let mut gw = gateway().await;
    let response = gw.client.list_tools(list(&["courier"], ToolFormat::Mcp)).await.unwrap();
    let value = json(&response.into_inner().formatted_json);
    let tools = value["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["track_parcel", "reschedule_delivery"]);
    assert_eq!(tools[0]["inputSchema"]["type"], "object");
    assert_eq!(tools[0]["description"], "Track a parcel.");
}

#[tokio::test]
async fn an_unknown_format_is_invalid_argument() {
    let mut gw = gateway().await;
    let status = gw.client.list_tools(ListToolsRequest { tools: vec![], format: 42 }).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(status.message(), "unknown format 42");
}
