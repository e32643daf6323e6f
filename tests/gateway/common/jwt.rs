//! Signed tokens of the tests' identity provider: a signing key and its
//! public JWK.

/// A signing key of the tests' identity provider, and its public JWK.
pub struct Signer {
    key: jsonwebtoken::EncodingKey,
    algorithm: jsonwebtoken::Algorithm,
    kid: String,
    public: Vec<u8>,
}

impl Signer {
    pub fn new(algorithm: jsonwebtoken::Algorithm, kid: &str) -> Self {
        let (scheme, from_der): (&rcgen::SignatureAlgorithm, fn(&[u8]) -> jsonwebtoken::EncodingKey) = match algorithm {
            jsonwebtoken::Algorithm::ES256 => (&rcgen::PKCS_ECDSA_P256_SHA256, jsonwebtoken::EncodingKey::from_ec_der),
            _ => (&rcgen::PKCS_ED25519, jsonwebtoken::EncodingKey::from_ed_der),
        };
        let pair = rcgen::KeyPair::generate_for(scheme).unwrap();
        let public = pair.public_key_raw().to_vec();
        Self { key: from_der(&pair.serialize_der()), algorithm, kid: kid.to_owned(), public }
    }

    pub fn jwk(&self) -> serde_json::Value {
        let mut jwk = match self.algorithm {
            // jsonwebtoken makes no OKP JWK: the raw public key is its `x`.
            jsonwebtoken::Algorithm::EdDSA => {
                serde_json::json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "x": b64(&self.public)})
            }
            _ => serde_json::to_value(jsonwebtoken::jwk::Jwk::from_encoding_key(&self.key, self.algorithm).unwrap())
                .unwrap(),
        };
        jwk["kid"] = self.kid.clone().into();
        jwk
    }

    pub fn token(&self, claims: serde_json::Value) -> String {
        let mut header = jsonwebtoken::Header::new(self.algorithm);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap()
    }
}

pub fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
