//! Certificates made in the tests (rcgen): a CA, and server and client
//! certificates it signs.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
pub struct Issued {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::CrlSign];
        Self { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A CA's own certificate served as a server's (for these names): what a
    /// verifier refuses as `CaUsedAsEndEntity`.
    pub fn self_signed_ca_for(alt_names: &[&str]) -> Issued {
        let mut params = CertificateParams::new(alt_names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "a CA serving as the collector");
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Issued { cert: cert.pem(), key: key.serialize_pem() }
    }

    /// A certificate for `common_name` with these subject alternative names.
    pub fn issue(&self, common_name: &str, alt_names: &[&str]) -> Issued {
        let mut params = CertificateParams::new(alt_names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued { cert: cert.pem(), key: key.serialize_pem() }
    }
}
