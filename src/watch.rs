//! apimachinery's `watch.Broadcaster` (`pkg/watch/mux.go`): one bounded incoming queue, one distribution
//! thread, and one bounded queue per watcher, in which a full queue drops the item for that watcher only
//! (or makes the distribution wait). Items keep their order; a watcher sees only items that arrive after it.
//!
//! Unlike Go, every drop is counted: at the incoming queue and per watcher.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sync::lock;
use crate::time::Time;

/// What the distribution does when a watcher's queue is full (`watch.FullChannelBehavior`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FullChannel {
    /// Drop the item for that watcher (client-go's recorder uses this).
    Drop,
    /// Wait until the watcher takes an item or stops; this holds up every other watcher too.
    Wait,
}

/// How long a consumer that found its queue empty waits for more before it parks. While it lingers,
/// producers wake it only when the queue has filled to `notify_at`: a wake-up is a system call, which would
/// otherwise cost more than queuing an event.
const LINGER: std::time::Duration = std::time::Duration::from_micros(400);

/// Batches of a quarter of the queue: each batch costs a Python consumer two GIL hand-offs, which between CPUs
/// of a virtual machine cost more than the batch's events (BENCHMARKS.md, "Why the code is as it is").
fn notify_at(capacity: usize) -> usize {
    (capacity / 4).clamp(1, 256)
}

/// A consumer is fast while it takes at most this long per item on average (a sink that returns at once, a
/// logging watcher); a round trip to an API server takes milliseconds.
const FAST_ITEM_NANOS: u64 = 100_000;

/// A consumer that reported no progress for this long, beyond what the items it holds would take at
/// `FAST_ITEM_NANOS` each, is slow whatever its average says (a sink's first call to a slow server).
const STUCK: Duration = Duration::from_millis(50);

/// How a lane's consumer keeps up: written by the consumer only, read by producers without the lock.
struct Pace {
    epoch: Instant,
    /// Nanoseconds since `epoch` of the consumer's last progress (a batch taken or items done).
    mark: AtomicU64,
    /// Average nanoseconds per item (exponentially weighted); `u64::MAX` until the first item is done.
    item_nanos: AtomicU64,
    /// Items taken and not reported done yet (a watcher reports a whole batch at once); none: the consumer
    /// is between batches.
    held: AtomicU64,
}

impl Pace {
    fn new() -> Self {
        Pace {
            epoch: Instant::now(),
            mark: AtomicU64::new(0),
            item_nanos: AtomicU64::new(u64::MAX),
            held: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        self.at(Instant::now())
    }

    fn at(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// The consumer took a batch of `n` items at `now`.
    fn took(&self, n: usize, now: u64) {
        self.mark.store(now, Ordering::Relaxed);
        self.held.store(n as u64, Ordering::Release);
    }

    /// `n` items done at `now`.
    fn done(&self, n: usize, now: u64) {
        if n == 0 {
            return;
        }
        // Clipped: a consumer that lost its CPU for a while is still fast when it has it, and one that is
        // really slow stays above `FAST_ITEM_NANOS` anyway.
        let per_item = (now.saturating_sub(self.mark.load(Ordering::Relaxed)) / n as u64).min(4 * FAST_ITEM_NANOS);
        let avg = match self.item_nanos.load(Ordering::Relaxed) {
            u64::MAX => per_item,
            avg => avg - avg / 8 + per_item / 8,
        };
        self.item_nanos.store(avg, Ordering::Relaxed);
        self.mark.store(now, Ordering::Relaxed);
        let held = self.held.load(Ordering::Relaxed);
        self.held.store(held.saturating_sub(n as u64), Ordering::Release);
    }

    /// Whether the consumer, when it runs, gets through its items quickly: waiting for it then costs a
    /// producer little. One that has not finished an item yet counts as fast until it is stuck (`STUCK`).
    fn is_fast(&self, now: u64) -> bool {
        let held = self.held.load(Ordering::Acquire);
        if held == 0 {
            // Between batches: it takes the next one as soon as it runs.
            return true;
        }
        let silent = now.saturating_sub(self.mark.load(Ordering::Relaxed));
        let allowed = STUCK.as_nanos() as u64 + held.saturating_mul(FAST_ITEM_NANOS);
        let avg = self.item_nanos.load(Ordering::Relaxed);
        silent <= allowed && (avg == u64::MAX || avg <= FAST_ITEM_NANOS)
    }
}

/// What the thread that drains a lane is doing, so `Broadcaster::is_idle` can tell whether anything can
/// still happen without a clock moving.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    Waiting,
    Running,
    /// Sleeping until the given instant on the pipeline's clock.
    Sleeping(Time),
    /// Waiting for items, or for the given instant on the pipeline's clock, whichever comes first.
    WaitingUntil(Time),
}

/// What `Lane::pop_batch_until` came back with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Popped {
    Items,
    TimedOut,
    /// The lane is closed (or stopped) and empty.
    Closed,
}

