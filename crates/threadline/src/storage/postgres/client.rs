//! A blocking PostgreSQL client over `tokio-postgres`, like the `postgres` crate's, with one thing
//! that one lacks: a pipeline. Statements whose results nobody waits for (a BEGIN, an append's
//! INSERT and UPDATE) are sent together with the next one whose result is needed, and their
//! answers are read in one round trip (`Pg` in db.rs decides what waits). An append costs two
//! round trips this way, not five.
//!
//! The connection is polled inline, on the caller's thread, while a call waits (as the
//! `postgres` crate does): no thread of its own, and nothing runs between calls.

use std::future::{self, Future};
use std::pin::{pin, Pin};
use std::task::Poll;

use futures_util::future::{join, join_all};
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::Runtime;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Config, Error, Row, Socket, Statement, ToStatement};

use super::error::mapped;
use crate::error::Result as StoreResult;

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The connection's messages (notices, notifications): read and dropped, so it moves on.
type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, Error>> + Send>>;

pub(crate) struct PgClient {
    runtime: Runtime,
    connection: Messages,
    client: tokio_postgres::Client,
}

impl PgClient {
    /// Opens a connection as `config` says, with `tls` when it asks for TLS.
    pub fn connect<T>(config: &Config, tls: T) -> StoreResult<PgClient>
    where
        T: MakeTlsConnect<Socket> + 'static + Send,
        T::TlsConnect: Send,
        T::Stream: Send + 'static,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::error::Error::StoreIo(format!("PostgreSQL: no runtime: {e}")))?;
        let (client, connection) = runtime.block_on(config.connect(tls)).map_err(mapped)?;
        Ok(PgClient {
            runtime,
            connection: Box::pin(messages(connection)),
            client,
        })
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement, Error> {
        let f = self.client.prepare(sql);
        drive(&self.runtime, &mut self.connection, f)
    }

    pub fn execute<T: ?Sized + ToStatement>(&mut self, q: &T, p: Params<'_>) -> Result<u64, Error> {
        let f = self.client.execute(q, p);
        drive(&self.runtime, &mut self.connection, f)
    }

    pub fn query<T: ?Sized + ToStatement>(
        &mut self,
        q: &T,
        p: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        let f = self.client.query(q, p);
        drive(&self.runtime, &mut self.connection, f)
    }

    pub fn query_one<T: ?Sized + ToStatement>(
        &mut self,
        q: &T,
        p: Params<'_>,
    ) -> Result<Row, Error> {
        let f = self.client.query_one(q, p);
        drive(&self.runtime, &mut self.connection, f)
    }

    pub fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        let f = self.client.batch_execute(sql);
        drive(&self.runtime, &mut self.connection, f)
    }

    /// Sends every statement of `first` and then `last`, in order, before reading any answer:
    /// one round trip. Returns `last`'s rows and the rows it changed; the first failure among
    /// them is the error (in a transaction a statement after a failed one fails too, so the
    /// first says why).
    pub fn pipeline(
        &mut self,
        first: &[(&Statement, Params<'_>)],
        last: (&Statement, Params<'_>),
    ) -> Result<(Vec<Row>, u64), Error> {
        let c = &self.client;
        let sent = async move {
            let ahead = join_all(first.iter().map(|(s, p)| c.execute(*s, p)));
            let answer = async {
                let stream = c.query_raw(last.0, last.1.iter().copied()).await?;
                let mut stream = pin!(stream);
                let mut rows = Vec::new();
                while let Some(row) = stream.next().await {
                    rows.push(row?);
                }
                let changed = stream.rows_affected().unwrap_or(rows.len() as u64);
                Ok((rows, changed))
            };
            let (ahead, answer) = join(ahead, answer).await;
            for r in ahead {
                r?;
            }
            answer
        };
        drive(&self.runtime, &mut self.connection, sent)
    }

    /// Whether the connection is gone (the server closed it, or it failed).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Ends the session with the server (a Terminate message) and waits for the connection to
    /// close.
    pub fn close(self) -> Result<(), Error> {
        let PgClient {
            runtime,
            mut connection,
            client,
        } = self;
        drop(client);
        runtime.block_on(future::poll_fn(|cx| loop {
            match connection.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }))
    }
}

/// Runs `future` to its end, polling the connection meanwhile. A connection that fails first
/// fails the call; one that ends fails it through the client (closed).
fn drive<T>(
    runtime: &Runtime,
    connection: &mut Messages,
    future: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let mut future = pin!(future);
    runtime.block_on(future::poll_fn(|cx| {
        loop {
            match connection.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        future.as_mut().poll(cx)
    }))
}

/// The connection as a stream of the messages it gives besides answers.
fn messages<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
) -> impl Stream<Item = Result<AsyncMessage, Error>> + Send + 'static
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    futures_util::stream::poll_fn(move |cx| connection.poll_message(cx))
}
