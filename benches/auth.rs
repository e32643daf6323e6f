//! What identity costs on the Execute path, in process (the service's
//! handler, dispatch to the built-in `echo`): no principals; an API key
//! (the last of 10 principals); an API key whose principal has three
//! conditions over the call's arguments (`principals[].when`), all true; an
//! API key and a user token already verified (cached). And the first verification of a user token (RS256,
//! ES256, EdDSA), before it is cached.
//!
//! `cargo bench --bench auth`; numbers in docs/benchmarks.md.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The support modules are modules of this one binary.
#![allow(unreachable_pub)]

#[path = "support/catalogue.rs"]
mod catalogue;

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use tonic::Request;
use toolgate::{
    identity::{hash_key, JwtConfig, UserVerifier},
    proto::v1::{tool_gateway_service_server::ToolGatewayService, ExecuteRequest},
    telemetry::Observer,
};

const KEY: &str = "tg_bench_key_9";
/// The key of the principal with three conditions (the 11th).
const CONDITIONED: &str = "tg_bench_key_conditioned";

/// `principals:` of 10 principals (the bench's key is the last one's).
fn principals() -> String {
    let entries: Vec<String> = (0..10)
        .map(|i| {
            format!(
                "  - {{name: bot-{i}, api_key_sha256: {}, tools: [\"*\"]}}\n",
                hash_key(&format!("tg_bench_key_{i}"))
            )
        })
        .collect();
    format!("principals:\n{}", entries.concat())
}

/// A signing key, its JWKS file, and a verifier reading it.
struct Idp {
    key: EncodingKey,
    algorithm: Algorithm,
    _dir: tempfile::TempDir,
    config: JwtConfig,
}

impl Idp {
    fn new(algorithm: Algorithm) -> Self {
        use base64::Engine;
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let (key, jwk) = match algorithm {
            Algorithm::RS256 => {
                use rsa::pkcs1::EncodeRsaPrivateKey;
                let private = rsa::RsaPrivateKey::new(&mut rand::rngs::OsRng, 2048).unwrap();
                let key = EncodingKey::from_rsa_der(private.to_pkcs1_der().unwrap().as_bytes());
                let jwk =
                    serde_json::to_value(jsonwebtoken::jwk::Jwk::from_encoding_key(&key, algorithm).unwrap()).unwrap();
                (key, jwk)
            }
            Algorithm::ES256 => {
                let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
                let key = EncodingKey::from_ec_der(&pair.serialize_der());
                let jwk =
                    serde_json::to_value(jsonwebtoken::jwk::Jwk::from_encoding_key(&key, algorithm).unwrap()).unwrap();
                (key, jwk)
            }
            _ => {
                let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
                let jwk = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "x": b64(pair.public_key_raw())});
                (EncodingKey::from_ed_der(&pair.serialize_der()), jwk)
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwks.json");
        std::fs::write(&file, serde_json::json!({"keys": [jwk]}).to_string()).unwrap();
        let config = JwtConfig {
            issuer: "https://idp.bench/".into(),
            audience: "toolgate".into(),
            jwks_file: Some(file),
            jwks_url: None,
            header: None,
        };
        Self { key, algorithm, _dir: dir, config }
    }

    fn verifier(&self) -> Arc<UserVerifier> {
        Arc::new(UserVerifier::new(self.config.clone()).unwrap())
    }

    fn token(&self) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let claims =
            serde_json::json!({"sub": "alice", "iss": "https://idp.bench/", "aud": "toolgate", "exp": now + 3600});
        jsonwebtoken::encode(&Header::new(self.algorithm), &claims, &self.key).unwrap()
    }
}

