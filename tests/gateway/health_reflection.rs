//! Health checking and server reflection, as grpcurl, Postman and load
//! balancers use them; NOT_SERVING while shutting down.

use std::time::Duration;

use tonic::Code;
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};
use toolgate::proto::SERVICE_NAME;

use crate::common::{TestGateway, SEARCH_REGISTRY};

fn check(service: &str) -> HealthCheckRequest {
    HealthCheckRequest { service: service.to_owned() }
}

#[tokio::test]
async fn health_is_serving_for_the_server_and_the_service() {
    let gw = TestGateway::registry(SEARCH_REGISTRY).start().await;
    let mut health = HealthClient::new(gw.channel().await);
    for service in ["", SERVICE_NAME] {
        let status = health.check(check(service)).await.unwrap().into_inner().status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }
    let unknown = health.check(check("no.such.Service")).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

#[tokio::test]
async fn health_turns_not_serving_when_shutdown_begins() {
    let gw = TestGateway::registry(SEARCH_REGISTRY).start().await;
    let mut health = HealthClient::new(gw.channel().await);
    let mut watch = health.watch(check(SERVICE_NAME)).await.unwrap().into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.status, ServingStatus::Serving as i32);
    let shutdown = tokio::spawn(gw.shutdown());
    let next = tokio::time::timeout(Duration::from_secs(5), watch.message()).await.expect("an update");
    assert_eq!(next.unwrap().unwrap().status, ServingStatus::NotServing as i32);
    drop(watch);
    shutdown.await.unwrap();
}

#[tokio::test]
async fn reflection_v1_and_v1alpha_list_and_describe_the_service() {
    use tokio_stream::StreamExt;
    use tonic_reflection::pb::{v1, v1alpha};

    let gw = TestGateway::registry(SEARCH_REGISTRY).start().await;

    let mut client = v1::server_reflection_client::ServerReflectionClient::new(gw.channel().await);
    let requests = [
        v1::server_reflection_request::MessageRequest::ListServices(String::new()),
        v1::server_reflection_request::MessageRequest::FileContainingSymbol(SERVICE_NAME.into()),
        // Error details decode in generic tools (grpcurl) only if this resolves.
        v1::server_reflection_request::MessageRequest::FileContainingSymbol("google.rpc.ErrorInfo".into()),
    ]
    .map(|r| v1::ServerReflectionRequest { host: String::new(), message_request: Some(r) });
    let mut stream = client.server_reflection_info(tokio_stream::iter(requests)).await.unwrap().into_inner();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        stream.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    let services: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [SERVICE_NAME, "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"] {
        assert!(services.iter().any(|s| s == expected), "{expected} in {services:?}");
    }
    let Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) =
        stream.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected descriptors")
    };
    let file = <prost_types::FileDescriptorProto as prost::Message>::decode(files.file_descriptor_proto[0].as_slice());
    let file = file.unwrap();
    assert_eq!(file.package(), "toolgate.v1");
    let service = &file.service[0];
    let methods: Vec<&str> = service.method.iter().map(|m| m.name()).collect();
    assert_eq!(methods, ["Resolve", "Execute", "ListTools", "SearchTools"]);
    let Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) =
        stream.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected the descriptor of google.rpc.ErrorInfo")
    };
    let file = <prost_types::FileDescriptorProto as prost::Message>::decode(files.file_descriptor_proto[0].as_slice());
    assert!(file.unwrap().message_type.iter().any(|m| m.name() == "ErrorInfo"));

    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(gw.channel().await);
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1alpha::server_reflection_request::MessageRequest::ListServices(String::new())),
    };
    let mut stream = alpha.server_reflection_info(tokio_stream::iter([request])).await.unwrap().into_inner();
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        stream.next().await.unwrap().unwrap().message_response
    else {
        panic!("expected a service list")
    };
    assert!(list.service.iter().any(|s| s.name == SERVICE_NAME));
}

/// `toolgate health`, the probe any image can run: exit 0 only when the
/// gateway answers SERVING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_command_exits_zero_only_when_serving() {
    let gw = TestGateway::registry(SEARCH_REGISTRY).start().await;
    let addr = gw.addr.to_string();
    let health = |args: &[&str]| {
        let mut all = vec!["health"];
        all.extend_from_slice(args);
        crate::common::toolgate().args(&all).output().unwrap()
    };
    let serving = health(&["--addr", &addr]);
    assert!(serving.status.success(), "{}", crate::common::stderr(&serving));
    assert_eq!(crate::common::stdout(&serving).trim(), "SERVING");
    let named = health(&["--addr", &format!("http://{addr}"), "--service", SERVICE_NAME]);
    assert!(named.status.success());
    let unknown = health(&["--addr", &addr, "--service", "no.such.Service"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(crate::common::stderr(&unknown).contains("NotFound"), "{}", crate::common::stderr(&unknown));
    gw.shutdown().await;
    let down = health(&["--addr", &addr, "--timeout", "2s"]);
    assert_eq!(down.status.code(), Some(1));
    assert!(crate::common::stderr(&down).starts_with(&format!("not serving: cannot reach http://{addr}")));
}
