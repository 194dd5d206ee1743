//! The `FlightService`: `ListFlights`, `GetFlightInfo` (one endpoint per
//! region holding data), `GetSchema`, `DoGet`, `DoPut`, `Handshake`, and
//! SQL (a `{"sql": …}` command, or Flight SQL's `CommandStatementQuery`).

use super::put::{rows_of, schema_of_batch};
use super::ticket::{key_to_hex, Request, Ticket, FLIGHT_TICKET_VERSION};
use crate::frontend::auth::{authorization_token, Access, Tokens};
use crate::frontend::stats::ServerStats;
use arrow_array::RecordBatch;
use arrow_flight::encode::{DictionaryHandling, FlightDataEncoderBuilder};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightEndpoint, FlightInfo,
    HandshakeRequest, HandshakeResponse, PollInfo, PutResult, SchemaAsIpc, SchemaResult,
};
use arrow_ipc::writer::IpcWriteOptions;
use arrow_schema::SchemaRef;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use telestore_engine::error::{Error, Result};
use telestore_engine::{Durability, Store, TableSchema};
use telestore_query::plan::Devices;
use telestore_query::{Kind, Params, Plan, Prepared};
use tonic::metadata::MetadataMap;
use tonic::{Request as Req, Response, Status, Streaming};

/// Record batches queued between a scan thread and its gRPC stream.
const BATCHES_AHEAD: usize = 4;

/// The Flight service of one daemon.
#[derive(Clone)]
pub struct Service {
    /// The store served.
    pub store: Arc<Store>,
    /// The daemon's counters (`/metrics`).
    pub stats: Arc<ServerStats>,
    /// The tokens a call must present (none: open).
    pub tokens: Tokens,
    /// Where clients reach this daemon (`grpc+tcp://host:port`), named in
    /// every endpoint; `None`: endpoints name no location ("this service").
    pub location: Option<String>,
    /// Where SQL runs, and the limits it runs under.
    pub queries: Arc<telestore_query::sql::QueryPool>,
    /// Options of a table DoPut creates from its first batch when the
    /// table does not exist (`None`: refused as unknown).
    pub auto_create: Option<telestore_engine::TableOptions>,
}

/// A store error as a gRPC status.
pub fn status_of(e: &Error) -> Status {
    crate::classes::grpc_status(e)
}

fn invalid(m: impl Into<String>) -> Status {
    Status::invalid_argument(m.into())
}

impl Service {
    /// Check the call's token (`authorization: Bearer|Basic …`).
    fn check(&self, md: &MetadataMap, need: Access) -> std::result::Result<(), Status> {
        if self.tokens.is_open() {
            return Ok(());
        }
        let token = md
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(authorization_token);
        match token.and_then(|t| self.tokens.check(&t)) {
            None => Err(Status::unauthenticated(
                "a token is needed: header `authorization: Bearer TOKEN`",
            )),
            Some(a) if a < need => Err(Status::permission_denied(
                "this token is read-only; writing needs a read-write token",
            )),
            Some(_) => Ok(()),
        }
    }

    /// The request a descriptor names.
    fn request_of(d: &FlightDescriptor) -> std::result::Result<Source, Status> {
        use arrow_flight::flight_descriptor::DescriptorType;
        match DescriptorType::try_from(d.r#type) {
            Ok(DescriptorType::Path) => Request::from_path(&d.path)
                .map(Source::Scan)
                .map_err(|e| status_of(&e)),
            Ok(DescriptorType::Cmd) => {
                if let Some(sql) = super::sql::statement_of(&d.cmd)? {
                    return Ok(Source::Sql(sql));
                }
                let r = Request::parse_cmd(&d.cmd).map_err(|e| status_of(&e))?;
                Ok(match r.sql.clone() {
                    Some(sql) => Source::Sql(sql),
                    None => Source::Scan(r),
                })
            }
            _ => Err(invalid("unknown descriptor type")),
        }
    }

    /// The plan of a read request over the whole table.
    fn plan_of(&self, r: &Request) -> Result<Plan> {
        if r.durability.is_some() {
            return Err(Error::invalid(
                "descriptor",
                "durability applies to DoPut only",
            ));
        }
        let p = Params {
            kind: Kind::Scan,
            table: r.table.clone(),
            devices: r.devices.clone(),
            where_: r.where_.clone(),
            from: r.from.clone(),
            to: r.to.clone(),
            fields: r.fields.clone(),
            ..Default::default()
        };
        Plan::resolve(&self.store, &p, self.store.now_ms())
    }

