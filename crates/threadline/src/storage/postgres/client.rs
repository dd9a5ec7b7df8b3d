//! A blocking PostgreSQL client over `tokio-postgres`, like the `postgres` crate's, with one thing
//! that one lacks: a pipeline. Statements whose results nobody waits for (a BEGIN, an append's
//! INSERT and UPDATE) are sent together with the next one whose result is needed, and their
//! answers are read in one round trip (`Pg` in db.rs decides what waits). An append costs two
//! round trips this way, not five.
//!
//! The connection is polled inline, on the caller's thread, while a call waits (as the
//! `postgres` crate does): no thread of its own, and nothing runs between calls.
//!
//! Every wait is bounded: the connection (TCP, TLS, startup and authentication together) by the
//! config's `connect_timeout`, each call by `wait`. A server that stops answering (frozen,
//! partitioned, overloaded) makes the call fail once its time is up, and the connection is
//! closed then: its protocol state is unknown, so nothing is ever waited on it again (`Pg` in
//! db.rs makes a new one at the next call).

use std::future::{self, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;

use futures_util::future::{join, join_all};
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::Runtime;
use tokio_postgres::config::Host;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Config, Error, Row, Socket, Statement, ToStatement};

use super::error::mapped;
use crate::error::Result as StoreResult;

/// How long a connection and a call wait when nothing says (the tests' own clients).
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// A call's failure: the server's or the connection's error, or no answer in time.
#[derive(Debug)]
pub(crate) enum PgError {
    Pg(Error),
    /// No answer within `after` to what `what` names; the connection was closed.
    TimedOut {
        what: String,
        after: Duration,
    },
}

impl From<Error> for PgError {
    fn from(e: Error) -> Self {
        PgError::Pg(e)
    }
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PgError::Pg(e) => e.fmt(f),
            PgError::TimedOut { what, after } => write!(
                f,
                "no answer from the server within {} ms to {what}",
                after.as_millis()
            ),
        }
    }
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The connection's messages (notices, notifications): read and dropped, so it moves on.
type Messages = Pin<Box<dyn Stream<Item = Result<AsyncMessage, Error>> + Send>>;

pub(crate) struct PgClient {
    runtime: Runtime,
    connection: Messages,
    client: tokio_postgres::Client,
    /// how long a call waits for the server's answer
    wait: Duration,
    /// whether the server ended the session (a FATAL error: an administrator's or a shutdown's
    /// termination, a crash), which the client may not have seen close yet
    ended: bool,
}

