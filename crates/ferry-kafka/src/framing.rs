//! Kafka's framing: every request and response is a 4-byte big-endian length and that many
//! bytes. A length that is negative or over the configured maximum is refused before
//! anything is allocated for it, so a hostile or confused peer cannot make the front end
//! reserve memory it did not send.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Why a connection's next frame could not be read; each ends the connection.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {len} is negative")]
    NegativeLength { len: i32 },
    #[error(
        "frame of {len} bytes is over the limit of {max} bytes (kafka.max_frame_bytes); \
         the client's requests are larger than this endpoint accepts"
    )]
    TooLarge { len: usize, max: usize },
    #[error("the connection closed in the middle of a frame")]
    Truncated,
    #[error("reading the frame: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the next frame's body; `None` when the peer closed the connection between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut filled = 0;
    while filled < prefix.len() {
        let n = reader.read(&mut prefix[filled..]).await?;
        if n == 0 {
            return if filled == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        filled += n;
    }
    let len = i32::from_be_bytes(prefix);
    let len = usize::try_from(len).map_err(|_| FrameError::NegativeLength { len })?;
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    let mut body = BytesMut::zeroed(len);
    reader.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    })?;
    Ok(Some(body.freeze()))
}

/// `body` behind its length prefix.
pub fn framed(body: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(4 + body.len());
    framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
    framed.extend_from_slice(body);
    framed
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(input: &[u8], max: usize) -> Result<Option<Bytes>, FrameError> {
        let mut reader = input;
        read_frame(&mut reader, max).await
    }

    #[tokio::test]
    async fn reads_a_frame_and_then_the_end() {
        let mut input = framed(b"abc");
        input.extend(framed(b""));
        let mut reader = &input[..];
        assert_eq!(
            read_frame(&mut reader, 16).await.unwrap().unwrap(),
            &b"abc"[..]
        );
        assert_eq!(
            read_frame(&mut reader, 16).await.unwrap().unwrap(),
            &b""[..]
        );
        assert!(read_frame(&mut reader, 16).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn refuses_oversized_negative_and_truncated_frames() {
        let big = framed(&[0u8; 17]);
        assert!(matches!(
            read(&big, 16).await,
            Err(FrameError::TooLarge { len: 17, max: 16 })
        ));
        assert!(matches!(
            read(&(-1i32).to_be_bytes(), 16).await,
            Err(FrameError::NegativeLength { len: -1 })
        ));
        assert!(matches!(
            read(&[0, 0], 16).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read(&[0, 0, 0, 5, 1, 2], 16).await,
            Err(FrameError::Truncated)
        ));
    }
}
