//! One run per key at a time: callers that ask for a key while its run is in flight join it and
//! get the same outcome; once a caller has seen it, the key is forgotten, so a later call runs
//! again (a failure is shared, never cached).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use crate::lock::Locked;
use futures_util::future::{BoxFuture, FutureExt, Shared};

type Run<T> = Shared<BoxFuture<'static, T>>;

/// Runs keyed by `K` with outcome `T`; each run also carries an `S` that every caller joining it
/// receives (image builds: the bus their progress goes to).
pub(crate) struct SingleFlight<K, T, S = ()> {
    running: Mutex<HashMap<K, (Run<T>, S)>>,
}

impl<K, T, S> Default for SingleFlight<K, T, S> {
    fn default() -> Self {
        SingleFlight {
            running: Mutex::new(HashMap::new()),
        }
    }
}

/// A run joined by one caller: its shared value, and [`outcome`](Flight::outcome) to await.
pub(crate) struct Flight<'a, K: Hash + Eq, T: Clone, S> {
    owner: &'a SingleFlight<K, T, S>,
    key: K,
    run: Run<T>,
    /// The value the run was started with, the same for every caller.
    pub(crate) shared: S,
}

impl<K, T, S> SingleFlight<K, T, S>
where
    K: Hash + Eq + Clone,
    T: Clone + Send + Sync + 'static,
    S: Clone,
{
    /// Joins the run in flight for `key`, or starts one from `start`, which returns the work
    /// and the value shared with every caller that joins it.
    pub(crate) fn join<F>(&self, key: K, start: impl FnOnce() -> (F, S)) -> Flight<'_, K, T, S>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (run, shared) = self
            .lock()
            .entry(key.clone())
            .or_insert_with(|| {
                let (work, shared) = start();
                (work.boxed().shared(), shared)
            })
            .clone();
        Flight {
            owner: self,
            key,
            run,
            shared,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Run<T>, S)>> {
        self.running.locked()
    }
}

impl<K, T> SingleFlight<K, T>
where
    K: Hash + Eq + Clone,
    T: Clone + Send + Sync + 'static,
{
    /// The outcome of the run for `key`: the one in flight, or a new one of `work()`.
    pub(crate) async fn run<F>(&self, key: K, work: impl FnOnce() -> F) -> T
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.join(key, || (work(), ())).outcome().await
    }
}

impl<K, T, S> Flight<'_, K, T, S>
where
    K: Hash + Eq + Clone,
    T: Clone + Send + Sync + 'static,
    S: Clone,
{
    /// Waits for the run, then forgets it so a later call runs again, unless a newer run
    /// already took its place.
    pub(crate) async fn outcome(self) -> T {
        let outcome = self.run.clone().await;
        let mut running = self.owner.lock();
        if running
            .get(&self.key)
            .is_some_and(|(current, _)| current.ptr_eq(&self.run))
        {
            running.remove(&self.key);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::oneshot;

    use super::*;

    /// Work that counts its runs and finishes with what the test sends.
    fn counted(
        runs: &Arc<AtomicUsize>,
        done: oneshot::Receiver<Result<u32, String>>,
    ) -> impl Future<Output = Result<u32, String>> + Send + 'static {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            done.await.expect("the test sends an outcome")
        }
    }

    /// Sends the outcome once the callers polled before it have joined.
    async fn finish(tx: oneshot::Sender<Result<u32, String>>, outcome: Result<u32, String>) {
        tokio::task::yield_now().await;
        tx.send(outcome).unwrap();
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_run() {
        let flights: SingleFlight<&str, Result<u32, String>> = SingleFlight::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = oneshot::channel();
        let first = flights.run("ws", || counted(&runs, rx));
        // The second caller's work would never finish: it must not run.
        let second = flights.run("ws", || counted(&runs, oneshot::channel().1));
        let other = flights.run("other", || async { Ok(7) });
        let (a, b, c, ()) = tokio::join!(first, second, other, finish(tx, Ok(1)));
        assert_eq!((a, b, c), (Ok(1), Ok(1), Ok(7)));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(flights.lock().is_empty());
    }

    #[tokio::test]
    async fn a_call_after_completion_runs_again() {
        let flights: SingleFlight<&str, Result<u32, String>> = SingleFlight::default();
        let runs = Arc::new(AtomicUsize::new(0));
        for n in 1..=2 {
            let (tx, rx) = oneshot::channel();
            tx.send(Ok(n)).unwrap();
            assert_eq!(flights.run("ws", || counted(&runs, rx)).await, Ok(n));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failure_is_shared_then_forgotten() {
        let flights: SingleFlight<&str, Result<u32, String>> = SingleFlight::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = oneshot::channel();
        let first = flights.run("ws", || counted(&runs, rx));
        let second = flights.run("ws", || counted(&runs, oneshot::channel().1));
        let (a, b, ()) = tokio::join!(first, second, finish(tx, Err("engine gone".into())));
        assert_eq!(a, Err("engine gone".to_string()));
        assert_eq!(b, a);
        let (tx, rx) = oneshot::channel();
        tx.send(Ok(3)).unwrap();
        assert_eq!(flights.run("ws", || counted(&runs, rx)).await, Ok(3));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn joiners_receive_the_value_the_run_started_with() {
        let flights: SingleFlight<&str, u32, Arc<str>> = SingleFlight::default();
        let first = flights.join("tag", || (async { 5 }, Arc::from("bus-1")));
        let second = flights.join("tag", || (async { 6 }, Arc::from("bus-2")));
        assert_eq!((&*first.shared, &*second.shared), ("bus-1", "bus-1"));
        assert_eq!(tokio::join!(first.outcome(), second.outcome()), (5, 5));
        let third = flights.join("tag", || (async { 6 }, Arc::from("bus-3")));
        assert_eq!(&*third.shared, "bus-3");
        assert_eq!(third.outcome().await, 6);
    }
}
