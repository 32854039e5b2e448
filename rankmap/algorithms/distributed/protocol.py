"""One owner's side of a protocol over an exchange, safe against failures.

The distributed algorithms here talk through an ``exchange`` object
(``owner(ids)``, ``exchange(dest, records)``, ``allreduce(values)``,
``first_error(message)``; ``swap_rounds.LocalExchange`` in one process,
``rankmap.reorder.exchange.MPIExchange`` across MPI ranks).  Every owner must
call every collective, so a step that fails on one owner is not allowed to
skip the ones after it: the failure is kept, the owner sends nothing from
then on, and the next ``_allreduce`` raises the same error on every owner.
"""

from __future__ import annotations

import numpy as np


class OwnerProtocol:
    """Error-keeping transport shared by the protocols of this package."""

    def __init__(self, exchange):
        self.ex = exchange
        self.error: BaseException | None = None

    def _owner(self, ids) -> np.ndarray:
        return self.ex.owner(np.asarray(ids, dtype=np.int64))

    def _send(self, build):
        """Exchange the ``(dest, records)`` that ``build()`` returns; after a
        failure here, take part in the exchange with nothing."""
        if self.error is None:
            try:
                dest, records = build()
                return self.ex.exchange(dest, records)
            except Exception as exc:  # noqa: BLE001 - reported to every owner at the next reduce
                self.error = exc
        # what a failed owner receives is never used: its later steps are skipped
        return self.ex.exchange(np.zeros(0, dtype=np.int64), np.zeros((0, 1)))

    def _local(self, fn):
        if self.error is None:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001
                self.error = exc
        return None

    def neighbour_values(self, rows, values) -> np.ndarray | None:
        """``values`` (one row of columns per local row of ``rows``, a
        symmetric ``Rows``) of the column vertex of every entry of those
        rows, as float64 columns."""
        r = rows.row_of_entry
        cols = np.asarray(values, dtype=np.float64)
        cols = cols[:, None] if cols.ndim == 1 else cols
        got = self._send(lambda: (self._owner(rows.cols),
                                  np.column_stack([rows.cols, rows.tasks[r], cols[r]])))

        def order():
            o = np.lexsort((got[:, 1], got[:, 0]))
            g = got[o]
            if len(g) != len(rows.cols) or np.any(g[:, 0] != rows.tasks[r]) or \
                    np.any(g[:, 1] != rows.cols):
                raise RuntimeError("neighbour values do not match the traffic rows (not symmetric?)")
            return g[:, 2:]

        return self._local(order)

    def neighbour_ids(self, rows, ids) -> np.ndarray | None:
        """``neighbour_values`` of one integer per row (a cluster, a group)."""
        got = self.neighbour_values(rows, ids)
        return self._local(lambda: got[:, 0].astype(np.int64))

    def _allreduce(self, values) -> np.ndarray:
        """Sum of ``values`` over the owners; raises on every owner when any
        owner has failed so far."""
        got = self.ex.allreduce([*values, self.error is not None])
        self._raise_if(got[-1])
        return got[:-1]

    def _raise_if(self, failed) -> None:
        """Collective: when any owner failed, raise the first owner's error on all."""
        if failed:
            mine = None if self.error is None else \
                f"owner {self.ex.rank}: {type(self.error).__name__}: {self.error}"
            raise RuntimeError(self.ex.first_error(mine))
