//! A DoPut message's buffers checked against its body before the Arrow
//! IPC decoder sees it: the decoder slices each buffer out of the body
//! and panics (arrow-buffer's `slice_with_length`) when a header names
//! one past the end. A forged header ("2 GiB buffers") ended the call
//! with OK and nothing written; now it is `INVALID_ARGUMENT`.

use arrow_flight::FlightData;
use arrow_ipc::{root_as_message, MessageHeader};
use tonic::Status;

/// `Ok` when every buffer the message's header names lies in its body.
pub fn buffers_within_body(fd: &FlightData) -> Result<(), Status> {
    if fd.data_header.is_empty() {
        return Ok(());
    }
    let msg = root_as_message(&fd.data_header).map_err(|e| {
        Status::invalid_argument(format!("DoPut: an IPC message header does not parse: {e}"))
    })?;
    let batch = match msg.header_type() {
        MessageHeader::RecordBatch => msg.header_as_record_batch(),
        MessageHeader::DictionaryBatch => msg.header_as_dictionary_batch().and_then(|d| d.data()),
        _ => return Ok(()),
    };
    let Some(batch) = batch else {
        return Err(Status::invalid_argument(
            "DoPut: a record batch message without its header",
        ));
    };
    let body = fd.data_body.len() as u64;
    for (i, b) in batch.buffers().into_iter().flatten().enumerate() {
        let end = u64::try_from(b.offset())
            .ok()
            .zip(u64::try_from(b.length()).ok())
            .and_then(|(o, l)| o.checked_add(l));
        if end.is_none_or(|e| e > body) {
            return Err(Status::invalid_argument(format!(
                "DoPut: buffer {i} of a record batch (offset {}, length {}) runs past its {body}-byte body",
                b.offset(),
                b.length()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, RecordBatch};
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use futures::TryStreamExt;
    use std::sync::Arc;

    fn encoded() -> Vec<FlightData> {
        let b = RecordBatch::try_from_iter([(
            "x",
            Arc::new(Int64Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef,
        )])
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(
            FlightDataEncoderBuilder::new()
                .build(futures::stream::iter([Ok(b)]))
                .try_collect(),
        )
        .unwrap()
    }

    #[test]
    fn a_body_shorter_than_its_buffers_is_refused() {
        let msgs = encoded();
        for m in &msgs {
            buffers_within_body(m).unwrap();
        }
        let mut cut = msgs.last().unwrap().clone();
        cut.data_body = cut.data_body.slice(..8);
        let e = buffers_within_body(&cut).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("runs past"), "{e}");
    }
}
