//! An OSD's gRPC calls drawn from the same server-wide byte budget as its
//! direct-path calls ([`ServerBudget`]): a call's bytes are taken, from
//! the length its gRPC message header gives, before the body past the
//! header's frame is read, and given back when the call is answered.
//!
//! [`Budgeted`] wraps a generated gRPC service (`OsdServer`). While a call
//! waits for budget its body is not read, so HTTP/2 flow control stops its
//! sender once the stream's window is full: a connection's unread bytes
//! are bounded by its window, however large the message it announces.
//!
//! A unary call carries one message: data past it is refused, and so is
//! a message longer than [`MESSAGE_BYTES_MAX`], from its header. Calls
//! waiting for budget keep their unread bytes in the connection's HTTP/2
//! window, so a server using this must admit no more streams per
//! connection than its connection window holds stream windows
//! ([`STREAMS_PER_CONNECTION`]): else waiting calls could fill the window
//! that the calls holding budget need to finish.
//!
//! This module must never read a body past its first frames before the
//! budget is taken, and never hold a call's bytes after it is answered.

use crate::direct::{Call, Held, ServerBudget};
use crate::net::{Peer, MESSAGE_BYTES_MAX};
use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tonic::codegen::{http, Service, StdError};

/// Most concurrent streams a server of [`Budgeted`] calls admits per
/// connection: as many stream windows as its connection window holds.
pub const STREAMS_PER_CONNECTION: u32 = crate::net::CONNECTION_WINDOW / crate::net::STREAM_WINDOW;

/// The length of a gRPC message's header: a compression flag and the
/// message's length (big-endian `u32`).
const GRPC_HEADER: usize = 5;

/// A gRPC service whose `Op` and `Peer` calls take their bytes from a
/// [`ServerBudget`] first (other methods pass untouched).
#[derive(Clone)]
pub struct Budgeted<S> {
    inner: S,
    budget: ServerBudget,
}

impl<S> Budgeted<S> {
    /// `inner`, its calls drawing on `budget` (share one budget with the
    /// direct path's [`crate::direct::Limits::server`]).
    pub fn new(inner: S, budget: ServerBudget) -> Budgeted<S> {
        Budgeted { inner, budget }
    }
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Budgeted<S> {
    const NAME: &'static str = S::NAME;
}

/// Which budget a request's path draws on (`None`: none).
fn call_of(path: &str) -> Option<Call> {
    match path.rsplit('/').next() {
        Some("Op") => Some(Call::Op),
        Some("Peer") => Some(Call::Peer),
        _ => None,
    }
}

impl<S, B> Service<http::Request<B>> for Budgeted<S>
where
    S: Service<http::Request<CountedBody<B>>> + Send + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<StdError>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let held = Arc::new(Mutex::new(None));
        let ask = call_of(req.uri().path()).map(|call| Ask {
            budget: self.budget.clone(),
            call,
            entity: req
                .extensions()
                .get::<Peer>()
                .and_then(|p| p.entity.clone()),
        });
        let req = req.map(|b| CountedBody::new(b, ask, held.clone()));
        let answer = self.inner.call(req);
        Box::pin(async move {
            let r = answer.await;
            // Answered: the call's bytes go back.
            drop(held);
            r
        })
    }
}

/// What a call asks of the budget.
struct Ask {
    budget: ServerBudget,
    call: Call,
    entity: Option<String>,
}

/// Where a [`CountedBody`] is.
enum Stage {
    /// Reading frames until the message's header is whole.
    Head {
        ask: Ask,
        seen: [u8; GRPC_HEADER],
        len: usize,
    },
    /// Waiting for the budget (the frames read so far are queued).
    Taking(Pin<Box<dyn Future<Output = std::io::Result<Held>> + Send>>),
    /// Passing frames through.
    Open,
}

/// A request body that hands on nothing past the frames carrying its
/// message's header until that message's bytes are taken from the budget.
pub struct CountedBody<B> {
    inner: B,
    stage: Stage,
    /// Frames read but not yet handed on.
    queued: VecDeque<Frame<Bytes>>,
    /// Where the taken bytes wait until the call is answered.
    held: Arc<Mutex<Option<Held>>>,
    /// Bytes of data the budget paid for (the one message of a unary
    /// call, header included), once known, and the bytes read so far.
    paid: Option<u64>,
    read: u64,
}

impl<B> CountedBody<B> {
    fn new(inner: B, ask: Option<Ask>, held: Arc<Mutex<Option<Held>>>) -> CountedBody<B> {
        let stage = match ask {
            Some(ask) => Stage::Head {
                ask,
                seen: [0; GRPC_HEADER],
                len: 0,
            },
            None => Stage::Open,
        };
        CountedBody {
            inner,
            stage,
            queued: VecDeque::new(),
            held,
            paid: None,
            read: 0,
        }
    }
}

