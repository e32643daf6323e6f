//! The Kubernetes manifests as shipped: `kubectl kustomize` renders the base
//! and the Redis overlay; the probes name the real health port and service;
//! the Service reaches the port the gateway listens on; every catalogue file
//! of the ConfigMap loads with `toolgate validate` (with the Secret's
//! values); and the container's arguments start the real binary.

use std::{
    collections::BTreeMap,
    io::BufRead,
    path::{Path, PathBuf},
};

use base64::Engine;
use serde_yaml::Value;

use crate::common::{repo, toolgate, Reaped};

/// `kubectl kustomize deploy/k8s/<which>`, one value per object.
fn render(which: &str) -> Vec<Value> {
    let out = std::process::Command::new("kubectl")
        .args(["kustomize", &repo().join("deploy/k8s").join(which).display().to_string()])
        .output()
        .expect("kubectl renders the manifests (it is on the machine the tests run on)");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "kubectl kustomize {which}: {}", String::from_utf8_lossy(&out.stderr));
    serde_yaml::Deserializer::from_str(&text).map(|doc| Value::deserialize(doc).unwrap()).collect()
}

use serde::Deserialize;

fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"].as_str() == Some(kind) && o["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("not a string: {value:?}"))
}

fn port_of(address: &str) -> u64 {
    address.rsplit(':').next().unwrap().parse().unwrap()
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    &args[at + 1]
}

