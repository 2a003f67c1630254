"""Several evaluations on one device at once, timed one at a time.

An evaluator actor runs a few lanes (one `Evaluator` each, each with its own sandbox
worker) over one GPU, so one candidate's build, start-up and correctness trials overlap
another's timed runs. The lanes share one `DeviceGate`:

- `exclusive()`: a timed section. It waits until no judge-side device work runs, then
  stops (SIGSTOP) the process group of every other lane's worker and keeps it stopped
  until the section ends (SIGCONT). The worker being timed, or the baseline job of the
  judge itself, has the device (and the host's CPUs) to itself, whatever the other
  workers' code would like to do; a stopped worker's deadline is extended by the time it
  spent stopped.
- `shared()`: the judge's own device work (reference outputs, comparisons, the copy of a
  worker's CUDA outputs, forking a worker): any number at once, never during a timed
  section. A waiting timed section goes first (no new shared section starts).
- `memory(nbytes)`: a reservation of device memory for one evaluation, so that lanes on
  large tasks wait for each other instead of running out of memory. A waiting
  reservation of the whole capacity goes first (no thread that holds none starts a new one).

A thread that holds the exclusive section may enter `shared()` and `exclusive()` again,
and one inside `shared()` may enter `shared()` again (they pass through); one inside
`shared()` may not ask for the exclusive section. Memory is reserved before the exclusive section, never while
holding it, so no two lanes wait on each other.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


NO_LANE = 0  # the thread of a standby worker: no thread's ident is 0


@dataclass
class _Worker:
    thread: int  # the lane (thread) that runs it
    frozen_since: float | None = None
    frozen_s: float = 0.0


@dataclass
class GateStats:
    exclusive_s: float = 0.0  # time some lane held the device alone
    exclusive_waits_s: float = 0.0  # time lanes waited to get it
    shared_waits_s: float = 0.0  # time judge-side work waited for a timed section
    memory_waits_s: float = 0.0
    freezes: int = 0  # workers stopped for another lane's timed section
    lanes_seen: set = field(default_factory=set)


class DeviceGate:
    def __init__(self, *, capacity_bytes: int = 0):
        """`capacity_bytes`: device memory the lanes may reserve together (0: no limit)."""
        self.capacity_bytes = int(capacity_bytes)
        self._cond = threading.Condition()
        self._owner: int | None = None  # thread holding the exclusive section
        self._depth = 0
        self._owner_since = 0.0
        self._writers_waiting = 0
        self._shared = 0
        self._reserved = 0
        self._reservations: set[int] = set()  # tickets of the reservations held now
        self._holders: dict[int, int] = {}  # thread -> reservations it holds now
        self._whole_waiting = 0  # reservations of the whole capacity waiting for room
        self._next_reservation = 0
        self._workers: dict[int, _Worker] = {}  # pid (= its process group) -> state
        self._local = threading.local()  # this thread's depth of shared sections
        self.stats = GateStats()

    # ------------------------------------------------------------------ judge-side device work
    @contextmanager
    def shared(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me or getattr(self._local, "depth", 0):  # held already: pass through
                pass_through = True
            else:
                pass_through = False
                t0 = time.monotonic()
                while self._owner is not None or self._writers_waiting:
                    self._cond.wait()
                self.stats.shared_waits_s += time.monotonic() - t0
                self._shared += 1
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1
            if not pass_through:
                with self._cond:
                    self._shared -= 1
                    self._cond.notify_all()

    @contextmanager
    def shared_if_free(self) -> Iterator[bool]:
        """`shared()` when it can be had at once (yields True), else nothing (False): for
        housekeeping that may be skipped rather than wait for a timed section."""
        me = threading.get_ident()
        with self._cond:
            free = (self._owner == me or getattr(self._local, "depth", 0)
                    or (self._owner is None and not self._writers_waiting))
        if not free:
            yield False
            return
        with self.shared():
            yield True

    # ------------------------------------------------------------------ timed sections
    def acquire_exclusive(self) -> float:
        """Block until this thread has the device alone; returns the seconds it waited."""
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return 0.0
            if getattr(self._local, "depth", 0):
                raise RuntimeError("a thread inside shared() asked for the exclusive section (it would wait "
                                   "for itself)")
            t0 = time.monotonic()
            self._writers_waiting += 1
            try:
                while self._owner is not None or self._shared:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            waited = time.monotonic() - t0
            self.stats.exclusive_waits_s += waited
            self._owner, self._depth, self._owner_since = me, 1, time.monotonic()
            self.stats.lanes_seen.add(me)
            for pid, w in self._workers.items():
                if w.thread != me and w.frozen_since is None and _signal_group(pid, signal.SIGSTOP):
                    w.frozen_since = time.monotonic()
                    self.stats.freezes += 1
            return waited

    def release_exclusive(self) -> None:
        me = threading.get_ident()
        with self._cond:
            if self._owner != me:
                raise RuntimeError("release_exclusive by a thread that does not hold the device")
            self._depth -= 1
            if self._depth:
                return
            now = time.monotonic()
            for pid, w in self._workers.items():
                if w.frozen_since is not None:
                    _signal_group(pid, signal.SIGCONT)
                    w.frozen_s += now - w.frozen_since
                    w.frozen_since = None
            self.stats.exclusive_s += now - self._owner_since
            self._owner = None
            self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()

    def holds_exclusive(self) -> bool:
        return self._owner == threading.get_ident()

    # ------------------------------------------------------------------ workers
    def register(self, pid: int, *, standby: bool = False) -> None:
        """A worker this thread has just forked, before it is sent its job (until then it
        runs only the judge's own code): stopped at once if another lane is timing. A
        `standby` worker (forked ahead of a job no lane has yet) belongs to no lane: it is
        stopped during every lane's timed section until a lane `adopt`s it."""
        me = threading.get_ident()
        with self._cond:
            w = self._workers[pid] = _Worker(thread=NO_LANE if standby else me)
            if not standby:
                self.stats.lanes_seen.add(me)
            if self._owner is not None and self._owner != w.thread and _signal_group(pid, signal.SIGSTOP):
                w.frozen_since = time.monotonic()
                self.stats.freezes += 1

    def adopt(self, pid: int) -> None:
        """This thread's lane takes the standby worker `pid` for its job (registered as
        new if the gate did not know it); its stopped time counts from now. Stopped for
        this lane's own timed section (a job run with the device held, as a recheck is),
        it goes on at once: it is that section's worker now."""
        me = threading.get_ident()
        with self._cond:  # re-entrant
            w = self._workers.get(pid)
            if w is None:
                self.register(pid)
                return
            w.thread, w.frozen_s = me, 0.0
            if w.frozen_since is not None:
                if self._owner == me:
                    _signal_group(pid, signal.SIGCONT)
                    w.frozen_since = None
                else:  # stopped for another lane's timed section, still
                    w.frozen_since = time.monotonic()
            self.stats.lanes_seen.add(me)

    def unregister(self, pid: int) -> float:
        """Forget a worker (it is being killed); returns the seconds it spent stopped."""
        with self._cond:
            w = self._workers.pop(pid, None)
            if w is None:
                return 0.0
            if w.frozen_since is not None:
                _signal_group(pid, signal.SIGCONT)  # a stopped group dies only once continued
                w.frozen_s += time.monotonic() - w.frozen_since
            return w.frozen_s

    def frozen_s(self, pid: int) -> float:
        """Seconds the worker `pid` has spent stopped for other lanes' timed sections."""
        with self._cond:
            w = self._workers.get(pid)
            if w is None:
                return 0.0
            ongoing = time.monotonic() - w.frozen_since if w.frozen_since is not None else 0.0
            return w.frozen_s + ongoing

    # ------------------------------------------------------------------ device memory
    @contextmanager
    def memory(self, nbytes: int) -> Iterator[None]:
        """Reserve `nbytes` (at most the whole capacity) for the duration of the block. A
        reservation of the whole capacity (a retry after running out of memory, or an
        evaluation whose estimate is as large) goes first: while one waits, a new
        reservation of a thread that holds none waits too, so that lanes coming and going
        cannot keep it waiting for ever."""
        n = max(0, int(nbytes))
        if self.capacity_bytes:
            n = min(n, self.capacity_bytes)
        if self.holds_exclusive() and n:
            raise RuntimeError("reserve device memory before the exclusive section, not inside it")
        me = threading.get_ident()
        whole = bool(self.capacity_bytes) and n == self.capacity_bytes
        with self._cond:
            t0 = time.monotonic()
            self._whole_waiting += whole
            try:
                while self.capacity_bytes and (
                        self._reserved + n > self.capacity_bytes
                        or (n and not whole and self._whole_waiting and not self._holders.get(me))):
                    self._cond.wait()
            finally:
                self._whole_waiting -= whole
            self.stats.memory_waits_s += time.monotonic() - t0
            self._reserved += n
            self._holders[me] = self._holders.get(me, 0) + 1
            self._next_reservation += 1
            ticket = self._next_reservation
            self._reservations.add(ticket)
        try:
            yield
        finally:
            with self._cond:
                self._reserved -= n
                self._holders[me] -= 1
                if not self._holders[me]:
                    del self._holders[me]
                self._reservations.discard(ticket)
                self._cond.notify_all()

    def wait_for_reservations(self, *, timeout_s: float) -> bool:
        """Wait until every device-memory reservation held now has ended (new ones may begin
        meanwhile: nobody else waits for this). For a retry after the device ran out of
        memory; call it holding none. False when `timeout_s` passed first."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._cond:
            held = set(self._reservations)
            while held & self._reservations:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def snapshot(self) -> dict:
        with self._cond:
            s = self.stats
            return {"exclusive_s": round(s.exclusive_s, 3), "exclusive_waits_s": round(s.exclusive_waits_s, 3),
                    "shared_waits_s": round(s.shared_waits_s, 3), "memory_waits_s": round(s.memory_waits_s, 3),
                    "freezes": s.freezes, "lanes": len(s.lanes_seen), "reserved_bytes": self._reserved,
                    "capacity_bytes": self.capacity_bytes}


def _signal_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