struct LaneState<T> {
    items: VecDeque<T>,
    activity: Activity,
    /// No more items will come; the consumer drains what is left.
    closed: bool,
    /// The consumer went away; items are no longer queued.
    stopped: bool,
    /// The consumer waits without a timeout: every push must wake it.
    consumer_parked: bool,
    /// Producers waiting for room (full-queue waits and `relieve`).
    producers_waiting: usize,
}

/// A bounded FIFO with one consumer: a watcher's queue, or a delivery worker's.
pub struct Lane<T> {
    state: Mutex<LaneState<T>>,
    ready: Condvar,
    space: Condvar,
    capacity: usize,
    dropped: AtomicU64,
    pace: Pace,
    pub name: String,
}

impl<T> Lane<T> {
    pub fn new(name: impl Into<String>, capacity: usize) -> Self {
        Lane {
            state: Mutex::new(LaneState {
                items: VecDeque::new(),
                activity: Activity::Waiting,
                closed: false,
                stopped: false,
                consumer_parked: false,
                producers_waiting: 0,
            }),
            ready: Condvar::new(),
            space: Condvar::new(),
            capacity: capacity.max(1),
            dropped: AtomicU64::new(0),
            pace: Pace::new(),
            name: name.into(),
        }
    }

    /// Queues `item`; when full, drops it (counted) or waits for space. Returns whether it was queued.
    pub fn push(&self, item: T, full: FullChannel) -> bool {
        self.push_len(item, full).is_some()
    }

    /// `push`, returning the queue's length after it (None: not queued).
    pub fn push_len(&self, item: T, full: FullChannel) -> Option<usize> {
        let mut s = lock(&self.state);
        loop {
            if s.stopped || s.closed {
                return None;
            }
            if s.items.len() < self.capacity {
                break;
            }
            match full {
                FullChannel::Drop => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return Some(s.items.len());
                }
                FullChannel::Wait => {
                    s.producers_waiting += 1;
                    s = self.space.wait(s).unwrap_or_else(|p| p.into_inner());
                    s.producers_waiting -= 1;
                }
            }
        }
        s.items.push_back(item);
        if s.consumer_parked || s.items.len() == notify_at(self.capacity) {
            self.ready.notify_one();
        }
        Some(s.items.len())
    }

    /// Takes up to `max` items into `out`, waiting while the lane is empty; marks the consumer running.
    /// Returns false once the lane is closed (or stopped) and empty.
    pub fn pop_batch(&self, out: &mut Vec<T>, max: usize) -> bool {
        self.pop(out, max, None) == Popped::Items
    }

    /// `pop_batch` for a consumer that also has work at an instant of the clock: waits at most `wait` for
    /// items, marked `WaitingUntil(due)` meanwhile (so that the pipeline is idle only until `due`).
    pub fn pop_batch_until(&self, out: &mut Vec<T>, max: usize, wait: Duration, due: Time) -> Popped {
        self.pop(out, max, Some((Instant::now() + wait, due)))
    }

    fn pop(&self, out: &mut Vec<T>, max: usize, until: Option<(Instant, Time)>) -> Popped {
        let idle = until.map_or(Activity::Waiting, |(_, due)| Activity::WaitingUntil(due));
        let mut s = lock(&self.state);
        let mut lingered = false;
        loop {
            if s.stopped {
                s.items.clear();
                s.activity = Activity::Waiting;
                return Popped::Closed;
            }
            let left = until.map(|(deadline, _)| deadline.saturating_duration_since(Instant::now()));
            let expired = left.is_some_and(|l| l.is_zero());
            // A short queue is worth a moment's wait: each batch costs its consumer a GIL handoff.
            if !s.items.is_empty() && s.items.len() < notify_at(self.capacity) && !lingered && !s.closed && !expired {
                lingered = true;
                let linger = left.map_or(LINGER, |l| l.min(LINGER));
                s = self.ready.wait_timeout(s, linger).unwrap_or_else(|p| p.into_inner()).0;
                continue;
            }
            if !s.items.is_empty() {
                let n = s.items.len().min(max);
                out.extend(s.items.drain(..n));
                s.activity = Activity::Running;
                if s.producers_waiting > 0 {
                    self.space.notify_all();
                }
                self.pace.took(n, self.pace.now());
                return Popped::Items;
            }
            s.activity = idle;
            if s.closed {
                s.activity = Activity::Waiting;
                return Popped::Closed;
            }
            if expired {
                return Popped::TimedOut;
            }
            // An empty queue: a moment's wait without being woken for every item, then parked.
            s = match (lingered, left) {
                (false, _) => {
                    lingered = true;
                    let linger = left.map_or(LINGER, |l| l.min(LINGER));
                    self.ready.wait_timeout(s, linger).unwrap_or_else(|p| p.into_inner()).0
                }
                (true, None) => {
                    s.consumer_parked = true;
                    self.ready.wait(s).unwrap_or_else(|p| p.into_inner())
                }
                (true, Some(left)) => {
                    s.consumer_parked = true;
                    self.ready.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0
                }
            };
            s.consumer_parked = false;
        }
    }

    pub fn set_activity(&self, a: Activity) {
        lock(&self.state).activity = a;
    }

    /// Ends the consumer's wait for a fuller batch, for someone who waits for the queue to empty.
    pub fn hurry(&self) {
        let s = lock(&self.state);
        if !s.items.is_empty() {
            self.ready.notify_all();
        }
    }

    /// No more items; the consumer drains the queue and then sees the end.
    pub fn close(&self) {
        let mut s = lock(&self.state);
        s.closed = true;
        self.ready.notify_all();
        self.space.notify_all();
    }

    /// The consumer is gone: queued items are discarded and producers never wait on this lane again.
    pub fn stop(&self) -> usize {
        let mut s = lock(&self.state);
        s.stopped = true;
        let discarded = s.items.len();
        s.items.clear();
        self.ready.notify_all();
        self.space.notify_all();
        discarded
    }

    /// The consumer reports `n` items of its batch done (for `relieve`'s judgement of its pace).
    pub fn done(&self, n: usize) {
        self.pace.done(n, self.pace.now())
    }

    /// `done`, with the time the caller read anyway.
    pub fn done_at(&self, n: usize, t: Instant) {
        self.pace.done(n, self.pace.at(t))
    }

    fn is_fast(&self) -> bool {
        self.pace.is_fast(self.pace.now())
    }

    /// Items queued or taken and not done yet.
    pub fn load(&self) -> usize {
        self.len() + self.pace.held.load(Ordering::Relaxed) as usize
    }

    /// More than half full.
    fn is_behind(&self) -> bool {
        lock(&self.state).items.len() * 2 > self.capacity
    }

    /// Waits until the lane is at most half full, the consumer is gone, or `deadline`.
    fn wait_for_room(&self, deadline: Instant) {
        let mut s = lock(&self.state);
        s.producers_waiting += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let mut s = self
            .space
            .wait_timeout_while(s, left, |s| s.items.len() * 2 > self.capacity && !s.stopped && !s.closed)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        s.producers_waiting -= 1;
    }

    /// Items dropped because the lane was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        lock(&self.state).items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nothing queued and the consumer waiting, or sleeping past `now`.
    pub fn is_idle(&self, now: Time) -> bool {
        let s = lock(&self.state);
        match s.activity {
            Activity::Waiting => s.items.is_empty() || s.stopped,
            Activity::Running => false,
            Activity::Sleeping(until) => until > now,
            Activity::WaitingUntil(until) => until > now && (s.items.is_empty() || s.stopped),
        }
    }
}