/// What one rendering holds, checked against itself and the binary.
fn check(which: &str) -> (Vec<Value>, tempfile::TempDir) {
    let objects = render(which);
    let deployment = object(&objects, "Deployment", "toolgate");
    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let ports: BTreeMap<&str, u64> = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| (text(&p["name"]), p["containerPort"].as_u64().unwrap()))
        .collect();
    let args: Vec<String> = container["args"].as_sequence().unwrap().iter().map(|a| text(a).to_owned()).collect();

    // The ConfigMap's files, as the pod sees them.
    let files = tempfile::tempdir().unwrap();
    let config_map = object(&objects, "ConfigMap", "toolgate-catalog");
    for (name, content) in config_map["data"].as_mapping().unwrap() {
        std::fs::write(files.path().join(text(name)), text(content)).unwrap();
    }
    let mount = container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "config")
        .map(|m| PathBuf::from(text(&m["mountPath"])))
        .unwrap();
    let config_arg = Path::new(flag(&args, "--config"));
    assert_eq!(config_arg.parent(), Some(mount.as_path()), "--config names a file of the mounted ConfigMap");
    let config_name = config_arg.file_name().unwrap().to_str().unwrap();
    let config: Value =
        serde_yaml::from_str(&std::fs::read_to_string(files.path().join(config_name)).unwrap()).unwrap();

    // Probes: native gRPC on the plaintext health port the configuration
    // opens; with the model door, readiness is its GET /health.
    let health_port = port_of(text(&config["health_listen"]));
    assert_eq!(ports["health"], health_port);
    let door = config["model_door"]["listen"].as_str().map(port_of);
    if let Some(door) = door {
        assert_eq!(ports["model"], door, "{which}: the container's model port is model_door.listen's");
        let ready = &container["readinessProbe"]["httpGet"];
        assert_eq!((text(&ready["path"]), text(&ready["port"])), ("/health", "model"), "{which}");
        let served = service_port(&objects, "model");
        assert_eq!(served["targetPort"].as_str(), Some("model"), "{which}: the Service reaches the door");
        assert_eq!(ports["metrics"], port_of(text(&config["metrics_listen"])));
    }
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"]
        .into_iter()
        .filter(|p| door.is_none() || *p != "readinessProbe")
    {
        let grpc = &container[probe]["grpc"];
        assert_eq!(grpc["port"].as_u64(), Some(health_port), "{which} {probe}");
        if let Some(service) = grpc["service"].as_str() {
            assert_eq!(service, toolgate::proto::SERVICE_NAME, "{which} {probe}");
        }
    }
    // The Service reaches the port `serve` listens on.
    assert_eq!(ports["grpc"], port_of(flag(&args, "--listen")));
    let service = object(&objects, "Service", "toolgate");
    let target = &service["spec"]["ports"][0]["targetPort"];
    assert!(target.as_str() == Some("grpc") || target.as_u64() == Some(ports["grpc"]), "{target:?}");
    let labels = &pod["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(&labels[key], value, "the Service selects the pods");
    }
    // Shutdown: the grace period covers preStop and the drain.
    let drain = humantime::parse_duration(flag(&args, "--drain-timeout")).unwrap().as_secs();
    let pre_stop: u64 = container["lifecycle"]["preStop"]["exec"]["command"][1].as_str().unwrap().parse().unwrap();
    assert!(pod["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap() > drain + pre_stop);
    // Non-root, read-only root filesystem, resources set.
    assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert!(
        container["resources"]["requests"]["memory"].is_string()
            && container["resources"]["limits"]["memory"].is_string()
    );
    for kind in ["PodDisruptionBudget", "HorizontalPodAutoscaler", "NetworkPolicy"] {
        object(&objects, kind, "toolgate");
    }
    assert_eq!(object(&objects, "HorizontalPodAutoscaler", "toolgate")["spec"]["scaleTargetRef"]["name"], "toolgate");

    // The HPA owns the replica count: none on the Deployment, or every
    // `kubectl apply -k` would reset it.
    assert!(deployment["spec"].get("replicas").is_none(), "{which}: replicas on a Deployment an HPA scales");
    // The image is named in `images:` (a tag, not latest).
    let image = text(&container["image"]);
    assert!(image.contains(':') && !image.ends_with(":latest"), "{which}: {image}");
    // A headless Service for clients that balance their HTTP/2 connections.
    let headless = object(&objects, "Service", "toolgate-headless");
    assert_eq!(headless["spec"]["clusterIP"].as_str(), Some("None"));
    assert_eq!(headless["spec"]["selector"], service["spec"]["selector"]);

    // The Secret's values are the environment the catalogue's ${VAR} read;
    // its name carries a hash of them, so a change rolls the pods.
    let secret = objects
        .iter()
        .find(|o| o["kind"] == "Secret" && text(&o["metadata"]["name"]).starts_with("toolgate-secrets-"))
        .unwrap_or_else(|| panic!("{which}: no hashed toolgate-secrets"));
    let secret_name = text(&secret["metadata"]["name"]);
    let refs: Vec<&str> =
        container["envFrom"].as_sequence().unwrap().iter().map(|e| text(&e["secretRef"]["name"])).collect();
    assert_eq!(refs, [secret_name], "{which}: the pods read the Secret by its hashed name");
    let env: Vec<(String, String)> = secret["data"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let value = base64::engine::general_purpose::STANDARD.decode(text(v)).unwrap();
            (text(k).to_owned(), String::from_utf8(value).unwrap())
        })
        .collect();
    let validated = toolgate()
        .current_dir(files.path())
        .args(["validate", "--config", config_name])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(validated.status.success(), "{which}: {}", String::from_utf8_lossy(&validated.stderr));

    // The container's arguments start the real binary: the same arguments,
    // the configuration read from the files above, loopback ports.
    let mut local = std::fs::read_to_string(files.path().join(config_name))
        .unwrap()
        .replace(text(&config["health_listen"]), "127.0.0.1:0");
    for key in [&config["model_door"]["listen"], &config["metrics_listen"]] {
        if let Some(address) = key.as_str() {
            local = local.replace(address, "127.0.0.1:0");
        }
    }
    std::fs::write(files.path().join("local.yaml"), local).unwrap();
    let mut local_args = args.clone();
    let at = local_args.iter().position(|a| a == "--config").unwrap() + 1;
    local_args[at] = "local.yaml".into();
    let at = local_args.iter().position(|a| a == "--listen").unwrap() + 1;
    local_args[at] = "127.0.0.1:0".into();
    let mut child = Reaped::spawn(toolgate().current_dir(files.path()).args(&local_args).envs(env));
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let marker = "health (grpc.health.v1 only, plaintext) on ";
    let door_marker = "model door (OpenAI-compatible) on ";
    let (mut door_url, mut health) = (None, None);
    // Every door's line comes before the one scripts wait for.
    loop {
        let Some(Ok(line)) = lines.next() else { panic!("{which}: serve did not start with {local_args:?}") };
        if let Some(at) = line.find(door_marker) {
            door_url = Some(line[at + door_marker.len()..].trim().to_owned());
        }
        if let Some(at) = line.find(marker) {
            health = Some(line[at + marker.len()..].trim().to_owned());
        }
        if line.contains("toolgate listening on") {
            break;
        }
    }
    let health = health.unwrap_or_else(|| panic!("{which}: no health port"));
    // The readiness probe's request, as the kubelet sends it.
    if door.is_some() {
        let url = door_url.unwrap_or_else(|| panic!("{which}: the model door did not start"));
        let authority = url.trim_start_matches("http://").trim_end_matches("/v1");
        let mut stream = std::net::TcpStream::connect(authority).unwrap();
        std::io::Write::write_all(
            &mut stream,
            b"GET /health HTTP/1.1\r\nHost: 10.0.0.7:4000\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut stream, &mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{which}: {answer}");
    }
    let probed =
        toolgate().args(["health", "--addr", &health, "--service", toolgate::proto::SERVICE_NAME]).output().unwrap();
    assert!(probed.status.success(), "{which}: {}", String::from_utf8_lossy(&probed.stderr));
    (objects, files)
}

