"""Catalog engines kept for the life of a process, one per catalog.

A read from Spark opens a new :class:`~pyspark_ducklake.lake.Lake` at every planning step, in Python workers Spark
keeps between queries. A new engine each time starts with an empty compiled-statement cache, so SQLAlchemy compiles
the same dozen catalog queries again for every read: 40% of a small read's planning. A kept engine compiles each
once per process. It holds no connection between uses: ``Lake.close()`` still disposes its pool (which leaves the
compiled cache), and connections checked out by another Lake on the same engine are not touched by that.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from sqlalchemy import Engine

from pyspark_ducklake.catalog.location import CatalogLocation, create_catalog_engine

# Catalogs a process keeps an engine for; the least recently used one beyond this is disposed and forgotten.
MAX_KEPT_ENGINES = 8

_lock = threading.Lock()
_kept: OrderedDict[tuple[int, str, str], Engine] = OrderedDict()


def kept_catalog_engine(location: CatalogLocation) -> Engine:
    """This process's engine for the catalog at ``location``, created on first use (see the module's text).

    Raises:
        NotInstalledError: the database driver is not installed.
    """
    # the pid: a pool is not shared with a forked child, which makes its own engine
    key = (os.getpid(), location.url, repr(sorted(location.driver_args().items())))
    with _lock:
        engine = _kept.get(key)
        if engine is not None:
            _kept.move_to_end(key)
            return engine
    engine = create_catalog_engine(location)
    with _lock:
        kept = _kept.setdefault(key, engine)
        _kept.move_to_end(key)
        evicted = [_kept.popitem(last=False)[1] for _ in range(len(_kept) - MAX_KEPT_ENGINES)]
    if kept is not engine:  # another thread created one first: use it
        engine.dispose()
    for old in evicted:
        old.dispose()  # closes its idle connections; a Lake still using it keeps working until it closes
    return kept
