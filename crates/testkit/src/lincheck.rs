//! A linearizability checker for recorded histories: each operation with
//! the time it was invoked and the time it returned (or no return: it
//! timed out, its client died, its outcome is unknown), checked against a
//! sequential model. The search is Wing and Gong's, with Lowe's
//! memoization of (operations linearized, model state) as in "Testing for
//! linearizability" (Lowe, 2017) and the Porcupine checker; histories are
//! split by key first (P-compositionality: a history is linearizable if
//! and only if each key's is).
//!
//! An operation whose outcome is unknown may take effect at any time after
//! it was invoked, or never; it is given an open end (it may be placed
//! after everything, where it changes nothing that was observed) and
//! every output.
//!
//! The search is exponential in the worst case: it is bounded by a number
//! of steps, and a history it could not decide within them is reported as
//! such, never as either answer. It must never call a history
//! linearizable that is not (the known-bad histories below guard that),
//! and is deterministic (no clock, no randomness).

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;

/// A sequential specification.
pub trait Model {
    type State: Clone + Eq + Hash;
    type Input;
    type Output;
    /// The state before any operation.
    fn init(&self) -> Self::State;
    /// The states `input` may leave `state` in while answering `output`
    /// (`None`: the answer is unknown, so any); empty if it cannot
    /// answer so.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Vec<Self::State>;
}

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op<I, O> {
    pub input: I,
    /// The answer (`None`: unknown, the operation may or may not have
    /// taken effect).
    pub output: Option<O>,
    /// When it was invoked, and when it returned (any clock shared by the
    /// history's clients; `ret` is ignored when the output is unknown).
    pub call: u64,
    pub ret: u64,
}

/// An operation on model `M`.
pub type OpOf<M> = Op<<M as Model>::Input, <M as Model>::Output>;

/// What the checker found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<K> {
    /// Every key's history has a linearization.
    Linearizable,
    /// This key's history has none.
    NotLinearizable(K),
    /// The step budget ran out on this key before an answer (and no other
    /// key had none).
    Undecided(K),
}

/// Check `ops`, each on a key, against `model`, key by key, with at most
/// `budget` search steps per key.
pub fn check_by_key<K, M>(model: &M, ops: Vec<(K, OpOf<M>)>, budget: u64) -> Verdict<K>
where
    K: Ord + Clone,
    M: Model,
{
    let mut keys: BTreeMap<K, Vec<OpOf<M>>> = BTreeMap::new();
    for (k, op) in ops {
        keys.entry(k).or_default().push(op);
    }
    let mut undecided = None;
    for (k, ops) in keys {
        match check(model, &ops, budget) {
            Some(true) => {}
            Some(false) => return Verdict::NotLinearizable(k),
            None => undecided = undecided.or(Some(k)),
        }
    }
    undecided.map_or(Verdict::Linearizable, Verdict::Undecided)
}

/// One event of the history, in a doubly linked list by time.
#[derive(Clone, Copy)]
struct Event {
    op: usize,
    is_call: bool,
    prev: usize,
    next: usize,
}

/// The list's head sentinel's index; events are 1.. .
const HEAD: usize = 0;
const NIL: usize = usize::MAX;

