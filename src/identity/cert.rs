//! The names a client certificate identifies its holder by.

use x509_parser::{extensions::GeneralName, prelude::FromDer};

/// The subject's common names and the DNS and URI subject alternative names
/// of a DER certificate (empty if it cannot be parsed: the TLS handshake has
/// verified it against the client CA already).
pub(crate) fn names_of(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = x509_parser::certificate::X509Certificate::from_der(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> =
        cert.subject().iter_common_name().filter_map(|cn| cn.as_str().ok().map(str::to_owned)).collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => names.push((*dns).to_owned()),
                GeneralName::URI(uri) => names.push((*uri).to_owned()),
                _ => {}
            }
        }
    }
    names
}