    /// FlightInfo of a scan: one endpoint per region that may hold rows.
    fn scan_info(&self, d: FlightDescriptor, r: &Request) -> Result<FlightInfo> {
        let plan = self.plan_of(r)?;
        let spans = match plan.inclusive_window() {
            None => Vec::new(),
            Some((from, to)) => {
                let ids = match &plan.devices {
                    Devices::All => None,
                    Devices::Some(ids) => Some(ids.as_slice()),
                };
                self.store.spans_with_data(&r.table, from, to, ids)?
            }
        };
        let fields: Vec<String> = plan
            .fields
            .iter()
            .map(|&i| plan.schema.fields[i].name.clone())
            .collect();
        let schema = Prepared::new(&self.store, plan.clone()).schema();
        let mut info = FlightInfo::new()
            .try_with_schema(&schema)
            .map_err(|e| Error::invalid("schema", e.to_string()))?
            .with_descriptor(d)
            .with_ordered(true);
        for span in spans {
            let t = Ticket::Scan(super::ticket::ScanTicket {
                v: FLIGHT_TICKET_VERSION,
                table: r.table.clone(),
                from: plan.from,
                to: plan.to,
                fields: fields.clone(),
                devices: r.devices.clone(),
                where_: r.where_.clone(),
                start: key_to_hex(&span.start),
                end: span.end.as_ref().map(key_to_hex),
            });
            info = info.with_endpoint(self.endpoint(t));
        }
        Ok(info)
    }

    fn endpoint(&self, t: Ticket) -> FlightEndpoint {
        let e = FlightEndpoint::new().with_ticket(arrow_flight::Ticket::new(t.to_bytes()));
        match &self.location {
            Some(l) => e.with_location(l.clone()),
            None => e,
        }
    }

    /// The plan and schema of a scan ticket.
    fn ticket_plan(&self, t: &super::ticket::ScanTicket) -> Result<Plan> {
        let span = t.span()?;
        let p = Params {
            kind: Kind::Scan,
            table: t.table.clone(),
            devices: t.devices.clone(),
            where_: t.where_.clone(),
            fields: Some(t.fields.join(",")),
            ..Default::default()
        };
        let mut plan = Plan::resolve(&self.store, &p, self.store.now_ms())?;
        plan.from = t.from;
        plan.to = t.to;
        plan.keys = span;
        Ok(plan)
    }

    /// Stream a prepared plan's batches from a blocking thread.
    fn stream_plan(
        &self,
        prepared: Prepared,
    ) -> BoxStream<'static, std::result::Result<FlightData, Status>> {
        let schema = prepared.schema();
        let (tx, rx) = tokio::sync::mpsc::channel::<std::result::Result<RecordBatch, FlightError>>(
            BATCHES_AHEAD,
        );
        let store = self.store.clone();
        let stats = self.stats.clone();
        tokio::task::spawn_blocking(move || {
            let res = prepared.run(&store, &mut |b| {
                stats
                    .flight_rows_sent
                    .fetch_add(b.num_rows() as u64, Relaxed);
                tx.blocking_send(Ok(b))
                    .map_err(|_| Error::invalid("flight", "the client went away"))
            });
            if let Err(e) = res {
                let _ = tx.blocking_send(Err(FlightError::Tonic(Box::new(status_of(&e)))));
            }
        });
        encode(
            schema,
            tokio_stream::wrappers::ReceiverStream::new(rx).boxed(),
        )
    }
}

/// What a descriptor asks for.
enum Source {
    Scan(Request),
    Sql(String),
}

/// Record batches as Flight data: the schema first, the device
/// dictionary once (it is one array for the whole result).
pub fn encode(
    schema: SchemaRef,
    batches: BoxStream<'static, std::result::Result<RecordBatch, FlightError>>,
) -> BoxStream<'static, std::result::Result<FlightData, Status>> {
    FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .with_dictionary_handling(DictionaryHandling::Resend)
        .build(batches)
        .map_err(Status::from)
        .boxed()
}

type Stream<T> = BoxStream<'static, std::result::Result<T, Status>>;

