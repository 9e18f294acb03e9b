//! A PG task's queue, in two lanes. Requests from outside (client ops,
//! listings, replica writes) go into a bounded lane: a full PG makes its
//! senders wait (back-pressure), it never drops one. Everything the PG
//! must see to stay correct (maps, write-set records, store and replica
//! completions, peer infos) goes into an unbounded control lane that the
//! task drains first: a busy PG can never lose a map update. The control
//! lane is bounded in practice by the map epochs and the PG's own
//! requests in flight.
//!
//! It must never drop a control input while the PG task lives.

use crate::msg::PeerReply;
use crate::pg::{Input, ListResult};
use loligo_types::ops::OpReply;
use tokio::sync::{mpsc, oneshot};

/// Requests queued per PG before senders wait.
pub const PG_REQUESTS_MAX: usize = 1024;

/// Where a request's answer goes.
pub(crate) enum Waiter {
    Op(oneshot::Sender<OpReply>),
    List(oneshot::Sender<ListResult>),
    Command(oneshot::Sender<crate::pg::CommandResult>),
    Peer(oneshot::Sender<PeerReply>),
}

/// One input for a PG task, with where its answer goes (requests only).
pub(crate) struct PgMsg {
    pub input: Input,
    pub reply: Option<Waiter>,
}

/// The sending side (cheap to clone).
#[derive(Clone)]
pub(crate) struct Mailbox {
    control: mpsc::UnboundedSender<Input>,
    requests: mpsc::Sender<PgMsg>,
}

/// The PG task's receiving side.
pub(crate) struct Inbox {
    control: mpsc::UnboundedReceiver<Input>,
    requests: mpsc::Receiver<PgMsg>,
}

/// A mailbox whose request lane holds `depth` requests.
pub(crate) fn mailbox(depth: usize) -> (Mailbox, Inbox) {
    let (ctx, crx) = mpsc::unbounded_channel();
    let (rtx, rrx) = mpsc::channel(depth.max(1));
    (
        Mailbox {
            control: ctx,
            requests: rtx,
        },
        Inbox {
            control: crx,
            requests: rrx,
        },
    )
}

impl Mailbox {
    /// Queue a control input; false only if the PG task has ended.
    pub fn control(&self, input: Input) -> bool {
        self.control.send(input).is_ok()
    }

    /// Queue a request, waiting while the PG's request lane is full;
    /// false if the PG task has ended.
    pub async fn request(&self, msg: PgMsg) -> bool {
        self.requests.send(msg).await.is_ok()
    }
}

impl Inbox {
    /// The next input, control inputs first; `None` once every sender is
    /// gone.
    pub async fn recv(&mut self) -> Option<PgMsg> {
        tokio::select! {
            biased;
            Some(input) = self.control.recv() => Some(PgMsg { input, reply: None }),
            m = self.requests.recv() => match m {
                Some(m) => Some(m),
                // No more requests: drain what control inputs remain.
                None => self.control.recv().await.map(|input| PgMsg { input, reply: None }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(i: u64) -> PgMsg {
        PgMsg {
            input: Input::Tick { now_ms: i },
            reply: None,
        }
    }

    fn map(epoch: u64) -> Input {
        Input::Map {
            epoch,
            up: vec![0, 1, 2],
            acting: vec![0, 1, 2],
            acting_up_from: 0,
            primary: 0,
            pool: loligo_types::OsdMap::new("f", "osd")
                .unwrap()
                .replicated_pool("p", 8, 3, 2),
            record: None,
            record_up: vec![],
            toofull: vec![],
            holds: Default::default(),
            spares: vec![],
            striper: None,
            primary_temp: None,
            unfound_lost: 0,
            now_ms: 0,
        }
    }

    #[tokio::test]
    async fn a_map_reaches_a_pg_whose_request_queue_is_full() {
        let (mb, mut inbox) = mailbox(4);
        for i in 0..4 {
            assert!(mb.request(op(i)).await);
        }
        // The request lane is full: one more request would wait...
        let more = tokio::time::timeout(std::time::Duration::from_millis(50), mb.request(op(9)));
        assert!(more.await.is_err(), "a full lane makes senders wait");
        // ...but maps still go in, and come out before the requests.
        assert!(mb.control(map(5)));
        assert!(mb.control(map(6)));
        let mut epochs = Vec::new();
        let mut ticks = Vec::new();
        while let Ok(Some(m)) =
            tokio::time::timeout(std::time::Duration::from_millis(50), inbox.recv()).await
        {
            match m.input {
                Input::Map { epoch, .. } => {
                    assert!(ticks.is_empty(), "maps are served first");
                    epochs.push(epoch)
                }
                Input::Tick { now_ms } => ticks.push(now_ms),
                _ => unreachable!(),
            }
        }
        assert_eq!(epochs, vec![5, 6], "no map dropped, in order");
        assert_eq!(ticks, vec![0, 1, 2, 3], "no request dropped");
    }

    #[tokio::test]
    async fn control_inputs_outlive_the_request_senders() {
        let (mb, mut inbox) = mailbox(1);
        mb.control(map(3));
        let Mailbox { control, requests } = mb;
        drop(requests);
        let _ = control.send(map(4));
        drop(control);
        let mut n = 0;
        while let Some(m) = inbox.recv().await {
            assert!(matches!(m.input, Input::Map { .. }));
            n += 1;
        }
        assert_eq!(n, 2);
    }
}