fn execute_rpc(c: &mut Criterion) {
    let mut group = c.benchmark_group("execute_rpc_identity");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _entered = runtime.enter();
    let idp = Idp::new(Algorithm::ES256);
    let token = idp.token();
    let cases: [(&str, bool, bool, bool); 4] = [
        ("no_principals", false, false, false),
        ("api_key", true, false, false),
        ("api_key_three_conditions", true, false, true),
        ("api_key_and_cached_user_token", true, true, false),
    ];
    for (name, keyed, user, conditioned) in cases {
        let mut config = String::new();
        if keyed {
            config.push_str(&principals());
        }
        if conditioned {
            // Three conditions over the call, covering `echo` as every tool,
            // by name and by a toolset; all true.
            config.push_str(
                "  - name: conditioned\n    api_key_sha256: HASH\n    tools: [\"*\"]\n    when:\n      \
                 \"*\": {if: \"principal == 'conditioned'\", message: only this one}\n      \
                 echo: {if: \"args.n <= 100\", message: at most 100}\n      \
                 echoes: {if: \"args.message.size() < 1000\", message: shorter}\n",
            );
            config = config.replace("HASH", &hash_key(CONDITIONED));
        }
        if user {
            let jwks = idp.config.jwks_file.as_ref().unwrap().display();
            config.push_str(&format!(
                "users: {{jwt: {{issuer: \"https://idp.bench/\", audience: toolgate, jwks_file: \"{jwks}\"}}}}\n"
            ));
        }
        let more = "toolsets:\n  echoes: [echo]\n";
        let (app, _) = catalogue::start_with(&runtime, 0, "{type: object}", more, &config, Observer::disabled());
        let gateway = app.grpc();
        let token = token.clone();
        let request = move || {
            let message = ExecuteRequest {
                tool: "echo".into(),
                arguments_json: r#"{"message": "hello", "n": 42}"#.into(),
                ..Default::default()
            };
            let mut request = Request::new(message);
            if keyed {
                let key = if conditioned { CONDITIONED } else { KEY };
                request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
            }
            if user {
                request.metadata_mut().insert("x-toolgate-user-token", token.parse().unwrap());
            }
            request
        };
        let response = runtime.block_on(gateway.execute(request())).unwrap().into_inner();
        assert!(response.ok, "{response:?}");
        group.bench_function(name, |b| b.iter(|| runtime.block_on(gateway.execute(request())).unwrap()));
    }
    group.finish();
}

fn first_verification(c: &mut Criterion) {
    let mut group = c.benchmark_group("user_token_first_verification");
    for algorithm in [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA] {
        let idp = Idp::new(algorithm);
        let token = idp.token();
        idp.verifier().verify(&token).unwrap();
        group.bench_function(format!("{algorithm:?}"), |b| {
            b.iter_batched(|| idp.verifier(), |verifier| verifier.verify(&token).unwrap(), BatchSize::SmallInput)
        });
    }
    group.finish();
}

/// One Execute RPC of `echo` without a key, with a fresh key each time
/// (claimed, then the outcome stored), and with a key already answered (a
/// replay), on the memory store.
fn once_only(c: &mut Criterion) {
    let mut group = c.benchmark_group("execute_rpc_once");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _entered = runtime.enter();
    // Room for every fresh key the bench makes: a full store refuses new
    // records (it never drops live ones), which is another path.
    let config = "state: {max_records: 20000000}\n";
    let (app, _) = catalogue::start(&runtime, 0, "{type: object}", config, Observer::disabled());
    let gateway = app.grpc();
    let request = |key: String| {
        Request::new(ExecuteRequest {
            tool: "echo".into(),
            arguments_json: r#"{"message": "hello", "n": 42}"#.into(),
            idempotency_key: key,
            ..Default::default()
        })
    };
    group.bench_function("no_key", |b| b.iter(|| runtime.block_on(gateway.execute(request(String::new()))).unwrap()));
    let first = runtime.block_on(gateway.execute(request("replayed".into()))).unwrap().into_inner();
    assert!(first.ok && !first.replayed);
    group.bench_function("replayed_key", |b| {
        b.iter(|| {
            let response = runtime.block_on(gateway.execute(request("replayed".into()))).unwrap().into_inner();
            assert!(response.replayed);
        })
    });
    let mut n = 0u64;
    group.bench_function("fresh_key", |b| {
        b.iter(|| {
            n += 1;
            runtime.block_on(gateway.execute(request(format!("call_{n}")))).unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, execute_rpc, first_verification, once_only);
criterion_main!(benches);