#[test]
fn the_base_renders_and_matches_the_binary() {
    check("base");
}

/// The Service `toolgate`'s port named `name`.
fn service_port<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    let service = object(objects, "Service", "toolgate");
    let ports = service["spec"]["ports"].as_sequence().unwrap();
    ports.iter().find(|p| p["name"].as_str() == Some(name)).unwrap_or_else(|| panic!("no Service port {name}"))
}

#[test]
fn the_model_door_overlay_serves_the_door_and_is_ready_on_its_health() {
    let (objects, _files) = check("overlays/model-door");
    assert_eq!(service_port(&objects, "metrics")["port"].as_u64(), Some(9464));
}

#[test]
fn the_redis_overlay_adds_redis_and_the_state_setting() {
    let (objects, files) = check("overlays/redis");
    let config: Value =
        serde_yaml::from_str(&std::fs::read_to_string(files.path().join("toolgate.yaml")).unwrap()).unwrap();
    let url = url::Url::parse(text(&config["state"]["redis"])).unwrap();
    let service = object(&objects, "Service", url.host_str().unwrap());
    assert_eq!(service["spec"]["ports"][0]["port"].as_u64(), url.port().map(u64::from));
    let redis = object(&objects, "Deployment", url.host_str().unwrap());
    let labels = &redis["spec"]["template"]["metadata"]["labels"];
    for (key, value) in service["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(&labels[key], value, "the Redis Service selects the Redis pod");
    }
}

/// The door-only compose file as compose runs it: the toolgate service's
/// command on its mounted configuration (a model server of the test's in
/// place of vLLM, loopback ports) starts, and its healthcheck passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_only_compose_service_starts_and_its_healthcheck_passes() {
    let upstream = crate::common::model_server::start().await;
    let compose: Value =
        serde_yaml::from_str(&std::fs::read_to_string(repo().join("deploy/compose.model-door.yaml")).unwrap()).unwrap();
    let service = &compose["services"]["toolgate"];
    let command: Vec<String> = service["command"].as_sequence().unwrap().iter().map(|a| text(a).to_owned()).collect();
    let (source, mounted) = text(&service["volumes"][0]).split_once(':').unwrap();
    let mounted = mounted.trim_end_matches(":ro");
    assert_eq!(flag(&command, "--config"), mounted, "serve reads the mounted file");
    let door = tempfile::tempdir().unwrap();
    let port = crate::common::backend::closed_port().port();
    let config = std::fs::read_to_string(repo().join("deploy").join(source))
        .unwrap()
        .replace("http://vllm:8000/v1", &upstream.base_url())
        .replace("0.0.0.0:4000", &format!("127.0.0.1:{port}"))
        .replace("0.0.0.0:9464", "127.0.0.1:0");
    std::fs::write(door.path().join("model-door.yaml"), config).unwrap();
    let ports: Vec<&str> = service["ports"].as_sequence().unwrap().iter().map(text).collect();
    assert!(ports.contains(&"127.0.0.1:4000:4000"), "{ports:?}");
    let args: Vec<String> =
        command.iter().map(|a| if a == mounted { "model-door.yaml".to_owned() } else { a.clone() }).collect();
    let mut child = Reaped::spawn(toolgate().current_dir(door.path()).args(&args));
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let Some(Ok(line)) = lines.next() else { panic!("serve did not start with {args:?}") };
        if line.contains("toolgate listening on") {
            assert!(line.contains("gRPC off"), "{line}");
            break;
        }
    }
    let check: Vec<String> = service["healthcheck"]["test"]
        .as_sequence()
        .unwrap()
        .iter()
        .skip(1)
        .map(|a| text(a).replace("4000", &port.to_string()))
        .collect();
    let probed = std::process::Command::new(&check[0]).args(&check[1..]).output().unwrap();
    assert!(probed.status.success(), "{}", String::from_utf8_lossy(&probed.stderr));
}
