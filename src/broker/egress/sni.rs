//! Reads the server name (SNI) of a TLS ClientHello from the first bytes a client sends into a
//! CONNECT tunnel, across TLS records. Pure: the caller reads until it is not `Incomplete`.

/// The most ClientHello bytes the proxy waits for (records included).
pub const MAX_HELLO: usize = 64 * 1024;

/// What the first bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// More bytes are needed.
    Incomplete,
    /// Not a TLS ClientHello (with why).
    NotTls(&'static str),
    /// A ClientHello, with its host name when it names one.
    Parsed(Option<String>),
}

/// Parses what has arrived so far.
pub fn client_hello(buf: &[u8]) -> Hello {
    // The handshake message may span records: join their payloads.
    let mut message = Vec::new();
    let mut at = 0;
    loop {
        if buf.len() < at + 5 {
            return Hello::Incomplete;
        }
        if buf[at] != 22 {
            return Hello::NotTls("the first bytes are not a TLS handshake record");
        }
        if buf[at + 1] != 3 {
            return Hello::NotTls("the record's version is not TLS");
        }
        let len = u16::from_be_bytes([buf[at + 3], buf[at + 4]]) as usize;
        if len == 0 {
            return Hello::NotTls("an empty handshake record");
        }
        if buf.len() < at + 5 + len {
            return Hello::Incomplete;
        }
        message.extend_from_slice(&buf[at + 5..at + 5 + len]);
        at += 5 + len;
        if message.len() >= 4 {
            if message[0] != 1 {
                return Hello::NotTls("the first handshake message is not a ClientHello");
            }
            let body = u32::from_be_bytes([0, message[1], message[2], message[3]]) as usize;
            if body + 4 > MAX_HELLO {
                return Hello::NotTls("the ClientHello is too large");
            }
            if message.len() >= body + 4 {
                return match server_name(&message[4..body + 4]) {
                    Some(sni) => Hello::Parsed(sni),
                    None => Hello::NotTls("the ClientHello is malformed"),
                };
            }
        }
    }
}

/// A cursor over a byte slice; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The host name of a ClientHello body: `Some(None)` when it has none, `None` when malformed
/// (including a repeated server_name extension or more than one host name).
fn server_name(body: &[u8]) -> Option<Option<String>> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // version, random
    r.vec8()?; // session id
    r.vec16()?; // cipher suites
    r.vec8()?; // compression methods
    if r.0.is_empty() {
        return Some(None); // no extensions
    }
    let mut ext = Reader(r.vec16()?);
    let mut found: Option<String> = None;
    let mut seen = false;
    while !ext.0.is_empty() {
        let kind = ext.u16()?;
        let data = ext.vec16()?;
        if kind != 0 {
            continue;
        }
        if seen {
            return None;
        }
        seen = true;
        let mut list = Reader(Reader(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 {
                if found.is_some() {
                    return None;
                }
                found = Some(String::from_utf8(name.to_vec()).ok()?);
            }
        }
    }
    Some(found)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ClientHello made by rustls itself (a real client's bytes), for `name`.
    pub(crate) fn rustls_hello(name: &str) -> Vec<u8> {
        use std::sync::Arc;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let server = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
        let mut conn = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        conn.write_tls(&mut out).unwrap();
        out
    }

    #[test]
    fn a_real_client_hello_names_its_server() {
        let hello = rustls_hello("registry.example.test");
        assert_eq!(
            client_hello(&hello),
            Hello::Parsed(Some("registry.example.test".into()))
        );
        // Every prefix is incomplete, never a wrong answer.
        for cut in [0, 1, 4, 5, 40, hello.len() - 1] {
            assert_eq!(client_hello(&hello[..cut]), Hello::Incomplete, "{cut}");
        }
    }

    #[test]
    fn an_address_gets_no_server_name() {
        let hello = rustls_hello("127.0.0.1");
        assert_eq!(client_hello(&hello), Hello::Parsed(None));
    }

    #[test]
    fn a_hello_split_over_two_records_is_joined() {
        let hello = rustls_hello("split.example.test");
        let payload = &hello[5..];
        let (a, b) = payload.split_at(50);
        let mut two = Vec::new();
        for part in [a, b] {
            two.extend_from_slice(&[22, 3, 1]);
            two.extend_from_slice(&(part.len() as u16).to_be_bytes());
            two.extend_from_slice(part);
        }
        assert_eq!(
            client_hello(&two),
            Hello::Parsed(Some("split.example.test".into()))
        );
        assert_eq!(client_hello(&two[..60]), Hello::Incomplete);
    }

    #[test]
    fn other_bytes_are_not_tls() {
        assert!(matches!(
            client_hello(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Hello::NotTls(_)
        ));
        // An alert record, a handshake of another kind, a truncated body.
        assert!(matches!(
            client_hello(&[21, 3, 3, 0, 2, 2, 40]),
            Hello::NotTls(_)
        ));
        assert!(matches!(
            client_hello(&[22, 3, 3, 0, 4, 2, 0, 0, 0]),
            Hello::NotTls(_)
        ));
        assert!(matches!(
            client_hello(&[22, 3, 3, 0, 6, 1, 0, 0, 2, 3, 3]),
            Hello::NotTls("the ClientHello is malformed")
        ));
    }

    #[test]
    fn a_second_server_name_extension_is_malformed() {
        let hello = rustls_hello("one.example.test");
        // Append a second server_name extension and fix up the three lengths.
        let ext: Vec<u8> = {
            let name = b"two.example.test";
            let mut list = vec![0u8];
            list.extend_from_slice(&(name.len() as u16).to_be_bytes());
            list.extend_from_slice(name);
            let mut data = (list.len() as u16).to_be_bytes().to_vec();
            data.extend_from_slice(&list);
            let mut e = vec![0, 0];
            e.extend_from_slice(&(data.len() as u16).to_be_bytes());
            e.extend_from_slice(&data);
            e
        };
        let mut msg = hello[5..].to_vec();
        msg.extend_from_slice(&ext);
        let body = msg.len() - 4;
        msg[1..4].copy_from_slice(&(body as u32).to_be_bytes()[1..]);
        // The extensions block's length sits at the end of the fixed part.
        let mut r = Reader(&msg[4..]);
        r.take(34).unwrap();
        r.vec8().unwrap();
        r.vec16().unwrap();
        r.vec8().unwrap();
        let at = msg.len() - r.0.len();
        let old = u16::from_be_bytes([msg[at], msg[at + 1]]) as usize;
        msg[at..at + 2].copy_from_slice(&((old + ext.len()) as u16).to_be_bytes());
        let mut rec = vec![22, 3, 1];
        rec.extend_from_slice(&(msg.len() as u16).to_be_bytes());
        rec.extend_from_slice(&msg);
        assert_eq!(
            client_hello(&rec),
            Hello::NotTls("the ClientHello is malformed")
        );
    }
}
