//! The behavioural suite against `MemStore`, plus what is specific to it.

mod suite;
use loligo_store::*;

store_suite!(MemStore::new());

#[test]
fn capacity_is_enforced_and_nothing_is_lost() {
    let s = MemStore::with_limits(Limits::default(), 10_000);
    let c = suite::c1();
    let mut t = Transaction::new();
    t.create_collection(c)
        .write_full(c, &suite::oid(1, "a"), vec![1; 6000]);
    s.apply(t).unwrap();
    let mut t = Transaction::new();
    t.write_full(c, &suite::oid(2, "b"), vec![2; 6000]);
    assert!(matches!(s.apply(t), Err(StoreError::NoSpace { .. })));
    assert!(!s.exists(c, &suite::oid(2, "b")).unwrap());
    let mut t = Transaction::new();
    t.remove(c, &suite::oid(1, "a"))
        .write_full(c, &suite::oid(2, "b"), vec![2; 6000]);
    s.apply(t).unwrap();
    assert_eq!(s.statfs().unwrap().used, 6000);
}

#[test]
fn commit_is_a_future_too() {
    let s = MemStore::new();
    let mut t = Transaction::new();
    t.create_collection(suite::c1());
    let c = s.queue_transaction(t);
    // Poll it by hand with a no-op waker: already complete.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut c = std::pin::pin!(c);
    assert!(matches!(
        std::future::Future::poll(c.as_mut(), &mut cx),
        std::task::Poll::Ready(Ok(()))
    ));
}