impl Service {
    /// Count a call, and its refusal.
    fn tally<T>(&self, r: std::result::Result<T, Status>) -> std::result::Result<T, Status> {
        self.stats.flight_calls.fetch_add(1, Relaxed);
        if r.is_err() {
            self.stats.flight_rejected.fetch_add(1, Relaxed);
        }
        r
    }

    /// Checks the token of the call's `authorization` header (Basic: the
    /// password is the token) and answers with it as a bearer token, which
    /// clients then send on every call.
    async fn handshake_call(
        &self,
        request: Req<Streaming<HandshakeRequest>>,
    ) -> std::result::Result<Response<Stream<HandshakeResponse>>, Status> {
        self.check(request.metadata(), Access::Read)?;
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(authorization_token)
            .unwrap_or_default();
        let reply = HandshakeResponse {
            protocol_version: 0,
            payload: token.clone().into(),
        };
        let mut resp = Response::new(futures::stream::iter([Ok(reply)]).boxed());
        if !token.is_empty() {
            let bearer = format!("Bearer {}", String::from_utf8_lossy(&token));
            if let Ok(v) = bearer.parse() {
                resp.metadata_mut().insert("authorization", v);
            }
        }
        Ok(resp)
    }

    /// One `FlightInfo` per table (its whole key space), endpoints included.
    async fn list_flights_call(
        &self,
        request: Req<Criteria>,
    ) -> std::result::Result<Response<Stream<FlightInfo>>, Status> {
        self.check(request.metadata(), Access::Read)?;
        let mut infos = Vec::new();
        for table in self.store.table_names() {
            let d = FlightDescriptor::new_path(vec![table.clone()]);
            let r = Request {
                table,
                ..Default::default()
            };
            infos.push(self.scan_info(d, &r).map_err(|e| status_of(&e)));
        }
        Ok(Response::new(futures::stream::iter(infos).boxed()))
    }

    async fn get_flight_info_call(
        &self,
        request: Req<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        self.check(request.metadata(), Access::Read)?;
        let d = request.into_inner();
        let info = match Self::request_of(&d)? {
            Source::Scan(r) => {
                let store = self.clone();
                tokio::task::spawn_blocking(move || store.scan_info(d, &r))
                    .await
                    .map_err(|e| Status::internal(e.to_string()))?
                    .map_err(|e| status_of(&e))?
            }
            Source::Sql(sql) => {
                let schema = super::sql::schema_of(&self.store, &self.queries, &sql).await?;
                let t = Ticket::Sql(super::ticket::SqlTicket {
                    v: FLIGHT_TICKET_VERSION,
                    sql,
                });
                FlightInfo::new()
                    .try_with_schema(&schema)
                    .map_err(|e| Status::internal(e.to_string()))?
                    .with_descriptor(d)
                    .with_endpoint(self.endpoint(t))
            }
        };
        Ok(Response::new(info))
    }

    async fn get_schema_call(
        &self,
        request: Req<FlightDescriptor>,
    ) -> std::result::Result<Response<SchemaResult>, Status> {
        self.check(request.metadata(), Access::Read)?;
        let d = request.into_inner();
        let schema = match Self::request_of(&d)? {
            Source::Scan(r) => {
                let plan = self.plan_of(&r).map_err(|e| status_of(&e))?;
                Prepared::new(&self.store, plan).schema()
            }
            Source::Sql(sql) => super::sql::schema_of(&self.store, &self.queries, &sql).await?,
        };
        let opts = IpcWriteOptions::default();
        let r: SchemaResult = SchemaAsIpc::new(&schema, &opts)
            .try_into()
            .map_err(|e: arrow_schema::ArrowError| Status::internal(e.to_string()))?;
        Ok(Response::new(r))
    }

