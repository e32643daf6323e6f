//! The protobuf codec of the generated code, with one change: a request that
//! cannot be decoded (truncated, invalid UTF-8 in a string field) is the
//! caller's fault and answers INVALID_ARGUMENT, not prost's INTERNAL. This
//! status is made inside tonic's decoding, before any handler runs; every
//! other RPC error maps to its status in `service::status`.

use std::marker::PhantomData;

use tonic::{
    codec::{BufferSettings, Codec, DecodeBuf, Decoder},
    Code, Status,
};
use tonic_prost::ProstCodec;

/// Drop-in for `tonic_prost::ProstCodec` (set as the codec in `build.rs`).
#[derive(Debug, Clone)]
pub(crate) struct ProtoCodec<T, U> {
    inner: ProstCodec<T, U>,
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for ProtoCodec<T, U> {
    fn default() -> Self {
        Self { inner: ProstCodec::default(), _pd: PhantomData }
    }
}

impl<T, U> Codec for ProtoCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = MalformedIsInvalid<<ProstCodec<T, U> as Codec>::Decoder>;

    fn encoder(&mut self) -> Self::Encoder {
        self.inner.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        MalformedIsInvalid(self.inner.decoder())
    }
}

/// Maps a decode failure to INVALID_ARGUMENT.
#[derive(Debug)]
pub(crate) struct MalformedIsInvalid<D>(D);

impl<D: Decoder<Error = Status>> Decoder for MalformedIsInvalid<D> {
    type Item = D::Item;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        self.0.decode(buf).map_err(|status| match status.code() {
            Code::Internal => Status::invalid_argument(format!("malformed request: {}", status.message())),
            _ => status,
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