enum Message<I, O> {
    Item(I),
    AddWatcher(Arc<Lane<O>>),
    RemoveWatcher(Arc<Lane<O>>),
    Shutdown,
}

struct Incoming<I, O> {
    queue: VecDeque<Message<I, O>>,
    items: usize,
    stopped: bool,
    distributing: bool,
    distributor_parked: bool,
    /// Control messages run so far, for `block_queue`.
    done: u64,
    submitted: u64,
    /// Producers in `relieve` waiting for the distribution thread to take the queue.
    relieving: usize,
}

struct MuxState<I, O> {
    incoming: Mutex<Incoming<I, O>>,
    ready: Condvar,
    done: Condvar,
    capacity: usize,
    full: FullChannel,
    received: AtomicU64,
    dropped: AtomicU64,
    watchers: Mutex<Vec<Arc<Lane<O>>>>,
    /// Some watcher's queue is more than half full.
    pressure: AtomicBool,
    /// The incoming queue is more than half full.
    incoming_behind: AtomicBool,
    /// The distribution thread took the incoming queue (for `relieve`).
    taken: Condvar,
    convert: Box<dyn Fn(I) -> O + Send + Sync>,
}

/// The broadcaster. `I` is what producers send; the distribution thread turns each into an `O` (once, for
/// all watchers) with the `convert` function given to `new`.
pub struct Broadcaster<I, O> {
    shared: Arc<MuxState<I, O>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The error of `watch.Broadcaster` after `Shutdown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("broadcaster already stopped")
    }
}

impl<I: Send + 'static, O: Clone + Send + 'static> Broadcaster<I, O> {
    /// `NewLongQueueBroadcaster(queue_length, full)`: the incoming queue and every watcher queue hold
    /// `queue_length` items.
    pub fn new(
        queue_length: usize,
        full: FullChannel,
        convert: impl Fn(I) -> O + Send + Sync + 'static,
    ) -> crate::error::Result<Self> {
        let b = Self::unstarted(queue_length, full, convert);
        let s = b.shared.clone();
        *lock(&b.thread) = Some(crate::threads::spawn("broadcast", move || s.run())?);
        Ok(b)
    }

    /// `new` without the distribution thread.
    fn unstarted(queue_length: usize, full: FullChannel, convert: impl Fn(I) -> O + Send + Sync + 'static) -> Self {
        let shared = Arc::new(MuxState {
            incoming: Mutex::new(Incoming {
                queue: VecDeque::new(),
                items: 0,
                stopped: false,
                distributing: false,
                distributor_parked: false,
                done: 0,
                submitted: 0,
                relieving: 0,
            }),
            ready: Condvar::new(),
            done: Condvar::new(),
            capacity: queue_length.max(1),
            full,
            received: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            watchers: Mutex::new(Vec::new()),
            pressure: AtomicBool::new(false),
            incoming_behind: AtomicBool::new(false),
            taken: Condvar::new(),
            convert: Box::new(convert),
        });
        Broadcaster { shared, thread: Mutex::new(None) }
    }

    /// `ActionOrDrop`: queues without blocking. `Ok(false)` when the incoming queue is full (counted).
    ///
    /// When nothing is queued or being distributed and full watcher queues drop, the calling thread
    /// distributes the item itself: the order is the same, and a burst does not depend on the distribution
    /// thread being scheduled in time (on a busy machine it may not be, for milliseconds).
    pub fn action_or_drop(&self, item: I) -> Result<bool, Stopped> {
        let s = &self.shared;
        let mut inc = lock(&s.incoming);
        if inc.stopped {
            return Err(Stopped);
        }
        s.received.fetch_add(1, Ordering::Relaxed);
        Ok(s.offer(&mut inc, item))
    }

    /// Runs a control message after everything queued before it, and waits for it (`blockQueue`).
    fn block_queue(&self, m: Message<I, O>) -> Result<(), Stopped> {
        let s = &self.shared;
        let mut inc = lock(&s.incoming);
        if inc.stopped {
            return Err(Stopped);
        }
        let shutdown = matches!(m, Message::Shutdown);
        if shutdown {
            inc.stopped = true;
            s.taken.notify_all();
        }
        inc.queue.push_back(m);
        inc.submitted += 1;
        let ticket = inc.submitted;
        s.ready.notify_one();
        while inc.done < ticket {
            inc = s.done.wait(inc).unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    }

    /// `Watch`: a new watcher lane that receives every item queued after this call.
    pub fn watch(&self, name: impl Into<String>) -> Result<Arc<Lane<O>>, Stopped> {
        let lane = Arc::new(Lane::new(name, self.shared.capacity));
        self.block_queue(Message::AddWatcher(lane.clone()))?;
        Ok(lane)
    }

    /// Stops a watcher: it receives nothing more; what it had queued is discarded (returned count).
    pub fn stop_watching(&self, lane: &Arc<Lane<O>>) -> usize {
        let discarded = lane.stop();
        // After shutdown the watcher is already gone from the list.
        let _ = self.block_queue(Message::RemoveWatcher(lane.clone()));
        discarded
    }

    /// `Shutdown`: refuses new items, distributes everything queued, closes every watcher lane (the
    /// watchers then drain their queues) and waits for the distribution thread to end. Idempotent.
    pub fn shutdown(&self) {
        let _ = self.block_queue(Message::Shutdown);
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }

    pub fn is_stopped(&self) -> bool {
        lock(&self.shared.incoming).stopped
    }

    /// `shutdown` without waiting: refuses new items; the distribution thread distributes what is queued,
    /// closes the watcher lanes and ends on its own.
    pub fn close(&self) {
        let mut inc = lock(&self.shared.incoming);
        if !inc.stopped {
            inc.stopped = true;
            inc.queue.push_back(Message::Shutdown);
            self.shared.ready.notify_one();
            self.shared.taken.notify_all();
        }
    }

    /// The distribution thread has ended (after `close` or `shutdown`).
    pub fn is_finished(&self) -> bool {
        lock(&self.thread).as_ref().is_none_or(|t| t.is_finished())
    }

    /// Items offered to `action_or_drop` before shutdown, including the dropped ones.
    pub fn received(&self) -> u64 {
        self.shared.received.load(Ordering::Relaxed)
    }

    /// Items dropped because the incoming queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Items waiting in the incoming queue.
    pub fn queued(&self) -> usize {
        lock(&self.shared.incoming).items
    }

    /// Ends the distribution thread's wait for more items, for someone who waits for the queue to empty.
    pub fn hurry(&self) {
        let inc = lock(&self.shared.incoming);
        if !inc.queue.is_empty() {
            self.shared.ready.notify_one();
        }
    }

    /// Nothing waits in the incoming queue and nothing is being distributed.
    pub fn is_idle(&self) -> bool {
        let inc = lock(&self.shared.incoming);
        inc.queue.is_empty() && !inc.distributing
    }

    /// A watcher's queue was more than half full after the last item distributed: its consumer is behind.
    pub fn under_pressure(&self) -> bool {
        self.shared.pressure.load(Ordering::Relaxed) || self.shared.incoming_behind.load(Ordering::Relaxed)
    }

    /// For a producer that outpaces the distribution or its watchers in drop mode: waits, up to `limit`,
    /// until the incoming queue and every watcher that is more than half full and fast (see
    /// `Lane::is_fast`) are back to half. A slow watcher is never waited for; it drops what its queue cannot
    /// hold. Returns whether it waited. In wait mode the distribution already waits for full watchers
    /// (holding the watcher list), so this returns at once.
    pub fn relieve(&self, limit: Duration) -> bool {
        let sh = &self.shared;
        if sh.full != FullChannel::Drop || !self.under_pressure() {
            return false;
        }
        let deadline = Instant::now() + limit;
        let mut waited = false;
        if sh.incoming_behind.load(Ordering::Relaxed) {
            let untaken = |inc: &mut Incoming<I, O>| inc.distributing && inc.items * 2 > sh.capacity && !inc.stopped;
            let mut inc = lock(&sh.incoming);
            waited = untaken(&mut inc);
            inc.relieving += 1;
            let mut inc = sh.taken.wait_timeout_while(inc, limit, untaken).unwrap_or_else(|p| p.into_inner()).0;
            inc.relieving -= 1;
        }
        let behind: Vec<Arc<Lane<O>>> =
            lock(&sh.watchers).iter().filter(|w| w.is_fast() && w.is_behind()).cloned().collect();
        for w in &behind {
            w.wait_for_room(deadline);
        }
        waited || !behind.is_empty()
    }
}

impl<I, O: Clone> MuxState<I, O> {
    fn run(&self) {
        let mut batch = VecDeque::new();
        loop {
            {
                let mut inc = lock(&self.incoming);
                inc.distributing = false;
                if inc.relieving > 0 {
                    self.taken.notify_all();
                }
                let mut lingered = false;
                while inc.queue.is_empty() {
                    inc = if lingered {
                        inc.distributor_parked = true;
                        self.ready.wait(inc).unwrap_or_else(|p| p.into_inner())
                    } else {
                        lingered = true;
                        self.ready.wait_timeout(inc, LINGER).unwrap_or_else(|p| p.into_inner()).0
                    };
                    inc.distributor_parked = false;
                }
                std::mem::swap(&mut batch, &mut inc.queue);
                inc.items = 0;
                inc.distributing = true;
                self.incoming_behind.store(false, Ordering::Relaxed);
                if inc.relieving > 0 {
                    self.taken.notify_all();
                }
            }
            for m in batch.drain(..) {
                match m {
                    Message::Item(i) => self.distribute((self.convert)(i)),
                    Message::AddWatcher(l) => {
                        lock(&self.watchers).push(l);
                        self.complete();
                    }
                    Message::RemoveWatcher(l) => {
                        lock(&self.watchers).retain(|w| !Arc::ptr_eq(w, &l));
                        self.complete();
                    }
                    Message::Shutdown => {
                        for w in lock(&self.watchers).drain(..) {
                            w.close();
                        }
                        let mut inc = lock(&self.incoming);
                        inc.distributing = false;
                        // Nothing can follow a shutdown: `stopped` was set when it was queued.
                        inc.done += 1;
                        self.done.notify_all();
                        return;
                    }
                }
            }
        }
    }

    fn complete(&self) {
        lock(&self.incoming).done += 1;
        self.done.notify_all();
    }

    /// The body of `action_or_drop`, with the incoming queue locked.
    fn offer(&self, inc: &mut Incoming<I, O>, item: I) -> bool {
        // The caller distributes by itself only while the distribution thread is not (the order stays the
        // queue's) and only when full watcher queues drop (so it never waits).
        let may_distribute = self.full == FullChannel::Drop && !inc.distributing;
        if may_distribute && inc.queue.is_empty() {
            self.distribute((self.convert)(item));
            return true;
        }
        if inc.items >= self.capacity {
            if !may_distribute {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            // The distribution thread has not taken the queue yet (on a busy machine it may not be scheduled
            // for milliseconds): distribute what is queued, in order, rather than drop.
            self.take_over(inc);
            self.distribute((self.convert)(item));
            return true;
        }
        inc.queue.push_back(Message::Item(item));
        inc.items += 1;
        if inc.items * 2 > self.capacity {
            self.incoming_behind.store(true, Ordering::Relaxed);
        }
        if inc.distributor_parked || inc.items == notify_at(self.capacity) {
            self.ready.notify_one();
        }
        true
    }

    /// Runs everything queued on the calling thread, as `run` would; the caller holds the incoming lock.
    fn take_over(&self, inc: &mut Incoming<I, O>) {
        for m in std::mem::take(&mut inc.queue) {
            match m {
                Message::Item(i) => self.distribute((self.convert)(i)),
                Message::AddWatcher(l) => {
                    lock(&self.watchers).push(l);
                    inc.done += 1;
                    self.done.notify_all();
                }
                Message::RemoveWatcher(l) => {
                    lock(&self.watchers).retain(|w| !Arc::ptr_eq(w, &l));
                    inc.done += 1;
                    self.done.notify_all();
                }
                // Queued only once `stopped` is set, and then nothing is offered; left to the thread.
                Message::Shutdown => inc.queue.push_back(Message::Shutdown),
            }
        }
        inc.items = 0;
        self.incoming_behind.store(false, Ordering::Relaxed);
    }

    fn distribute(&self, item: O) {
        let watchers = lock(&self.watchers);
        let mut longest = 0;
        if let Some((last, rest)) = watchers.split_last() {
            for w in rest {
                longest = longest.max(w.push_len(item.clone(), self.full).unwrap_or(0));
            }
            longest = longest.max(last.push_len(item, self.full).unwrap_or(0));
        }
        let pressed = longest * 2 > self.capacity;
        if pressed != self.pressure.load(Ordering::Relaxed) {
            self.pressure.store(pressed, Ordering::Relaxed);
        }
    }
}

impl<I, O> Drop for Broadcaster<I, O> {
    fn drop(&mut self) {
        let mut inc = lock(&self.shared.incoming);
        if !inc.stopped {
            inc.stopped = true;
            inc.queue.push_back(Message::Shutdown);
            self.shared.ready.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain<T>(l: &Lane<T>) -> Vec<T> {
        let mut out = Vec::new();
        while l.pop_batch(&mut out, 100) {}
        out
    }

    fn mux(queue: usize, full: FullChannel) -> Broadcaster<&'static str, &'static str> {
        Broadcaster::new(queue, full, |s| s).unwrap()
    }

    // mux_test.go TestBroadcaster.
    #[test]
    fn every_watcher_gets_every_event_in_order() {
        let m = mux(10, FullChannel::Wait);
        let (a, b) = (m.watch("a").unwrap(), m.watch("b").unwrap());
        for e in ["added foo", "added bar", "modified foo", "deleted bar"] {
            assert_eq!(m.action_or_drop(e), Ok(true));
        }
        m.shutdown();
        let want = vec!["added foo", "added bar", "modified foo", "deleted bar"];
        assert_eq!(drain(&a), want);
        assert_eq!(drain(&b), want);
    }

    // TestBroadcasterWatcherClose: stopping a watcher, then shutdown; extra stops are harmless.
    #[test]
    fn stopped_watchers_get_nothing_and_stop_twice_is_harmless() {
        let m = mux(10, FullChannel::Wait);
        let (a, b) = (m.watch("a").unwrap(), m.watch("b").unwrap());
        m.stop_watching(&a);
        m.action_or_drop("x").unwrap();
        m.shutdown();
        m.stop_watching(&a);
        m.stop_watching(&b);
        assert!(drain(&a).is_empty());
    }

    // TestBroadcasterWatcherStopDeadlock: a full watcher in wait mode that stops does not hang distribution.
    #[test]
    fn stopping_a_full_watcher_unblocks_wait_mode() {
        let m = Arc::new(mux(1, FullChannel::Wait));
        let (a, b) = (m.watch("a").unwrap(), m.watch("b").unwrap());
        m.action_or_drop("1").unwrap();
        while !m.is_idle() {
            std::thread::yield_now();
        }
        m.action_or_drop("2").unwrap();
        // `b` never reads; once `a` has the first item, stop `b`.
        let mut got = Vec::new();
        assert!(a.pop_batch(&mut got, 1));
        m.stop_watching(&b);
        assert!(a.pop_batch(&mut got, 1));
        assert_eq!(got, ["1", "2"]);
        m.shutdown();
    }

    // TestBroadcasterDropIfChannelFull.
    #[test]
    fn a_full_watcher_drops_and_counts() {
        let m = mux(1, FullChannel::Drop);
        let (a, b) = (m.watch("a").unwrap(), m.watch("b").unwrap());
        m.action_or_drop("event1").unwrap();
        // Let the first one be distributed before the second arrives: the incoming queue holds one.
        while !m.is_idle() {
            std::thread::yield_now();
        }
        m.action_or_drop("event2").unwrap();
        m.shutdown();
        assert_eq!(drain(&a), ["event1"]);
        assert_eq!(drain(&b), ["event1"]);
        assert_eq!((a.dropped(), b.dropped()), (1, 1));
    }

    // TestBroadcasterWatchAfterShutdown / TestBroadcasterSendEventAfterShutdown.
    #[test]
    fn after_shutdown_everything_is_refused() {
        let m = mux(1, FullChannel::Drop);
        m.shutdown();
        m.shutdown();
        assert_eq!(m.watch("late").err(), Some(Stopped));
        assert_eq!(m.action_or_drop("x"), Err(Stopped));
        assert_eq!(Stopped.to_string(), "broadcaster already stopped");
    }

    #[test]
    fn a_new_watcher_sees_only_later_items() {
        let m = mux(100, FullChannel::Drop);
        let a = m.watch("a").unwrap();
        m.action_or_drop("before").unwrap();
        let b = m.watch("b").unwrap();
        m.action_or_drop("after").unwrap();
        m.shutdown();
        assert_eq!(drain(&a), ["before", "after"]);
        assert_eq!(drain(&b), ["after"]);
    }

    #[test]
    fn a_full_incoming_queue_drops_and_counts() {
        // A watcher that does not read holds up distribution in wait mode, so the incoming queue fills.
        let m = mux(2, FullChannel::Wait);
        let w = m.watch("w").unwrap();
        let accepted = (0..10).filter(|_| m.action_or_drop("x").unwrap()).count();
        assert!(accepted < 10);
        assert_eq!(m.received(), 10);
        assert_eq!(m.dropped() as usize, 10 - accepted);
        let stop = std::thread::spawn({
            let w = w.clone();
            move || drain(&w).len()
        });
        m.shutdown();
        assert_eq!(stop.join().unwrap(), accepted);
    }

    #[test]
    fn with_nothing_queued_the_caller_distributes() {
        let m = mux(1, FullChannel::Drop);
        let w = m.watch("w").unwrap();
        while !m.is_idle() {
            std::thread::yield_now();
        }
        // The distribution thread is not needed: each item reaches the watcher during the call.
        for i in 0..5 {
            assert_eq!(m.action_or_drop("x"), Ok(true));
            assert_eq!(w.len(), (i + 1).min(1));
        }
        assert_eq!((m.dropped(), w.dropped()), (0, 4));
        m.shutdown();
    }

    #[test]
    fn a_full_incoming_queue_the_thread_has_not_taken_is_distributed_by_the_caller() {
        let m = mux(3, FullChannel::Drop);
        while !m.is_idle() {
            std::thread::yield_now();
        }
        let s = &m.shared;
        // The queue as it stands while the distribution thread is not scheduled: full, with watcher
        // registrations between the items.
        let (w, late) = (Arc::new(Lane::new("w", 3)), Arc::new(Lane::new("late", 3)));
        let mut inc = lock(&s.incoming);
        inc.queue.push_back(Message::Item("a"));
        inc.queue.push_back(Message::AddWatcher(w.clone()));
        inc.queue.push_back(Message::Item("b"));
        inc.queue.push_back(Message::Item("c"));
        inc.queue.push_back(Message::AddWatcher(late.clone()));
        inc.items = 3;
        let done = inc.done;
        assert!(s.offer(&mut inc, "d"));
        assert_eq!((inc.queue.len(), inc.items, inc.done), (0, 0, done + 2));
        drop(inc);
        // In queue order: each watcher sees what was queued after its registration, and nothing is dropped.
        m.shutdown();
        assert_eq!(drain(&w), ["b", "c", "d"]);
        assert_eq!(drain(&late), ["d"]);
        assert_eq!((m.dropped(), w.dropped(), late.dropped()), (0, 0, 0));
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_consumer_is_fast_until_its_items_take_long() {
        let p = Pace::new();
        let stuck = STUCK.as_nanos() as u64;
        // Between batches, and in a first batch with nothing done yet.
        assert!(p.is_fast(0));
        p.took(1, 0);
        assert!(p.is_fast(stuck + FAST_ITEM_NANOS));
        // Stuck on its only item.
        assert!(!p.is_fast(stuck + FAST_ITEM_NANOS + 1));
        // A batch of 500 may take 50 ms more before it counts as stuck.
        p.took(500, 0);
        assert!(p.is_fast(stuck + 500 * FAST_ITEM_NANOS));
        assert!(!p.is_fast(stuck + 500 * FAST_ITEM_NANOS + 1));
        p.took(200, 0);
        // 10 µs an item.
        for i in 1..=100 {
            p.done(1, i * 10_000);
        }
        assert!(p.is_fast(100 * 10_000));
        // One item that took 50 ms (its thread lost the CPU) does not make it slow...
        p.done(1, 1_000_000 + 50 * MS);
        assert!(p.is_fast(1_000_000 + 50 * MS));
        // ...items that take 1 ms each do, within a few.
        let mut t = 1_000_000 + 50 * MS;
        for _ in 0..4 {
            t += MS;
            p.done(1, t);
        }
        assert!(!p.is_fast(t));
        // Its batch done: it takes the next one as soon as it runs.
        p.done(95, t + MS);
        assert!(p.is_fast(t + MS));
    }

    /// A watcher with `n` items queued by the caller (the distribution thread stays out of it).
    fn behind_watcher(m: &Broadcaster<&'static str, &'static str>, n: usize) -> Arc<Lane<&'static str>> {
        let w = m.watch("w").unwrap();
        while !m.is_idle() {
            std::thread::yield_now();
        }
        for _ in 0..n {
            assert_eq!(m.action_or_drop("x"), Ok(true));
        }
        assert!(m.under_pressure());
        w
    }

    #[test]
    fn relieve_waits_for_a_fast_watcher_to_get_back_to_half() {
        let m = mux(4, FullChannel::Drop);
        let w = behind_watcher(&m, 4);
        let returned = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (w, returned) = (w.clone(), returned.clone());
            std::thread::spawn(move || {
                // Takes its queue only once the producer waits for it.
                while lock(&w.state).producers_waiting == 0 {
                    if returned.load(Ordering::Acquire) {
                        return 0;
                    }
                    std::thread::yield_now();
                }
                let mut out = Vec::new();
                w.pop_batch(&mut out, 100);
                out.len()
            })
        };
        let waited = m.relieve(Duration::from_secs(600));
        let left = w.len();
        returned.store(true, Ordering::Release);
        assert_eq!((waited, left, consumer.join().unwrap()), (true, 0, 4));
        m.shutdown();
    }

    #[test]
    fn relieve_never_waits_for_a_slow_watcher() {
        let m = mux(4, FullChannel::Drop);
        let w = behind_watcher(&m, 4);
        // Its consumer took a batch and did an item in 5 ms.
        w.pace.took(4, 0);
        w.pace.done(1, 5 * MS);
        assert!(!w.is_fast());
        // It returns at once (a wait would last the limit and return true), and the watcher keeps dropping.
        assert!(!m.relieve(Duration::from_secs(2)));
        assert_eq!(m.action_or_drop("y"), Ok(true));
        assert_eq!((w.len(), w.dropped()), (4, 1));
        m.shutdown();
    }

    #[test]
    fn relieve_never_waits_in_wait_mode() {
        // There the distribution thread itself waits for a full watcher, holding the watcher list.
        let m = mux(4, FullChannel::Wait);
        let w = m.watch("w").unwrap();
        for _ in 0..4 {
            assert_eq!(m.action_or_drop("x"), Ok(true));
        }
        while w.len() < 4 {
            std::thread::yield_now();
        }
        assert!(m.under_pressure() && w.is_fast());
        assert!(!m.relieve(Duration::from_secs(2)));
        m.shutdown();
    }

    #[test]
    fn relieve_waits_for_the_distribution_thread_to_take_a_half_full_queue() {
        let m = Broadcaster::unstarted(4, FullChannel::Drop, |s: &'static str| s);
        let s = m.shared.clone();
        // The distribution thread is busy with an earlier batch (and then not scheduled): items queue up.
        lock(&s.incoming).distributing = true;
        for _ in 0..3 {
            assert_eq!(m.action_or_drop("x"), Ok(true));
        }
        assert_eq!(lock(&s.incoming).items, 3);
        assert!(m.under_pressure());
        let returned = Arc::new(AtomicBool::new(false));
        let thread = {
            let (s, returned) = (s.clone(), returned.clone());
            std::thread::spawn(move || {
                // It gets its CPU back only once the producer waits for it (or, failing that, returned).
                let mut saw_wait = false;
                while !saw_wait && !returned.load(Ordering::Acquire) {
                    saw_wait = lock(&s.incoming).relieving > 0;
                    std::thread::yield_now();
                }
                s.run();
                saw_wait
            })
        };
        let waited = m.relieve(Duration::from_secs(600));
        let left = lock(&s.incoming).items;
        returned.store(true, Ordering::Release);
        m.shutdown();
        assert_eq!((waited, left, thread.join().unwrap()), (true, 0, true));
        assert_eq!(m.dropped(), 0);
    }

    #[test]
    fn in_wait_mode_a_full_incoming_queue_still_drops() {
        let m = mux(2, FullChannel::Wait);
        let s = &m.shared;
        let mut inc = lock(&s.incoming);
        inc.queue.push_back(Message::Item("a"));
        inc.queue.push_back(Message::Item("b"));
        inc.items = 2;
        assert!(!s.offer(&mut inc, "c"));
        assert_eq!(inc.queue.len(), 2);
        drop(inc);
        assert_eq!(m.dropped(), 1);
        m.shutdown();
    }

    #[test]
    fn shutdown_race_with_concurrent_stops() {
        // TestBroadcasterShutdownRace: stops racing shutdown neither panic nor deadlock.
        for _ in 0..20 {
            let m = Arc::new(mux(4, FullChannel::Wait));
            let lanes: Vec<_> = (0..4).map(|i| m.watch(format!("w{i}")).unwrap()).collect();
            let handles: Vec<_> = lanes
                .into_iter()
                .map(|l| {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        m.stop_watching(&l);
                    })
                })
                .collect();
            m.shutdown();
            for h in handles {
                h.join().unwrap();
            }
        }
    }
}
