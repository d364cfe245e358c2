//! A certificate authority made at test time and a server certificate it signed, for the
//! TLS suites: nothing to keep in the tree, nothing that expires.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};

/// A fresh CA and a certificate it signed for `localhost` and 127.0.0.1, as PEM (and the
/// CA as DER, for a client that takes roots that way).
pub struct TestPki {
    pub ca_pem: String,
    pub ca_der: Vec<u8>,
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestPki {
    /// New keys each time: two calls give two CAs that do not trust each other's
    /// certificates.
    pub fn generate() -> TestPki {
        TestPki::for_names(&["localhost", "127.0.0.1"])
    }

    /// The same with a server certificate for `names` (DNS names or IP addresses) only.
    pub fn for_names(names: &[&str]) -> TestPki {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Names of their own: with rcgen's one default name for both, OpenSSL (Python's
        // ssl) takes the server certificate, whose issuer is its own subject, for a
        // self-signed one and refuses it.
        ca_params.distinguished_name = common_name("Ferry test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = common_name("Ferry test server");
        let cert = params.signed_by(&key, &ca).unwrap();
        TestPki {
            ca_pem: ca.pem(),
            ca_der: ca.der().to_vec(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn common_name(name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn
}

/// A self-signed CA certificate (basicConstraints CA:TRUE) for `localhost` and 127.0.0.1
/// and its key, as PEM: the certificate a server must not present as its own, which
/// clients refuse even when they trust it as their CA.
pub fn ca_as_server_certificate() -> (String, String) {
    let mut params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}
