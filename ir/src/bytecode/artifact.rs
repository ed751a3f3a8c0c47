//! The `.apxmobj` container: header + postcard payload.
//!
//! ```text
//! offset size  field
//! 0      8     magic  "APXMOBJ\0"
//! 8      4     format version (u32 little endian)
//! 12     4     CRC-32 (IEEE) of the payload (u32 LE)
//! 16     8     payload length in bytes (u64 LE)
//! 24     n     payload: postcard encoding of `Program`
//! ```

use super::{validate, Program};
use crate::{Diagnostic, IntoDiagnostic, Span};

pub const MAGIC: [u8; 8] = *b"APXMOBJ\0";
/// Bumped on every incompatible change of `Program`.
pub const FORMAT_VERSION: u32 = 7;
pub const HEADER_LEN: usize = 24;
/// Refuse payloads above 1 GiB before touching them.
const MAX_PAYLOAD: u64 = 1 << 30;

/// Why an artifact was rejected. Every variant has a stable code (`code()`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LoadError {
    #[error("not an .apxmobj artifact: {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    TooShort { len: usize },
    #[error("not an .apxmobj artifact: bad magic number")]
    BadMagic,
    #[error("unsupported artifact format version {found} (this toolchain reads version {FORMAT_VERSION}); rebuild it with `aisc build`")]
    UnsupportedVersion { found: u32 },
    #[error("truncated artifact: the header announces {expected} payload bytes, {found} present")]
    Truncated { expected: u64, found: u64 },
    #[error("artifact has {extra} trailing bytes after the payload")]
    TrailingBytes { extra: u64 },
    #[error("artifact checksum mismatch (header {expected:08x}, payload {found:08x}): the file is corrupted")]
    Checksum { expected: u32, found: u32 },
    #[error("malformed artifact payload: {0}")]
    Malformed(String),
    #[error("{at}: {what} index {index} out of range (0..{len})")]
    IndexOutOfRange {
        at: String,
        what: &'static str,
        index: u64,
        len: u64,
    },
    #[error("{at}: ill-typed bytecode: {message}")]
    IllTyped { at: String, message: String },
    #[error("{at}: invalid bytecode: {message}")]
    Invalid { at: String, message: String },
}

impl LoadError {
    pub fn code(&self) -> &'static str {
        match self {
            LoadError::TooShort { .. } => "L0001",
            LoadError::BadMagic => "L0002",
            LoadError::UnsupportedVersion { .. } => "L0003",
            LoadError::Truncated { .. } => "L0004",
            LoadError::TrailingBytes { .. } => "L0005",
            LoadError::Checksum { .. } => "L0006",
            LoadError::Malformed(_) => "L0007",
            LoadError::IndexOutOfRange { .. } => "L0008",
            LoadError::IllTyped { .. } => "L0009",
            LoadError::Invalid { .. } => "L0010",
        }
    }
}

impl IntoDiagnostic for LoadError {
    fn into_diagnostic(self) -> Diagnostic {
        let help = match &self {
            LoadError::UnsupportedVersion { .. } | LoadError::Checksum { .. } => {
                Some("rebuild the artifact from its source with `aisc build -o`")
            }
            LoadError::IndexOutOfRange { .. }
            | LoadError::IllTyped { .. }
            | LoadError::Invalid { .. } => {
                Some("the artifact was not produced by this toolchain or was modified")
            }
            _ => None,
        };
        let d = Diagnostic::error(self.code(), self.to_string(), Span::DUMMY);
        match help {
            Some(h) => d.with_help(h),
            None => d,
        }
    }
}

/// Serialisation failed (only possible for programs too large to encode).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot encode the program: {0}")]
pub struct EncodeError(String);

/// Writes the artifact bytes for `program`.
pub fn encode(program: &Program) -> Result<Vec<u8>, EncodeError> {
    let payload = postcard::to_stdvec(program).map_err(|e| EncodeError(e.to_string()))?;
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// Reads and validates an artifact. Never panics, whatever the bytes.
pub fn decode(bytes: &[u8]) -> Result<Program, LoadError> {
    if bytes.len() < HEADER_LEN {
        if bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] != MAGIC {
            return Err(LoadError::BadMagic);
        }
        return Err(LoadError::TooShort { len: bytes.len() });
    }
    if bytes[..8] != MAGIC {
        return Err(LoadError::BadMagic);
    }
    let version = le_u32(&bytes[8..12]);
    if version != FORMAT_VERSION {
        return Err(LoadError::UnsupportedVersion { found: version });
    }
    let crc = le_u32(&bytes[12..16]);
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&bytes[16..24]);
    let len = u64::from_le_bytes(len8);
    let present = (bytes.len() - HEADER_LEN) as u64;
    if len > MAX_PAYLOAD || len > present {
        return Err(LoadError::Truncated {
            expected: len,
            found: present,
        });
    }
    if present > len {
        return Err(LoadError::TrailingBytes {
            extra: present - len,
        });
    }
    let payload = &bytes[HEADER_LEN..];
    let found = crc32fast::hash(payload);
    if found != crc {
        return Err(LoadError::Checksum {
            expected: crc,
            found,
        });
    }
    let (program, rest): (Program, &[u8]) =
        postcard::take_from_bytes(payload).map_err(|e| LoadError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(LoadError::Malformed(format!(
            "{} unused bytes after the program",
            rest.len()
        )));
    }
    validate(&program)?;
    Ok(program)
}
