//! TLS for `rediss://` stores. The redis crate's rustls backend builds its client
//! configuration from rustls's process-wide default crypto provider, and there is none
//! until a program installs one: this is the one place that does (ring's), before any
//! store is opened.
//!
//! The server's certificate is always verified, against the system's trust store as
//! `rustls-native-certs` reads it. A private CA is trusted the standard way: point
//! `SSL_CERT_FILE` (a PEM bundle) or `SSL_CERT_DIR` at it in the daemon's and
//! `row-fence`'s environment. There is no switch that skips verification.

use std::sync::Once;

/// Installs ring as rustls's process-wide crypto provider, once; later calls do nothing.
/// Harmless when another provider was installed first (that one stays).
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