    async fn do_get_call(
        &self,
        request: Req<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<Stream<FlightData>>, Status> {
        self.check(request.metadata(), Access::Read)?;
        let ticket = Ticket::parse(&request.into_inner().ticket).map_err(|e| status_of(&e))?;
        let stream = match ticket {
            Ticket::Scan(t) => {
                let plan = self.ticket_plan(&t).map_err(|e| status_of(&e))?;
                self.stream_plan(Prepared::new(&self.store, plan))
            }
            Ticket::Sql(t) => {
                let started = super::sql::execute(&self.store, &self.queries, &t.sql).await;
                let counter = match &started {
                    Ok(_) => &self.stats.sql_queries,
                    Err(_) => &self.stats.sql_failed,
                };
                counter.fetch_add(1, Relaxed);
                let (schema, batches) = started?;
                let stats = self.stats.clone();
                let counted = batches.inspect_ok(move |b| {
                    stats
                        .flight_rows_sent
                        .fetch_add(b.num_rows() as u64, Relaxed);
                });
                encode(schema, counted.boxed())
            }
        };
        Ok(Response::new(stream))
    }

    /// The table and durability a DoPut's descriptor names.
    fn put_target(d: &FlightDescriptor) -> std::result::Result<(String, Durability), Status> {
        let r = match Self::request_of(d)? {
            Source::Scan(r) => r,
            Source::Sql(_) => return Err(invalid("DoPut takes a table, not SQL")),
        };
        if r.from.is_some()
            || r.to.is_some()
            || r.fields.is_some()
            || r.devices.is_some()
            || r.where_.is_some()
        {
            return Err(invalid(
                "DoPut: a write descriptor names only table and durability",
            ));
        }
        let durability = Durability::parse(r.durability.as_deref().unwrap_or("sync"))
            .map_err(|e| status_of(&e))?;
        Ok((r.table, durability))
    }

    /// Each record batch is checked whole, then written (in writes of at
    /// most 16 MiB of rows) with the request's durability, `sync` by
    /// default; one `PutResult` per batch, sent once its rows are
    /// acknowledged, carries `{"rows": n}`. A refused batch ends the call
    /// with an error; the batches acknowledged before it stay written.
    /// A missing table is created by the first batch ([`put_rows`]).
    async fn do_put_call(
        &self,
        request: Req<Streaming<FlightData>>,
    ) -> std::result::Result<Response<Stream<PutResult>>, Status> {
        self.check(request.metadata(), Access::Write)?;
        let mut input = request.into_inner().peekable();
        let first = std::pin::Pin::new(&mut input)
            .peek()
            .await
            .ok_or_else(|| invalid("DoPut: the stream is empty"))?
            .as_ref()
            .map_err(|s| s.clone())?;
        let d = first
            .flight_descriptor
            .clone()
            .ok_or_else(|| invalid("DoPut: the first message carries no descriptor"))?;
        let (table, durability) = Self::put_target(&d)?;
        // A missing table is created from the first batch's columns.
        let known = match (self.store.schema(&table), &self.auto_create) {
            (Ok(s), _) => Some(s),
            (Err(Error::UnknownTable(_)), Some(_)) => None,
            (Err(e), _) => return Err(status_of(&e)),
        };
        let create = self.auto_create.clone();
        // Every message's buffers are checked against its body first: the
        // IPC decoder panics on a buffer past the body (a forged header).
        let checked = input.map(|m| match m {
            Ok(fd) => super::ipc_check::buffers_within_body(&fd)
                .map(|()| fd)
                .map_err(|e| FlightError::Tonic(Box::new(e))),
            Err(s) => Err(FlightError::from(s)),
        });
        let mut batches =
            arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(checked);
        let store = self.store.clone();
        let stats = self.stats.clone();
        let out = async_stream(move |tx| async move {
            let mut known = known;
            while let Some(b) = batches.next().await {
                let b = b.map_err(decode_status)?;
                let (store, schema) = (store.clone(), known.clone());
                let (table, create) = (table.clone(), create.clone());
                let n = b.num_rows();
                let schema = tokio::task::spawn_blocking(move || {
                    let (schema, rows) = put_rows(&store, &table, &b, schema, create)?;
                    store.write_rows(&schema.name, rows, durability)?;
                    Ok::<_, Error>(schema)
                })
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map_err(|e| status_of(&e))?;
                known = Some(schema);
                stats.flight_rows_written.fetch_add(n as u64, Relaxed);
                let meta = serde_json::json!({ "rows": n }).to_string();
                if tx
                    .send(Ok(PutResult {
                        app_metadata: meta.into(),
                    }))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            Ok(())
        });
        Ok(Response::new(out))
    }
}

/// A DoPut batch's rows and the schema they are for: `known`'s, or (the
/// table missing, `options` given) the schema the batch creates — created
/// only once the rows are known to be good; a table another writer
/// created meanwhile is taken as it is, the batch checked against it.
fn put_rows(
    store: &Store,
    table: &str,
    batch: &RecordBatch,
    known: Option<TableSchema>,
    options: Option<telestore_engine::TableOptions>,
) -> Result<(TableSchema, Vec<u8>)> {
    if let Some(s) = known {
        let rows = rows_of(store, &s, batch)?;
        return Ok((s, rows));
    }
    let options = options.ok_or_else(|| Error::UnknownTable(table.to_string()))?;
    let schema = schema_of_batch(table, batch, options)?;
    let rows = rows_of(store, &schema, batch)?;
    match store.create_table(schema.clone()) {
        Ok(_) => Ok((schema, rows)),
        Err(Error::SchemaConflict { .. }) => {
            let s = store.schema(table)?;
            let rows = rows_of(store, &s, batch)?;
            Ok((s, rows))
        }
        Err(e) => Err(e),
    }
}

#[tonic::async_trait]
impl FlightService for Service {
    type HandshakeStream = Stream<HandshakeResponse>;
    type ListFlightsStream = Stream<FlightInfo>;
    type DoGetStream = Stream<FlightData>;
    type DoPutStream = Stream<PutResult>;
    type DoActionStream = Stream<arrow_flight::Result>;
    type ListActionsStream = Stream<ActionType>;
    type DoExchangeStream = Stream<FlightData>;

    async fn handshake(
        &self,
        request: Req<Streaming<HandshakeRequest>>,
    ) -> std::result::Result<Response<Self::HandshakeStream>, Status> {
        let r = self.handshake_call(request).await;
        self.tally(r)
    }

    async fn list_flights(
        &self,
        request: Req<Criteria>,
    ) -> std::result::Result<Response<Self::ListFlightsStream>, Status> {
        let r = self.list_flights_call(request).await;
        self.tally(r)
    }

    async fn get_flight_info(
        &self,
        request: Req<FlightDescriptor>,
    ) -> std::result::Result<Response<FlightInfo>, Status> {
        let r = self.get_flight_info_call(request).await;
        self.tally(r)
    }

    async fn get_schema(
        &self,
        request: Req<FlightDescriptor>,
    ) -> std::result::Result<Response<SchemaResult>, Status> {
        let r = self.get_schema_call(request).await;
        self.tally(r)
    }

    async fn do_get(
        &self,
        request: Req<arrow_flight::Ticket>,
    ) -> std::result::Result<Response<Self::DoGetStream>, Status> {
        let r = self.do_get_call(request).await;
        self.tally(r)
    }

    async fn do_put(
        &self,
        request: Req<Streaming<FlightData>>,
    ) -> std::result::Result<Response<Self::DoPutStream>, Status> {
        let r = self.do_put_call(request).await;
        self.tally(r)
    }

    async fn poll_flight_info(
        &self,
        _request: Req<FlightDescriptor>,
    ) -> std::result::Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented(
            "PollFlightInfo: queries are planned at once; use GetFlightInfo",
        ))
    }

