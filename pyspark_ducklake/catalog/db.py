"""SQLAlchemy's connection types and driver error, for the floors above that hold a connection without running SQL
(only catalog/ imports sqlalchemy)."""

from __future__ import annotations

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

__all__ = ["Connection", "DBAPIError", "Engine"]