impl PgClient {
    /// Opens a connection as `config` says, with `tls` when it asks for TLS, within the
    /// config's `connect_timeout` (the whole of it: name lookup, TCP, TLS, startup and
    /// authentication; STORE_BUSY when it runs out).
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
        let deadline = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(DEFAULT_WAIT);
        // tokio-postgres bounds only the TCP connection with it: the bound here is the whole,
        // and it must be the one that runs out.
        let mut inner = config.clone();
        inner.connect_timeout(deadline + Duration::from_secs(1));
        let connected =
            runtime.block_on(async { tokio::time::timeout(deadline, inner.connect(tls)).await });
        let (client, connection) = match connected {
            Ok(Ok(c)) => c,
            failed => {
                // A name lookup still running on the runtime's blocking pool is not waited for.
                runtime.shutdown_background();
                return Err(match failed {
                    Ok(Err(e)) => mapped(e),
                    _ => crate::error::Error::StoreBusy(format!(
                        "PostgreSQL: no answer from {} within {} ms while connecting (TCP, TLS handshake, startup and authentication)",
                        server(config),
                        deadline.as_millis()
                    )),
                });
            }
        };
        Ok(PgClient {
            runtime,
            connection: Box::pin(messages(connection)),
            client,
            wait: deadline,
            ended: false,
        })
    }

    /// How long each call waits for the server's answer from now on.
    pub fn set_wait(&mut self, wait: Duration) {
        self.wait = wait;
    }

    pub fn wait(&self) -> Duration {
        self.wait
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement, PgError> {
        let f = self.client.prepare(sql);
        let r = drive(
            &self.runtime,
            &mut self.connection,
            self.wait,
            &|| shown(sql),
            f,
        );
        note_end(&mut self.ended, r)
    }

    pub fn execute<T: ?Sized + ToStatement>(
        &mut self,
        q: &T,
        p: Params<'_>,
    ) -> Result<u64, PgError> {
        let f = self.client.execute(q, p);
        let r = drive(
            &self.runtime,
            &mut self.connection,
            self.wait,
            &a_statement,
            f,
        );
        note_end(&mut self.ended, r)
    }

    pub fn query<T: ?Sized + ToStatement>(
        &mut self,
        q: &T,
        p: Params<'_>,
    ) -> Result<Vec<Row>, PgError> {
        let f = self.client.query(q, p);
        let r = drive(
            &self.runtime,
            &mut self.connection,
            self.wait,
            &a_statement,
            f,
        );
        note_end(&mut self.ended, r)
    }

    pub fn query_one<T: ?Sized + ToStatement>(
        &mut self,
        q: &T,
        p: Params<'_>,
    ) -> Result<Row, PgError> {
        let f = self.client.query_one(q, p);
        let r = drive(
            &self.runtime,
            &mut self.connection,
            self.wait,
            &a_statement,
            f,
        );
        note_end(&mut self.ended, r)
    }

    pub fn batch_execute(&mut self, sql: &str) -> Result<(), PgError> {
        let f = self.client.batch_execute(sql);
        let r = drive(
            &self.runtime,
            &mut self.connection,
            self.wait,
            &|| shown(sql),
            f,
        );
        note_end(&mut self.ended, r)
    }

    /// Sends every statement of `first` and then `last`, in order, before reading any answer:
    /// one round trip. Returns `last`'s rows and the rows it changed; the first failure among
    /// them is the error (in a transaction a statement after a failed one fails too, so the
    /// first says why).
    /// `what` names `last` in a message saying it got no answer.
    pub fn pipeline(
        &mut self,
        first: &[(&Statement, Params<'_>)],
        last: (&Statement, Params<'_>),
        what: &str,
    ) -> Result<(Vec<Row>, u64), PgError> {
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
        let r = drive(
            &self.runtime,
            &mut self.connection,
            self.wait,
            &|| shown(what),
            sent,
        );
        note_end(&mut self.ended, r)
    }

    /// Waits for the connection's next notifications (`LISTEN`), on this thread, until one comes
    /// (then the ones already arrived with it) or `cancel` is notified (then none). A connection
    /// that fails or ends is an error: the caller makes a new one. No bound on the wait: keepalive
    /// finds a server that went away (`connect` sets it).
    pub fn notifications(
        &mut self,
        cancel: &Cancel,
    ) -> Result<Vec<tokio_postgres::Notification>, PgError> {
        let connection = &mut self.connection;
        self.runtime.block_on(future::poll_fn(|cx| {
            let mut got = Vec::new();
            loop {
                match connection.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(AsyncMessage::Notification(n)))) => got.push(n),
                    Poll::Ready(Some(Ok(_))) => continue,
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(PgError::Pg(e))),
                    Poll::Ready(None) => {
                        return Poll::Ready(Err(PgError::TimedOut {
                            what: "notifications (the connection ended)".to_string(),
                            after: Duration::ZERO,
                        }))
                    }
                    Poll::Pending => break,
                }
            }
            if !got.is_empty() {
                return Poll::Ready(Ok(got));
            }
            if cancel.poll(cx) {
                Poll::Ready(Ok(Vec::new()))
            } else {
                Poll::Pending
            }
        }))
    }

    /// Reads what the server sent while nobody was waiting (without waiting for more): a
    /// session it ended while the connection was idle (an administrator's termination, a
    /// shutdown, a failover) is then known closed before anything is sent on it.
    pub fn check(&mut self) {
        if self.is_closed() {
            return;
        }
        let connection = &mut self.connection;
        let ended = &mut self.ended;
        self.runtime.block_on(async {
            // Twice, a turn of the runtime's I/O driver between: what arrived since the last
            // call is seen by the second poll.
            for turn in 0..2 {
                let pending = future::poll_fn(|cx| loop {
                    match connection.as_mut().poll_next(cx) {
                        Poll::Ready(Some(Ok(_))) => continue,
                        Poll::Ready(Some(Err(_))) | Poll::Ready(None) => {
                            *ended = true;
                            return Poll::Ready(false);
                        }
                        Poll::Pending => return Poll::Ready(true),
                    }
                })
                .await;
                if !pending {
                    return;
                }
                if turn == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
    }

    /// Whether the connection is gone (the server closed it or ended the session, or it
    /// failed).
    pub fn is_closed(&self) -> bool {
        self.ended || self.client.is_closed()
    }

    /// Ends the session with the server (a Terminate message) and waits for the connection to
    /// close, at most `wait`: a server that does not answer is left (the socket closed).
    pub fn close(self) -> Result<(), Error> {
        let PgClient {
            runtime,
            mut connection,
            client,
            wait,
            ..
        } = self;
        drop(client);
        let closed = runtime.block_on(async {
            tokio::time::timeout(
                wait,
                future::poll_fn(|cx| loop {
                    match connection.as_mut().poll_next(cx) {
                        Poll::Ready(Some(Ok(_))) => continue,
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                        Poll::Ready(None) => return Poll::Ready(Ok(())),
                        Poll::Pending => return Poll::Pending,
                    }
                }),
            )
            .await
        });
        closed.unwrap_or(Ok(()))
    }
}

/// Makes a new connection to the store's server, set up as the first one was (shared with the
/// live watch's listeners, `listen.rs`).
pub(crate) type Reconnect = std::sync::Arc<dyn Fn() -> StoreResult<PgClient> + Send + Sync>;

/// A flag another thread sets to end a wait (`notifications`) at once.
#[derive(Default)]
pub(crate) struct Cancel {
    set: std::sync::atomic::AtomicBool,
    waker: std::sync::Mutex<Option<std::task::Waker>>,
    pause: std::sync::Condvar,
}

impl Cancel {
    pub fn cancel(&self) {
        self.set.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut waker = self.waker.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = waker.take() {
            w.wake();
        }
        self.pause.notify_all();
    }

    /// Sleeps for `d`, or until `cancel`.
    pub fn sleep(&self, d: Duration) {
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.pause.wait_timeout_while(waker, d, |_| !self.is_set());
    }

    pub fn is_set(&self) -> bool {
        self.set.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether it is set; if not, `cx` is woken when it is. The waker is stored before the
    /// flag is read again, so a `cancel` in between is not missed.
    fn poll(&self, cx: &mut std::task::Context<'_>) -> bool {
        if self.is_set() {
            return true;
        }
        *self.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        self.is_set()
    }
}

/// Where `config` connects, for messages (never its user or password).
pub(crate) fn server(config: &Config) -> String {
    let port = config.get_ports().first().copied().unwrap_or(5432);
    match (config.get_hostaddrs().first(), config.get_hosts().first()) {
        (Some(addr), _) => format!("{addr} port {port}"),
        (None, Some(Host::Tcp(h))) => format!("{h} port {port}"),
        #[cfg(unix)]
        (None, Some(Host::Unix(dir))) => format!("the socket in {} port {port}", dir.display()),
        (None, None) => "the server".to_string(),
    }
}

/// A statement as a message names it: its first words (its parameters are never in it).
fn shown(sql: &str) -> String {
    let words = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match words.char_indices().nth(60) {
        Some((cut, _)) => format!("`{} ...`", &words[..cut]),
        None => format!("`{words}`"),
    }
}

/// Notes in `ended` a call's error that ends the session: the server's FATAL or PANIC (its
/// termination by an administrator, a shutdown or a crash: the server closes the connection
/// after it, whether or not the client has read that yet).
fn note_end<T>(ended: &mut bool, r: Result<T, PgError>) -> Result<T, PgError> {
    if let Err(PgError::Pg(e)) = &r {
        use tokio_postgres::error::Severity;
        let fatal = e.as_db_error().is_some_and(|d| {
            matches!(d.parsed_severity(), Some(Severity::Fatal | Severity::Panic))
        });
        if fatal || e.is_closed() {
            *ended = true;
        }
    }
    r
}

fn a_statement() -> String {
    "a statement".to_string()
}

/// Runs `future` to its end, polling the connection meanwhile, for at most `wait`. A
/// connection that fails first fails the call; one that ends fails it through the client
/// (closed). When `wait` runs out the connection is closed (dropped): the client is closed
/// from then on, and `what` says what got no answer.
fn drive<T>(
    runtime: &Runtime,
    connection: &mut Messages,
    wait: Duration,
    what: &dyn Fn() -> String,
    future: impl Future<Output = Result<T, Error>>,
) -> Result<T, PgError> {
    let mut future = pin!(future);
    let polled = runtime.block_on(async {
        tokio::time::timeout(
            wait,
            future::poll_fn(|cx| {
                loop {
                    match connection.as_mut().poll_next(cx) {
                        Poll::Ready(Some(Ok(_))) => continue,
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                        Poll::Ready(None) | Poll::Pending => break,
                    }
                }
                future.as_mut().poll(cx)
            }),
        )
        .await
    });
    match polled {
        Ok(r) => r.map_err(PgError::Pg),
        Err(_) => {
            *connection = Box::pin(futures_util::stream::empty());
            Err(PgError::TimedOut {
                what: what(),
                after: wait,
            })
        }
    }
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