/// Whether one key's history is linearizable (`None`: undecided within
/// `budget` steps).
pub fn check<M: Model>(model: &M, ops: &[OpOf<M>], budget: u64) -> Option<bool> {
    // Events by time; at equal times calls come first (operations that
    // touch in time count as concurrent: the more lenient reading, so a
    // clock's granularity never makes a correct history fail).
    let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * ops.len());
    for (i, op) in ops.iter().enumerate() {
        order.push((op.call, false, i));
        let end = if op.output.is_some() {
            op.ret
        } else {
            u64::MAX
        };
        debug_assert!(end >= op.call, "an operation returned before it was called");
        order.push((end.max(op.call), true, i));
    }
    order.sort();
    let mut ev: Vec<Event> = Vec::with_capacity(order.len() + 1);
    ev.push(Event {
        op: NIL,
        is_call: false,
        prev: NIL,
        next: if order.is_empty() { NIL } else { 1 },
    });
    let mut ret_of = vec![NIL; ops.len()];
    for (n, &(_, is_ret, op)) in order.iter().enumerate() {
        let at = n + 1;
        ev.push(Event {
            op,
            is_call: !is_ret,
            prev: at - 1,
            next: if at == order.len() { NIL } else { at + 1 },
        });
        if is_ret {
            ret_of[op] = at;
        }
    }
    let unlink = |ev: &mut Vec<Event>, at: usize| {
        let (p, n) = (ev[at].prev, ev[at].next);
        ev[p].next = n;
        if n != NIL {
            ev[n].prev = p;
        }
    };
    let relink = |ev: &mut Vec<Event>, at: usize| {
        let (p, n) = (ev[at].prev, ev[at].next);
        ev[p].next = at;
        if n != NIL {
            ev[n].prev = at;
        }
    };
    let words = ops.len().div_ceil(64);
    let mut done = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    // (call event, state before it, the candidate next state taken).
    let mut stack: Vec<(usize, M::State, usize)> = Vec::new();
    let mut state = model.init();
    let mut at = ev[HEAD].next;
    let mut first_candidate = 0;
    let mut steps = 0u64;
    loop {
        if ev[HEAD].next == NIL {
            return Some(true);
        }
        steps += 1;
        if steps > budget {
            return None;
        }
        debug_assert!(at != NIL, "the search ran off the list's end");
        let e = ev[at];
        if e.is_call {
            let op = &ops[e.op];
            let nexts = model.step(&state, &op.input, op.output.as_ref());
            let mut took = None;
            for (c, next) in nexts.into_iter().enumerate().skip(first_candidate) {
                let mut with = done.clone();
                with[e.op / 64] |= 1 << (e.op % 64);
                if seen.insert((with.clone(), next.clone())) {
                    took = Some((c, next, with));
                    break;
                }
            }
            first_candidate = 0;
            match took {
                Some((c, next, with)) => {
                    stack.push((at, std::mem::replace(&mut state, next), c));
                    done = with;
                    unlink(&mut ev, at);
                    unlink(&mut ev, ret_of[e.op]);
                    at = ev[HEAD].next;
                }
                None => at = e.next,
            }
        } else {
            // A return whose operation is not yet placed: back up.
            let Some((call, before, c)) = stack.pop() else {
                return Some(false);
            };
            let op = ev[call].op;
            relink(&mut ev, ret_of[op]);
            relink(&mut ev, call);
            done[op / 64] &= !(1 << (op % 64));
            state = before;
            at = call;
            first_candidate = c + 1;
        }
    }
}

/// What is done to a [`Register`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterIn<V> {
    Read,
    Write(V),
    /// Leave nothing (an object removed).
    Remove,
    /// Set `new` if the register holds `expect` (`None`: nothing).
    Cas {
        expect: Option<V>,
        new: V,
    },
}

/// What a [`Register`] answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterOut<V> {
    /// The value read (`None`: nothing there).
    Read(Option<V>),
    Written,
    /// Whether the compare-and-set took effect.
    Cas(bool),
}

impl<V: Clone + Eq + Hash> Model for Register<V> {
    type State = Option<V>;
    type Input = RegisterIn<V>;
    type Output = RegisterOut<V>;

    fn init(&self) -> Option<V> {
        None
    }

    fn step(
        &self,
        s: &Option<V>,
        input: &RegisterIn<V>,
        out: Option<&RegisterOut<V>>,
    ) -> Vec<Option<V>> {
        match (input, out) {
            (RegisterIn::Read, None) => vec![s.clone()],
            (RegisterIn::Read, Some(RegisterOut::Read(v))) if v == s => vec![s.clone()],
            (RegisterIn::Write(v), None | Some(RegisterOut::Written)) => vec![Some(v.clone())],
            (RegisterIn::Remove, None | Some(RegisterOut::Written)) => vec![None],
            (RegisterIn::Cas { expect, new }, out) => {
                let can = expect == s;
                match out {
                    Some(RegisterOut::Cas(true)) if can => vec![Some(new.clone())],
                    Some(RegisterOut::Cas(false)) if !can => vec![s.clone()],
                    // Unknown: it took effect (if it could) or not.
                    None if can => vec![Some(new.clone()), s.clone()],
                    None => vec![s.clone()],
                    _ => vec![],
                }
            }
            _ => vec![],
        }
    }
}

/// A register holding a value of type `V` or nothing, read, written,
/// removed and compared-and-set (an object's data, say).
#[derive(Clone, Copy, Debug, Default)]
pub struct Register<V>(std::marker::PhantomData<V>);