/// Why a [`CountedBody`] stopped.
fn refused(why: &str) -> StdError {
    Box::new(std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        why.to_string(),
    ))
}

impl<B> Body for CountedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<StdError>,
{
    type Data = Bytes;
    type Error = StdError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StdError>>> {
        let this = self.get_mut();
        loop {
            match &mut this.stage {
                Stage::Open => {
                    if let Some(f) = this.queued.pop_front() {
                        return Poll::Ready(Some(Ok(f)));
                    }
                    let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                        Poll::Ready(Some(Ok(f))) => f,
                        other => return other.map(|f| f.map(|r| r.map_err(Into::into))),
                    };
                    // A unary call carries one message: bytes past the one
                    // the budget paid for are refused, not read unpaid.
                    if let (Some(paid), Some(d)) = (this.paid, frame.data_ref()) {
                        this.read += d.len() as u64;
                        if this.read > paid {
                            return Poll::Ready(Some(Err(refused(
                                "a call sent more than the one message it announced",
                            ))));
                        }
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Stage::Taking(taking) => match taking.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(h)) => {
                        *this.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
                        this.stage = Stage::Open;
                    }
                    Poll::Ready(Err(e)) => {
                        this.stage = Stage::Open;
                        this.queued.clear();
                        return Poll::Ready(Some(Err(Box::new(e))));
                    }
                },
                Stage::Head { ask, seen, len } => {
                    let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(None) => {
                            // Ended before a whole header: tonic says so.
                            this.stage = Stage::Open;
                            continue;
                        }
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                        Poll::Ready(Some(Ok(f))) => f,
                    };
                    let Some(data) = frame.data_ref() else {
                        // Trailers before a message: nothing to take.
                        this.queued.push_back(frame);
                        this.stage = Stage::Open;
                        continue;
                    };
                    this.read += data.len() as u64;
                    let mut d = data.clone();
                    while *len < GRPC_HEADER && d.has_remaining() {
                        seen[*len] = d.get_u8();
                        *len += 1;
                    }
                    this.queued.push_back(frame);
                    if *len < GRPC_HEADER {
                        continue;
                    }
                    // A client's certificate never sends OSD messages: its
                    // call is refused before the body is read (as on the
                    // direct path).
                    let client = ask
                        .entity
                        .as_deref()
                        .is_some_and(|e| !crate::tls::is_daemon(e));
                    if client && ask.call == Call::Peer {
                        this.stage = Stage::Open;
                        this.queued.clear();
                        return Poll::Ready(Some(Err(refused("a client sent an OSD message"))));
                    }
                    let message = u32::from_be_bytes([seen[1], seen[2], seen[3], seen[4]]);
                    // Larger than any call may be: refused from its
                    // header, before it waits for (all of) the budget.
                    if message as usize > MESSAGE_BYTES_MAX {
                        this.stage = Stage::Open;
                        this.queued.clear();
                        return Poll::Ready(Some(Err(refused(&format!(
                            "a message of {message} bytes, over the {MESSAGE_BYTES_MAX} a call may carry"
                        )))));
                    }
                    let whole = (GRPC_HEADER + message as usize) as u64;
                    if this.read > whole {
                        this.stage = Stage::Open;
                        this.queued.clear();
                        return Poll::Ready(Some(Err(refused(
                            "a call sent more than the one message it announced",
                        ))));
                    }
                    this.paid = Some(whole);
                    let kib = (GRPC_HEADER + message as usize).div_ceil(1024);
                    let (budget, call, entity) = (ask.budget.clone(), ask.call, ask.entity.clone());
                    this.stage = Stage::Taking(Box::pin(async move {
                        budget.take(call, entity.as_deref(), kib).await
                    }));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.queued.is_empty() && matches!(self.stage, Stage::Open) && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::osd_client::OsdClient;
    use crate::v1::osd_server::{Osd, OsdServer};
    use crate::v1::Raw;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// Counts the calls inside and holds each until `open` is notified.
    struct Gate {
        inside: AtomicUsize,
        most: AtomicUsize,
        open: tokio::sync::Semaphore,
    }

    #[tonic::async_trait]
    impl Osd for Arc<Gate> {
        async fn op(
            &self,
            req: tonic::Request<Raw>,
        ) -> Result<tonic::Response<Raw>, tonic::Status> {
            let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            let _pass = self.open.acquire().await;
            self.inside.fetch_sub(1, Ordering::SeqCst);
            let n = req.into_inner().bulk.iter().map(Bytes::len).sum::<usize>();
            Ok(tonic::Response::new(Raw {
                body: Bytes::from(n.to_le_bytes().to_vec()),
                bulk: vec![],
            }))
        }

        async fn peer(
            &self,
            _: tonic::Request<Raw>,
        ) -> Result<tonic::Response<Raw>, tonic::Status> {
            Ok(tonic::Response::new(Raw::default()))
        }
    }

    /// A gRPC server of `gate` whose calls draw on `budget` (`None`: the
    /// service unwrapped).
    async fn server(gate: Arc<Gate>, budget: Option<ServerBudget>) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let svc = OsdServer::new(gate).max_decoding_message_size(64 << 20);
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(l);
        let router = match budget {
            Some(b) => crate::net::server().add_service(Budgeted::new(svc, b)),
            None => crate::net::server().add_service(svc),
        };
        tokio::spawn(router.serve_with_incoming(incoming));
        addr
    }

    /// Eight connections each sending a 600 KiB op against `budget`: the
    /// most calls inside the service at once, and the lengths answered.
    async fn eight_ops(budget: Option<ServerBudget>) -> (usize, Vec<usize>) {
        let gate = Arc::new(Gate {
            inside: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            open: tokio::sync::Semaphore::new(0),
        });
        let addr = server(gate.clone(), budget).await;
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let addr = addr.clone();
                tokio::spawn(async move {
                    let mut c = OsdClient::connect(format!("http://{addr}"))
                        .await
                        .unwrap()
                        .max_encoding_message_size(64 << 20);
                    let r = c
                        .op(Raw {
                            body: Bytes::from_static(b"x"),
                            bulk: vec![Bytes::from(vec![7u8; 600 << 10])],
                        })
                        .await
                        .unwrap()
                        .into_inner();
                    usize::from_le_bytes(r.body[..8].try_into().unwrap())
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let most = gate.most.load(Ordering::SeqCst);
        gate.open.add_permits(1 << 20);
        let mut lens = Vec::new();
        for c in calls {
            lens.push(
                tokio::time::timeout(Duration::from_secs(20), c)
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        (most, lens)
    }

    #[tokio::test]
    async fn grpc_calls_together_stay_within_the_servers_budget() {
        // Eight 600 KiB ops against a 1 MiB budget: one inside at a time,
        // and each served whole once the first are answered.
        let (most, lens) = eight_ops(Some(ServerBudget::new(1 << 20, 1 << 20))).await;
        assert_eq!(most, 1, "calls inside at once past the budget");
        assert!(lens.iter().all(|&n| n == 600 << 10), "{lens:?}");
        // Unwrapped, all eight are inside at once: the wrapper is what
        // holds them.
        let (most, _) = eight_ops(None).await;
        assert_eq!(most, 8);
    }

    /// A body of the given data frames.
    struct Frames(VecDeque<Bytes>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn grpc_header(len: u32) -> Vec<u8> {
        let mut v = vec![0];
        v.extend(len.to_be_bytes());
        v
    }

    /// Every frame of `frames` read through a counted body drawing on a
    /// 1 MiB budget: the bytes handed on, or the refusal.
    async fn read_all(frames: Vec<Vec<u8>>) -> Result<usize, String> {
        let ask = Ask {
            budget: ServerBudget::new(1 << 20, 1 << 20),
            call: Call::Op,
            entity: None,
        };
        let held = Arc::new(Mutex::new(None));
        let frames = Frames(frames.into_iter().map(Bytes::from).collect());
        let mut body = CountedBody::new(frames, Some(ask), held);
        let mut n = 0;
        while let Some(f) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            match f {
                Ok(f) => n += f.data_ref().map_or(0, Bytes::len),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(n)
    }

    #[tokio::test]
    async fn a_call_carries_one_message_of_at_most_the_message_limit() {
        // One message, its header split over two frames: all of it.
        let mut h = grpc_header(10);
        let rest = h.split_off(3);
        let msg = [rest, vec![7; 10]].concat();
        assert_eq!(read_all(vec![h, msg]).await, Ok(15));
        // A second message after the one announced: refused, in a later
        // frame or in the same one.
        let two = [grpc_header(0), grpc_header(1 << 20), vec![0; 64]];
        let e = read_all(two.to_vec()).await.unwrap_err();
        assert!(e.contains("more than the one message"), "{e}");
        let e = read_all(vec![two.concat()]).await.unwrap_err();
        assert!(e.contains("more than the one message"), "{e}");
        // A header announcing more than any call may carry: refused from
        // the header (it would otherwise wait for the whole budget).
        let e = read_all(vec![grpc_header(u32::MAX)]).await.unwrap_err();
        assert!(e.contains("over the"), "{e}");
    }

    #[test]
    fn only_op_and_peer_draw_on_the_budget() {
        assert_eq!(call_of("/loligo.v1.Osd/Op"), Some(Call::Op));
        assert_eq!(call_of("/loligo.v1.Osd/Peer"), Some(Call::Peer));
        assert_eq!(call_of("/grpc.health.v1.Health/Check"), None);
    }
}
