//! Field codecs shared by the content protocol and the rendezvous datagrams: a bounds-checked
//! reader and the length-prefixed token (docs/protocol.md §3).

use crate::{DecodeError, EncodeError, MAX_TOKEN_LEN};

/// Refuses a token that a peer's decoder would refuse.
pub(crate) fn check_token(token: &[u8]) -> Result<(), EncodeError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(EncodeError::TokenTooLong(token.len()));
    }
    Ok(())
}

/// One length byte, then the token.
pub(crate) fn put_token(out: &mut Vec<u8>, token: &[u8]) {
    out.push(token.len() as u8);
    out.extend_from_slice(token);
}

/// Reads fields front to back; every read checks the length first.
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    pub(crate) fn token(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::from(self.u8()?);
        if len > MAX_TOKEN_LEN {
            return Err(DecodeError::Malformed("token longer than 64 bytes"));
        }
        self.take(len)
    }
    /// The datagram must end here.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Malformed("trailing bytes"))
        }
    }
}
