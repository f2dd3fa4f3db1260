"""WAL checkpoints on a thread of their own.

SQLite's automatic checkpoint runs inside the COMMIT that pushes the WAL past its
threshold, on whichever thread committed: with commits written on the event loop thread
(see :mod:`perdure.store.sqlite.writer`), that stalled every actor for a few
milliseconds, fsyncs included. Here a separate connection runs ``PASSIVE`` checkpoints
(they never block writers or readers) at most every ``interval`` seconds while writes
happen, and the sqlite3 module releases the GIL while SQLite works, so the copy-back
overlaps with the loop's own work. The write connection keeps a far higher automatic
threshold (:data:`FALLBACK_AUTOCHECKPOINT_PAGES`) in case this thread falls behind.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["FALLBACK_AUTOCHECKPOINT_PAGES", "Checkpointer"]

_log = logging.getLogger("perdure.store.sqlite.store")

# 10x SQLite's default of 1,000 pages: reached only if the checkpoint thread lags.
FALLBACK_AUTOCHECKPOINT_PAGES = 10_000


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` after writes, off the writers' threads."""

    def __init__(self, path: Path, *, interval: float = 0.1) -> None:
        self._path = path
        self._interval = interval
        self._written = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="perdure-sqlite-checkpoint")
        # A daemon thread, like the writer's: a program that forgets close() still exits.
        self._thread.daemon = True
        self.checkpoints = 0  # diagnostics and tests

    def start(self) -> None:
        """Start the thread (the database file must exist and be in WAL mode)."""
        self._thread.start()

    def note_write(self) -> None:
        """Something was committed: checkpoint soon. Cheap enough to call per commit."""
        self._written.set()

    def stop(self) -> None:
        """End the thread (a checkpoint in progress finishes first)."""
        self._stopping.set()
        self._written.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        try:
            db = sqlite3.connect(str(self._path), isolation_level=None)
        except sqlite3.Error:
            _log.warning("no checkpoint thread; SQLite checkpoints inline", exc_info=True)
            return
        try:
            while True:
                self._written.wait()
                if self._stopping.is_set():
                    return
                self._written.clear()
                self._checkpoint(db)
                # Let writes accumulate: one checkpoint (and its fsyncs) per interval.
                if self._stopping.wait(self._interval):
                    return
        finally:
            db.close()

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.Error:
            # Transient (a full disk, an I/O error): the writer's fallback threshold and the
            # checkpoint at close still bound the WAL; say so once per failure.
            _log.warning("WAL checkpoint failed", exc_info=True)