    async fn do_action(
        &self,
        _request: Req<Action>,
    ) -> std::result::Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("no actions"))
    }

    async fn list_actions(
        &self,
        _request: Req<Empty>,
    ) -> std::result::Result<Response<Self::ListActionsStream>, Status> {
        Ok(Response::new(futures::stream::empty().boxed()))
    }

    async fn do_exchange(
        &self,
        _request: Req<Streaming<FlightData>>,
    ) -> std::result::Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented("DoExchange is not offered"))
    }
}

/// A DoPut stream that does not decode: the client's fault
/// (`INVALID_ARGUMENT`), unless the transport failed.
fn decode_status(e: FlightError) -> Status {
    match e {
        FlightError::Tonic(s) => *s,
        e => invalid(format!(
            "DoPut: the stream does not decode as Arrow IPC: {e}"
        )),
    }
}

/// A stream fed by a task: `body` sends items; its error, if any, ends
/// the stream as the last item.
fn async_stream<T, F, Fut>(body: F) -> Stream<T>
where
    T: Send + 'static,
    F: FnOnce(tokio::sync::mpsc::Sender<std::result::Result<T, Status>>) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), Status>> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let fut = body(tx.clone());
    tokio::spawn(async move {
        if let Err(s) = fut.await {
            let _ = tx.send(Err(s)).await;
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx).boxed()
}