impl<V> Register<V> {
    /// The register's model.
    pub fn new() -> Register<V> {
        Register(std::marker::PhantomData)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;

    type In = RegisterIn<u64>;
    type Out = RegisterOut<u64>;

    fn op(input: In, output: Option<Out>, call: u64, ret: u64) -> Op<In, Out> {
        Op {
            input,
            output,
            call,
            ret,
        }
    }
    fn w(v: u64, call: u64, ret: u64) -> Op<In, Out> {
        op(In::Write(v), Some(Out::Written), call, ret)
    }
    fn r(v: Option<u64>, call: u64, ret: u64) -> Op<In, Out> {
        op(In::Read, Some(Out::Read(v)), call, ret)
    }
    fn ok(ops: &[Op<In, Out>]) -> Option<bool> {
        check(&Register::<u64>::new(), ops, 1_000_000)
    }

    #[test]
    fn a_read_after_a_write_returned_sees_it() {
        assert_eq!(ok(&[w(1, 0, 1), r(Some(1), 2, 3)]), Some(true));
        assert_eq!(ok(&[w(1, 0, 1), r(None, 2, 3)]), Some(false));
        assert_eq!(ok(&[w(1, 0, 1), r(Some(2), 2, 3)]), Some(false));
    }

    #[test]
    fn a_remove_leaves_nothing_to_read() {
        let rm = |call, ret| op(In::Remove, Some(Out::Written), call, ret);
        assert_eq!(ok(&[w(1, 0, 1), rm(2, 3), r(None, 4, 5)]), Some(true));
        assert_eq!(ok(&[w(1, 0, 1), rm(2, 3), r(Some(1), 4, 5)]), Some(false));
        assert_eq!(ok(&[w(1, 0, 1), rm(2, 6), r(Some(1), 4, 5)]), Some(true));
    }

    #[test]
    fn reads_during_a_write_see_either_but_never_go_back() {
        // Both orders of old and new are fine for two reads that overlap
        // each other and the write.
        assert_eq!(
            ok(&[w(1, 0, 10), r(Some(1), 1, 5), r(None, 2, 6)]),
            Some(true)
        );
        // New then, strictly after it, old: a stale read.
        assert_eq!(
            ok(&[w(1, 0, 10), r(Some(1), 1, 2), r(None, 3, 4)]),
            Some(false)
        );
        // Operations that touch in time count as concurrent.
        assert_eq!(ok(&[w(1, 0, 5), r(None, 5, 6)]), Some(true));
    }

    #[test]
    fn a_write_whose_outcome_is_unknown_may_land_late_or_never() {
        let lost = op(In::Write(2), None, 0, 0);
        assert_eq!(ok(&[lost.clone(), r(None, 5, 6)]), Some(true));
        assert_eq!(ok(&[lost.clone(), r(Some(2), 5, 6)]), Some(true));
        assert_eq!(
            ok(&[lost.clone(), r(None, 5, 6), r(Some(2), 7, 8)]),
            Some(true)
        );
        // Once seen, it cannot be unseen.
        assert_eq!(ok(&[lost, r(Some(2), 5, 6), r(None, 7, 8)]), Some(false));
    }

    #[test]
    fn compare_and_set_succeeds_for_one_of_two_racers() {
        let cas = |ok: bool, call, ret| {
            op(
                In::Cas {
                    expect: None,
                    new: call,
                },
                Some(Out::Cas(ok)),
                call,
                ret,
            )
        };
        assert_eq!(ok(&[cas(true, 1, 10), cas(false, 2, 9)]), Some(true));
        assert_eq!(ok(&[cas(true, 1, 10), cas(true, 2, 9)]), Some(false));
        // Unknown: it may have taken effect.
        let maybe = op(
            In::Cas {
                expect: None,
                new: 7,
            },
            None,
            0,
            0,
        );
        assert_eq!(ok(&[maybe.clone(), r(Some(7), 3, 4)]), Some(true));
        assert_eq!(ok(&[maybe, r(None, 3, 4), r(Some(7), 5, 6)]), Some(true));
    }

    #[test]
    fn keys_are_checked_apart_and_the_bad_one_is_named() {
        let m = Register::<u64>::new();
        let good = vec![
            ("a", w(1, 0, 1)),
            ("b", w(1, 0, 1)),
            ("a", r(Some(1), 2, 3)),
        ];
        assert_eq!(check_by_key(&m, good.clone(), 1000), Verdict::Linearizable);
        let mut bad = good;
        bad.push(("b", r(Some(9), 2, 3)));
        assert_eq!(check_by_key(&m, bad, 1000), Verdict::NotLinearizable("b"));
    }

    #[test]
    fn a_search_out_of_steps_says_so() {
        // Many concurrent writes and a read no write explains: the search
        // must try every order before it can say no.
        let mut ops: Vec<Op<In, Out>> = (0..14).map(|v| w(v, 0, 100)).collect();
        ops.push(r(Some(99), 0, 100));
        let m = Register::<u64>::new();
        assert_eq!(check(&m, &ops, 50), None);
        assert_eq!(
            check_by_key(&m, ops.into_iter().map(|o| (0, o)).collect(), 50),
            Verdict::Undecided(0)
        );
    }

    /// Histories of a real register: each operation takes effect at one
    /// instant inside its [call, ret] span, so every such history is
    /// linearizable; the same history with one read's answer changed to
    /// a value never written is not.
    #[test]
    fn histories_of_a_real_register_pass_and_corrupted_ones_fail() {
        let m = Register::<u64>::new();
        for seed in 0..300 {
            let mut rng = Rng::new(seed);
            let mut value: Option<u64> = None;
            let mut ops = Vec::new();
            for t in 0..(4 + rng.below(12)) {
                // The instant it takes effect, and a span around it.
                let at = 10 * t + 20;
                let (call, ret) = (at - rng.below(12), at + rng.below(12));
                let o = match rng.below(3) {
                    0 => {
                        value = Some(t);
                        w(t, call, ret)
                    }
                    1 => {
                        let expect = if rng.below(2) == 0 { value } else { Some(999) };
                        let hit = expect == value;
                        if hit {
                            value = Some(t);
                        }
                        op(In::Cas { expect, new: t }, Some(Out::Cas(hit)), call, ret)
                    }
                    _ => r(value, call, ret),
                };
                ops.push(o);
            }
            assert_eq!(
                check(&m, &ops, 1_000_000),
                Some(true),
                "seed {seed}: {ops:?}"
            );
            if let Some(i) = ops.iter().position(|o| o.input == In::Read) {
                ops[i].output = Some(Out::Read(Some(12345)));
                assert_eq!(
                    check(&m, &ops, 1_000_000),
                    Some(false),
                    "seed {seed}: {ops:?}"
                );
            }
        }
    }

    /// Every order the real-time order allows, tried one by one.
    fn brute_force(ops: &[Op<In, Out>]) -> bool {
        fn end(o: &Op<In, Out>) -> u64 {
            if o.output.is_some() {
                o.ret
            } else {
                u64::MAX
            }
        }
        fn go(ops: &[Op<In, Out>], placed: &mut Vec<bool>, s: Option<u64>) -> bool {
            if placed.iter().all(|p| *p) {
                return true;
            }
            let m = Register::<u64>::new();
            for a in 0..ops.len() {
                let must_wait =
                    (0..ops.len()).any(|b| !placed[b] && b != a && end(&ops[b]) < ops[a].call);
                if placed[a] || must_wait {
                    continue;
                }
                for next in m.step(&s, &ops[a].input, ops[a].output.as_ref()) {
                    placed[a] = true;
                    let found = go(ops, placed, next);
                    placed[a] = false;
                    if found {
                        return true;
                    }
                }
            }
            false
        }
        go(ops, &mut vec![false; ops.len()], None)
    }

    /// Small random histories, linearizable or not, judged as trying
    /// every order would judge them.
    #[test]
    fn random_histories_are_judged_as_trying_every_order_would() {
        let (mut yes, mut no) = (0, 0);
        for seed in 0..3000 {
            let mut rng = Rng::new(seed);
            let value = |rng: &mut Rng| (rng.below(3) > 0).then(|| rng.below(3));
            let ops: Vec<Op<In, Out>> = (0..1 + rng.below(6))
                .map(|_| {
                    let call = rng.below(20);
                    let ret = call + rng.below(10);
                    let known = rng.below(6) > 0;
                    let (input, output) = match rng.below(3) {
                        0 => (In::Read, Out::Read(value(&mut rng))),
                        1 => (In::Write(rng.below(3)), Out::Written),
                        _ => (
                            In::Cas {
                                expect: value(&mut rng),
                                new: rng.below(3),
                            },
                            Out::Cas(rng.below(2) == 0),
                        ),
                    };
                    op(input, known.then_some(output), call, ret)
                })
                .collect();
            let want = brute_force(&ops);
            assert_eq!(ok(&ops), Some(want), "seed {seed}: {ops:?}");
            if want {
                yes += 1;
            } else {
                no += 1;
            }
        }
        assert!(yes > 300 && no > 300, "{yes} linearizable, {no} not");
    }
}
