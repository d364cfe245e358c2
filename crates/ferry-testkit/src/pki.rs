//! A certificate authority made at test time and a server certificate it signed, for the
//! TLS suites: nothing to keep in the tree, nothing that expires.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

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
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        TestPki {
            ca_pem: ca.pem(),
            ca_der: ca.der().to_vec(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}
