"""Keeping the garbage collector off a loaded cluster view.

A synced view of a large cluster is millions of long-lived dicts, lists and strings. The
collector's full (oldest-generation) collections walk every tracked object, so each one
costs tens of milliseconds on such a heap and stalls the event loop — every request in
flight waits behind it. After the initial load, `freeze_loaded_state` collects once and
then moves everything alive to the collector's permanent generation (`gc.freeze`), where
collections no longer look: only what is allocated afterwards (requests, later watch
events) is scanned.

Frozen objects are still freed by reference counting when the view drops them (a pod
deleted, an object replaced by a newer version); only a reference cycle among frozen
objects would stay until exit, and the view holds none. Services call this once, when
their cluster feed first reports the view synced (`ClusterFeed(on_synced=...)`), and
`kerf webhook --state-dir` once its files are loaded; during the initial lists,
`freeze_page` keeps the load itself from paying for ever longer full collections
(`ClusterFeed(on_initial_page=...)`).

In the webhook, what is allocated after the freeze and lives on is mostly the decision
caches (plans, the admission memo, finished answers): a few hundred thousand objects at
25,000 workloads, which a full collection walks in about 200 ms while requests wait.
In the reconciler it is the records, the memory of each workload and the view's newer
versions: its first pass at 100,000 workloads ran 36 full collections, 40 s of its 719 s
of CPU, the longest holding its event loop (and its Lease renewals) 2.6 s; at 25,000 the
15 of its first pass found no unreachable object at all (`benchmarks.figures.Stalls`).
CPython runs one after every 10 middle-generation collections (once enough has
survived); `freeze_for_service`, which both services call once their view is loaded,
makes that every `FULL_COLLECTION_EVERY`. What waits longer for a full collection is
only cyclic garbage that outlived two younger collections, which neither leaves much of.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger("kerf.heap")

#: middle-generation collections between two full ones in the services (CPython's
#: default is 10)
FULL_COLLECTION_EVERY = 100


def freeze_page() -> None:
    """Freeze what is alive now, without collecting first: called after each page of the
    initial lists (`ClusterFeed(on_initial_page=...)`), so the full collections that a
    growing heap triggers during the load stay short instead of walking everything
    loaded so far, again and again.

    The price: reference cycles that became garbage since the previous page are kept
    until exit. While loading, that is little (the pages themselves are freed by
    reference counting before this runs).
    """
    gc.freeze()


def freeze_loaded_state() -> None:
    """Collect once, then exclude every object alive now from later collections."""
    unreachable = gc.collect()
    gc.freeze()
    # Not gc.get_freeze_count(): it walks every frozen object, millions of them here.
    logger.info(
        "loaded state frozen: later garbage collections skip it (%d unreachable objects "
        "collected first)",
        unreachable,
    )


def freeze_for_service() -> None:
    """`freeze_loaded_state`, then full collections only every `FULL_COLLECTION_EVERY`
    middle-generation collections: what the webhook and the reconciler do once their view
    is loaded."""
    freeze_loaded_state()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
